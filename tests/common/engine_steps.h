// Engine API helpers for tests that drive an Engine directly: open it or fail the test, and step it until
// every submitted request has finished.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "rewind/engine.h"

namespace rwd::test {

// The opened engine, or null after a test failure naming why it did not open.
inline std::unique_ptr<Engine> open_engine(const EngineOptions& options) {
  auto engine = Engine::open(options);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  return engine.is_ok() ? std::move(engine).value() : nullptr;
}

// Steps until the engine is idle; a failed step fails the test and stops.
inline void step_until_idle(Engine& engine) {
  while (!engine.idle()) {
    const Status status = engine.step();
    EXPECT_TRUE(status.is_ok()) << status.message();
    if (!status) break;
  }
}

}  // namespace rwd::test
