// Range checks for SamplingParams, one message per field.
#include "sampling/sampling_params.h"

#include <cmath>

namespace rwd::sampling {

Status validate(const SamplingParams& params) {
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) {
    return Status::errorf("sampling temperature must be finite and >= 0 (0 = greedy), got {}", params.temperature);
  }
  if (params.top_k < 0) {
    return Status::errorf("sampling top_k must be >= 0 (0 = off), got {}", params.top_k);
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return Status::errorf("sampling top_p must be in (0, 1] (1 = off), got {}", params.top_p);
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    return Status::errorf("sampling min_p must be in [0, 1] (0 = off), got {}", params.min_p);
  }
  if (!(params.repetition_penalty > 0.0f) || !std::isfinite(params.repetition_penalty)) {
    return Status::errorf("sampling repetition_penalty must be finite and > 0 (1 = off), got {}",
                          params.repetition_penalty);
  }
  if (params.repeat_last_n < -1) {
    return Status::errorf("sampling repeat_last_n must be >= -1 (-1 = all, 0 = none), got {}", params.repeat_last_n);
  }
  if (!std::isfinite(params.frequency_penalty)) {
    return Status::errorf("sampling frequency_penalty must be finite, got {}", params.frequency_penalty);
  }
  if (!std::isfinite(params.presence_penalty)) {
    return Status::errorf("sampling presence_penalty must be finite, got {}", params.presence_penalty);
  }
  return Status::ok();
}

}  // namespace rwd::sampling
