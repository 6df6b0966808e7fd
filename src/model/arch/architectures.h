// One accessor per architecture file; registry.cpp lists them.
#pragma once

#include "model/arch_info.h"

namespace rwd::model::arch {

const ArchInfo& llama();
const ArchInfo& qwen2();
const ArchInfo& qwen3();
const ArchInfo& gemma3();
const ArchInfo& qwen35();
const ArchInfo& qwen35moe();
const ArchInfo& qwen3next();
const ArchInfo& lfm2();
const ArchInfo& mamba2();
const ArchInfo& granitehybrid();
const ArchInfo& falcon_h1();
const ArchInfo& kimi_linear();
const ArchInfo& nemotron_h();
const ArchInfo& nemotron_h_moe();

}  // namespace rwd::model::arch
