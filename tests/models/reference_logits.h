// The rewind side of the float64 reference tests: runs a token sequence through a loaded model twice — the
// first n_prompt tokens in one forward and the rest one at a time, then every token one at a time from an empty
// state — and checks the logits at every position against the reference's rows: the largest error of a row
// must stay under tolerance × max(1, the row's largest |logit|).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "state/model_state.h"

namespace rwd::test {

inline void expect_logits_match_reference(const model::Model& model, ThreadPool& pool,
                                          const std::vector<int32_t>& tokens, int n_prompt,
                                          const std::vector<std::vector<double>>& expected, double tolerance,
                                          const std::string& label) {
  const int64_t n_vocab = static_cast<int64_t>(expected.front().size());
  const int n_tokens = static_cast<int>(tokens.size());
  auto check = [&](const float* row, int position, const char* mode) {
    double max_error = 0, max_abs = 0;
    for (int64_t v = 0; v < n_vocab; ++v) {
      max_error = std::max(max_error, std::abs(row[v] - expected[position][v]));
      max_abs = std::max(max_abs, std::abs(expected[position][v]));
    }
    EXPECT_LT(max_error, tolerance * std::max(1.0, max_abs))
        << label << " " << mode << " prompt " << n_prompt << " position " << position;
  };
  std::vector<float> logits;
  model::Batch batch;
  {  // The prompt in one forward, then the rest one at a time.
    model::ForwardContext ctx(model, pool, 256);
    state::ModelState state(model.kv_specs(), model.recurrent_specs(), 1, 256);
    for (int i = 0; i < n_prompt; ++i) batch.add(tokens[i], i, 0, true);
    ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
    for (int i = 0; i < n_prompt; ++i) check(logits.data() + i * n_vocab, i, "prefill");
    for (int i = n_prompt; i < n_tokens; ++i) {
      batch.clear();
      batch.add(tokens[i], i, 0, true);
      ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
      check(logits.data(), i, "decode after prefill");
    }
  }
  {  // Every token one at a time from an empty state.
    model::ForwardContext ctx(model, pool, 256);
    state::ModelState state(model.kv_specs(), model.recurrent_specs(), 1, 256);
    for (int i = 0; i < n_tokens; ++i) {
      batch.clear();
      batch.add(tokens[i], i, 0, true);
      ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
      check(logits.data(), i, "token by token");
    }
  }
}

}  // namespace rwd::test
