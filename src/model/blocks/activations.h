// The scalar gate functions of the recurrent mixers (decays, dt, beta), computed as llama.cpp computes them so
// that decays agree with GGUF files tuned against it. Vectorised SiLU and SwiGLU are kernels (kernels/cpu/glu.h).
#pragma once

#include <cmath>

namespace rwd::model::blocks {

inline float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace rwd::model::blocks
