// The only list of architectures: adding one is a file in arch/ and a row here (and its golden test).
#include <array>

#include "model/arch/architectures.h"

namespace rwd::model {
namespace {

const std::array<const ArchInfo*, 14>& registry() {
  static const std::array<const ArchInfo*, 14> rows = {
      &arch::llama(),      &arch::qwen2(),          &arch::qwen3(),         &arch::gemma3(),    &arch::qwen35(),
      &arch::qwen35moe(),  &arch::qwen3next(),      &arch::lfm2(),          &arch::mamba2(),    &arch::granitehybrid(),
      &arch::falcon_h1(),  &arch::kimi_linear(),    &arch::nemotron_h(),    &arch::nemotron_h_moe()};
  return rows;
}

}  // namespace

const ArchInfo* find_arch(std::string_view name) {
  for (const ArchInfo* info : registry()) {
    if (info->name == name) return info;
  }
  return nullptr;
}

std::vector<std::string_view> arch_names() {
  std::vector<std::string_view> names;
  for (const ArchInfo* info : registry()) names.push_back(info->name);
  return names;
}

}  // namespace rwd::model
