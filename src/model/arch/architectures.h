// One accessor per architecture file, declared from the list (list.h); registry.cpp collects them.
#pragma once

#include "model/arch/list.h"
#include "model/arch_info.h"

namespace rwd::model::arch {

#define REWIND_DECLARE_ARCH(id) const ArchInfo& id();
REWIND_ARCHITECTURES(REWIND_DECLARE_ARCH)
#undef REWIND_DECLARE_ARCH

}  // namespace rwd::model::arch
