// `rewind mkmodel --arch`: random-weight models for tests and benchmarks. A tool above the model module (its
// table expands model/arch/list.h), linked by the app and the tests, never by the engine, so it is not part of
// the engine's public API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace rwd {

struct SyntheticModelOptions {
  std::string arch;           // a registry name: llama, qwen3, gemma3, ...
  std::string preset = "tiny";  // tiny | small
  // Weight type of the matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k.
  std::string dtype = "f32";
  uint64_t seed = 1;
  std::string output_path;
};

// Writes a random-weight GGUF with llama.cpp's names and conventions and a byte-level tokenizer.
Status make_synthetic_model(const SyntheticModelOptions& options);
std::vector<std::string> synthetic_arch_names();

}  // namespace rwd
