// SamplingParams: how one sequence picks its next token, and the check that the values are usable.
// The chain that applies them lives in sampler.h; this file holds only the data and its validation.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace rwd::sampling {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax after penalties); > 0 divides the logits
  int32_t top_k = 0;                // keep the k highest logits; 0 = off
  float top_p = 1.0f;               // keep the smallest top set whose probability reaches top_p; 1 = off
  float min_p = 0.0f;               // drop tokens with probability < min_p * max probability; 0 = off
  float repetition_penalty = 1.0f;  // recent tokens: logit > 0 is divided by it, otherwise multiplied; 1 = off
  int32_t repeat_last_n = 64;       // how many recent tokens the penalties look at; 0 = none, -1 = all
  float frequency_penalty = 0.0f;   // subtracted from a recent token's logit once per occurrence; 0 = off
  float presence_penalty = 0.0f;    // subtracted once from the logit of any recent token; 0 = off
  uint64_t seed = 0;                // same seed, same logits, same history: same tokens, on every platform
};

// Ok, or an error naming the first field out of range with its value and the allowed range.
Status validate(const SamplingParams& params);

}  // namespace rwd::sampling
