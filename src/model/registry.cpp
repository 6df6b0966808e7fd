// The registry: every architecture of the list (arch/list.h), found by its general.architecture name.
#include <vector>

#include "model/arch/architectures.h"

namespace rwd::model {
namespace {

#define REWIND_ARCH_ROW(id) &arch::id(),
const std::vector<const ArchInfo*>& registry() {
  static const std::vector<const ArchInfo*> rows = {REWIND_ARCHITECTURES(REWIND_ARCH_ROW)};
  return rows;
}
#undef REWIND_ARCH_ROW

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
