// Every architecture in the registry must have a test against an independent reference (STYLE: "a registry
// row without one fails the suite"). Adding a registry row without adding it here — and the test it names —
// fails this test.
// links: rewind_model
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model/arch_info.h"

namespace rwd {
namespace {

// Architecture → the test that checks it against a reference nobody here wrote or computed with shared code.
const std::map<std::string, std::string> kReferenceTests = {
    {"llama", "test_dense_reference (float64 forward) + test_real_models (SmolLM2 vs llama.cpp)"},
    {"qwen2", "test_dense_reference (float64 forward) + test_real_models (Qwen2.5-Coder 0.5B/1.5B vs llama.cpp)"},
    {"qwen3", "test_golden (llama.cpp golden) + test_dense_reference"},
    {"gemma3", "test_dense_reference (float64 forward) + test_real_models (Gemma 3 vs llama.cpp)"},
    {"qwen35", "test_golden (llama.cpp golden for qwen35-tiny-f32)"},
    {"qwen35moe", "test_golden (llama.cpp golden for qwen35moe-tiny-f32)"},
    {"qwen3next", "test_golden (llama.cpp golden for qwen3next-tiny-f32)"},
    {"lfm2", "test_golden (llama.cpp golden for lfm2-tiny-f32)"},
    {"mamba2", "test_golden (llama.cpp golden for mamba2-tiny-f32) + test_mamba2_reference (float64 forward)"},
    {"granitehybrid", "test_golden (llama.cpp golden for granitehybrid-tiny-f32) + test_mamba2_reference"},
    {"falcon-h1", "test_golden (llama.cpp golden for falcon-h1-tiny-f32)"},
    {"kimi-linear", "test_golden (llama.cpp golden for kimi-linear-tiny-f32) + test_kimi_reference (float64 forward)"},
    {"nemotron_h", "test_golden (llama.cpp golden for nemotron_h-tiny-f32)"},
    {"nemotron_h_moe", "test_golden (llama.cpp golden for nemotron_h_moe-tiny-f32)"},
};

TEST(RegistryCoverage, EveryArchitectureHasAReferenceTest) {
  for (std::string_view name : model::arch_names()) {
    EXPECT_TRUE(kReferenceTests.count(std::string(name)))
        << "architecture '" << name << "' is in the registry without a reference test";
  }
  for (const auto& [name, test] : kReferenceTests) {
    EXPECT_NE(model::find_arch(name), nullptr) << name << " is listed here but not in the registry";
  }
}

}  // namespace
}  // namespace rwd
