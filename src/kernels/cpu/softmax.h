// Numerically stable softmax in place over n values (max subtracted, sum in a fixed order).
#pragma once

#include <cstdint>

namespace rwd::kernels::cpu {

void softmax(float* x, int64_t n);

}  // namespace rwd::kernels::cpu
