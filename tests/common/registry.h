// The registry's architectures for parameterised tests: every test that covers "all architectures" or "all
// hybrids" iterates these, so a new row in model/arch/list.h is covered without editing any test. Each
// architecture's llama.cpp golden model is tests/data/<name>-tiny-f32.gguf.
#pragma once

#include <string>
#include <vector>

#include "model/arch_info.h"

namespace rwd::test {

inline std::vector<std::string> all_archs() {
  std::vector<std::string> names;
  for (std::string_view name : model::arch_names()) names.emplace_back(name);
  return names;
}

// Those with state that speculation rolls back (convolution windows, SSM or delta-rule states).
inline std::vector<std::string> recurrent_archs() {
  std::vector<std::string> names;
  for (std::string_view name : model::arch_names()) {
    if (model::find_arch(name)->recurrent) names.emplace_back(name);
  }
  return names;
}

inline bool has_mtp(const std::string& arch) { return model::find_arch(arch)->forward_mtp != nullptr; }

// A registry name as a test-name part: gtest allows only letters, digits and '_' ("falcon-h1" → "falcon_h1").
inline std::string test_name_part(std::string name) {
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

}  // namespace rwd::test
