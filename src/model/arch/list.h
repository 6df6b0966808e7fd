// The list of architectures, one row each: X(id) means arch/<file>.cpp defines `const ArchInfo& arch::id()` and a
// generator in src/synthetic/ defines `synthetic::write_id` (`rewind mkmodel --arch`). The registry, the generator
// table and the tests all expand or iterate this list, so a new architecture is its arch file, its generator,
// its llama.cpp golden data (tests/data/<name>-tiny-f32.*) and one row here.
#pragma once

#define REWIND_ARCHITECTURES(X) \
  X(llama)                      \
  X(qwen2)                      \
  X(qwen3)                      \
  X(gemma3)                     \
  X(qwen35)                     \
  X(qwen35moe)                  \
  X(qwen3next)                  \
  X(lfm2)                       \
  X(mamba2)                     \
  X(granitehybrid)              \
  X(falcon_h1)                  \
  X(kimi_linear)                \
  X(nemotron_h)                 \
  X(nemotron_h_moe)
