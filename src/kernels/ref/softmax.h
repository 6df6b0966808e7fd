// Reference softmax over n values in float64 (max subtracted, then exp, sum, divide). Not meant to be fast.
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

// In place; x must hold at least one finite value.
void softmax(float* x, int64_t n);

}  // namespace rwd::kernels::ref
