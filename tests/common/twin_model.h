// Draft models for the speculation tests: a perturbed copy of a test model agrees with the target part of the
// time, so drafts are accepted and rejected at every depth, and its own (hybrid) state rolls back too.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "rewind/tools.h"

namespace rwd::test {

// The twin of tests/data/<name>, made once per process in the temporary directory and removed at exit.
inline std::string twin_of(const std::string& name) {
  static std::map<std::string, std::string> made;
  auto it = made.find(name);
  if (it != made.end()) return it->second;
  if (made.empty()) {
    std::atexit([] {
      for (const auto& entry : made) std::filesystem::remove(entry.second);
    });
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rewind_twin_" + std::to_string(::getpid()) + "_" + name)).string();
  const Status status = make_twin_model({std::string(REWIND_TEST_DATA) + "/" + name, 0.1f, 5, path});
  EXPECT_TRUE(status.is_ok()) << status.message();
  made[name] = path;
  return path;
}

}  // namespace rwd::test
