// Attention: both ISA row kernels against the float64 reference (GQA/MQA/MHA, head_dim 4..256, decode over
// 4097 keys, prefill batches, sliding windows, softcap) with error bounds derived per element, and the
// bit-exact invariances the engine relies on: batch composition, thread count, keys outside the causal window.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "float_kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/ref/attention.h"
#include "tensor/dtype.h"

namespace rwd {
namespace {

using kernels::cpu::AttentionParams;
using test::Isa;
using test::kFloatEps;

struct Inputs {
  std::vector<float> q;  // [n_tokens, n_head, head_dim]
  std::vector<float> k;  // [n_kv, n_head_kv, head_dim]
  std::vector<float> v;
  std::vector<int32_t> positions;
};

Inputs make_inputs(test::Random& random, const AttentionParams& params, int64_t n_kv,
                   std::vector<int32_t> positions) {
  const int64_t n_tokens = static_cast<int64_t>(positions.size());
  Inputs inputs;
  inputs.q = random.floats(n_tokens * params.n_head * params.head_dim, -3.0f, 3.0f);
  inputs.k = random.floats(n_kv * params.n_head_kv * params.head_dim, -1.0f, 1.0f);
  inputs.v = random.floats(n_kv * params.n_head_kv * params.head_dim, -1.0f, 1.0f);
  inputs.positions = std::move(positions);
  return inputs;
}

// The last n_tokens positions of n_kv rows, as a prompt chunk or a verify batch has them.
std::vector<int32_t> trailing_positions(int64_t n_tokens, int64_t n_kv) {
  std::vector<int32_t> positions(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) positions[t] = static_cast<int32_t>(n_kv - n_tokens + t);
  return positions;
}

std::vector<float> run_attention(Isa isa, const Inputs& inputs, int64_t n_kv, const AttentionParams& params,
                                 ThreadPool* pool) {
  const int64_t n_tokens = static_cast<int64_t>(inputs.positions.size());
  std::vector<float> out = test::nan_filled(n_tokens * params.n_head * params.head_dim);
  kernels::cpu::detail::attention_with(
      isa == Isa::scalar ? kernels::cpu::detail::attention_group_scalar : kernels::cpu::detail::attention_group_avx2,
      inputs.q.data(), inputs.positions.data(), n_tokens, inputs.k.data(), inputs.v.data(), n_kv, out.data(), params,
      pool);
  return out;
}

// First-order float32 error bound for each output element of one (token, head), from the float64 scores:
//  - score s_p = scale * q·k: the kernels sum head_dim products in 4 or 8 lanes plus a reduction tree, so
//    |error| <= (head_dim/4 + 4) half-ulps of sum |q_i k_i|, plus the scale multiply; softcap adds the tanh
//    error (a few ulps of the cap) and the rounding of s / cap and of the final product;
//  - weight w_p = exp(s_p - max): its relative error is the score error plus half an ulp of |s_p - max| plus
//    2 ulps of exp (the max itself cancels in the normalisation);
//  - out_d = sum w_p v_pd / sum w_p: weight errors move it by sum w_p err_p |v_pd - out_d| / sum w_p; the values
//    are summed in float, restarting every kAttentionBlock keys, and each step rounds its partial sum by at most
//    half an ulp of |partial sum| (float64 after that); the final division and rounding add an ulp of out_d.
std::vector<double> error_bounds(const Inputs& inputs, int64_t t, int64_t h, const AttentionParams& params) {
  const int64_t head_dim = params.head_dim;
  const int64_t kv_head = h / (params.n_head / params.n_head_kv);
  const int64_t kv_stride = params.n_head_kv * head_dim;
  const int64_t pos = inputs.positions[t];
  const int64_t first = params.window > 0 ? std::max<int64_t>(0, pos - params.window + 1) : 0;
  const float* q = inputs.q.data() + (t * params.n_head + h) * head_dim;
  std::vector<double> scores;
  std::vector<double> score_errors;
  for (int64_t p = first; p <= pos; ++p) {
    const float* k = inputs.k.data() + p * kv_stride + kv_head * head_dim;
    double dot = 0.0;
    double magnitude = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) {
      dot += static_cast<double>(q[d]) * k[d];
      magnitude += std::fabs(static_cast<double>(q[d]) * k[d]);
    }
    double score = dot * params.scale;
    double error = 0.5 * kFloatEps * ((head_dim / 4.0 + 4.0) * params.scale * magnitude + std::fabs(score));
    if (params.softcap > 0.0f) {
      const double capped = params.softcap * std::tanh(score / params.softcap);
      error += kFloatEps * (2.0 * params.softcap + std::fabs(capped) + std::fabs(score));
      score = capped;
    }
    scores.push_back(score);
    score_errors.push_back(error);
  }
  const double max_score = *std::max_element(scores.begin(), scores.end());
  std::vector<double> weights(scores.size());
  double weight_sum = 0.0;
  for (size_t j = 0; j < scores.size(); ++j) {
    weights[j] = std::exp(scores[j] - max_score);
    weight_sum += weights[j];
  }
  std::vector<double> bounds(head_dim);
  for (int64_t d = 0; d < head_dim; ++d) {
    double out = 0.0;
    for (size_t j = 0; j < scores.size(); ++j) {
      out += weights[j] * inputs.v[(first + j) * kv_stride + kv_head * head_dim + d];
    }
    out /= weight_sum;
    double weight_part = 0.0;
    double rounding_part = 0.0;
    double partial_sum = 0.0;
    for (size_t j = 0; j < scores.size(); ++j) {
      const double value = inputs.v[(first + j) * kv_stride + kv_head * head_dim + d];
      const double weight_error = score_errors[j] + kFloatEps * (0.5 * (max_score - scores[j]) + 2.0);
      weight_part += weights[j] * weight_error * std::fabs(value - out);
      if (j % kernels::cpu::detail::kAttentionBlock == 0) partial_sum = 0.0;
      partial_sum += weights[j] * value;
      rounding_part += 0.5 * kFloatEps * std::fabs(partial_sum);
    }
    bounds[d] = 1.1 * (weight_part + rounding_part) / weight_sum + kFloatEps * std::fabs(out);
  }
  return bounds;
}

void expect_matches_reference(Isa isa, const Inputs& inputs, int64_t n_kv, const AttentionParams& params) {
  const int64_t n_tokens = static_cast<int64_t>(inputs.positions.size());
  std::vector<float> expected = test::nan_filled(n_tokens * params.n_head * params.head_dim);
  kernels::ref::attention(inputs.q.data(), inputs.positions.data(), n_tokens, inputs.k.data(), inputs.v.data(), n_kv,
                          expected.data(), params);
  const std::vector<float> actual = run_attention(isa, inputs, n_kv, params, nullptr);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < params.n_head; ++h) {
      const std::vector<double> bounds = error_bounds(inputs, t, h, params);
      for (int64_t d = 0; d < params.head_dim; ++d) {
        const int64_t i = (t * params.n_head + h) * params.head_dim + d;
        ASSERT_NEAR(actual[i], expected[i], bounds[d])
            << test::isa_name(isa) << " heads " << params.n_head << "/" << params.n_head_kv << " head_dim "
            << params.head_dim << " n_kv " << n_kv << " window " << params.window << " softcap " << params.softcap
            << " token " << t << " head " << h << " d " << d;
      }
    }
  }
}

class AttentionTest : public ::testing::TestWithParam<Isa> {};

TEST_P(AttentionTest, MatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(73);
  struct Heads {
    int64_t n_head, n_head_kv, head_dim;
  };
  const Heads heads[] = {{8, 1, 64}, {8, 2, 128}, {4, 4, 256}, {3, 3, 64}, {4, 2, 12}, {2, 1, 4}};
  struct Tokens {
    int64_t n_tokens, n_kv;
  };
  const Tokens tokens[] = {{1, 1}, {1, 4097}, {2, 130}, {17, 300}};
  for (const Heads& hd : heads) {
    for (const Tokens& tk : tokens) {
      for (int64_t window : {0, 5, 200}) {
        for (float softcap : {0.0f, 30.0f}) {
          const AttentionParams params{.n_head = hd.n_head, .n_head_kv = hd.n_head_kv, .head_dim = hd.head_dim,
                                       .scale = 1.0f / std::sqrt(static_cast<float>(hd.head_dim)),
                                       .softcap = softcap, .window = window};
          const Inputs inputs = make_inputs(random, params, tk.n_kv, trailing_positions(tk.n_tokens, tk.n_kv));
          expect_matches_reference(isa, inputs, tk.n_kv, params);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Positions need not be the trailing rows: verify batches of several drafts, or tokens out of order.
TEST_P(AttentionTest, ScatteredPositions) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(79);
  const AttentionParams params{.n_head = 6, .n_head_kv = 2, .head_dim = 72, .scale = 0.2f, .window = 0};
  const Inputs inputs = make_inputs(random, params, 1000, {999, 0, 500, 127, 128, 129, 256, 3});
  expect_matches_reference(isa, inputs, 1000, params);
}

// One visible key: the output is that key's value row, exactly.
TEST_P(AttentionTest, SingleKeyReturnsItsValue) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(83);
  const AttentionParams params{.n_head = 4, .n_head_kv = 2, .head_dim = 20, .scale = 0.5f, .window = 1};
  const Inputs inputs = make_inputs(random, params, 9, {0, 8, 4});
  const std::vector<float> out = run_attention(isa, inputs, 9, params, nullptr);
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t h = 0; h < 4; ++h) {
      for (int64_t d = 0; d < 20; ++d) {
        ASSERT_EQ(out[(t * 4 + h) * 20 + d], inputs.v[(inputs.positions[t] * 2 + h / 2) * 20 + d]);
      }
    }
  }
}

// Rows a token cannot see (after its position, or before its window) do not touch a single bit of its output.
TEST_P(AttentionTest, InvisibleRowsAreIgnored) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(89);
  for (int64_t window : {0, 37}) {
    const AttentionParams params{.n_head = 8, .n_head_kv = 2, .head_dim = 64, .scale = 0.125f, .window = window};
    const int64_t n_kv = 400;
    Inputs inputs = make_inputs(random, params, n_kv, {200, 201, 202});
    const std::vector<float> before = run_attention(isa, inputs, n_kv, params, nullptr);
    const int64_t row = params.n_head_kv * params.head_dim;
    for (int64_t p = 0; p < n_kv; ++p) {
      const bool visible_to_some = p <= 202 && (window == 0 || p >= 200 - window + 1);
      if (visible_to_some) continue;
      for (int64_t i = p * row; i < (p + 1) * row; ++i) inputs.k[i] = inputs.v[i] = 1e30f;
    }
    EXPECT_TRUE(test::same_bits(run_attention(isa, inputs, n_kv, params, nullptr), before)) << "window " << window;
  }
}

// A token's output is the same, bit for bit, computed alone, inside a batch of 7, and with any thread count.
TEST_P(AttentionTest, BatchAndThreadInvariant) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(97);
  for (float softcap : {0.0f, 50.0f}) {
    for (int64_t window : {0, 100}) {
      const AttentionParams params{.n_head = 8, .n_head_kv = 2, .head_dim = 128, .scale = 0.088f,
                                   .softcap = softcap, .window = window};
      const int64_t n_kv = 700;
      const Inputs batch = make_inputs(random, params, n_kv, {693, 694, 695, 696, 697, 698, 699});
      const std::vector<float> reference = run_attention(isa, batch, n_kv, params, nullptr);
      for (int n_threads : {1, 2, 3, 4}) {
        ThreadPool pool(n_threads);
        EXPECT_TRUE(test::same_bits(run_attention(isa, batch, n_kv, params, &pool), reference)) << n_threads;
      }
      const int64_t row = params.n_head * params.head_dim;
      ThreadPool pool(3);
      for (int64_t t = 0; t < 7; ++t) {
        Inputs alone = batch;
        alone.q.assign(batch.q.begin() + t * row, batch.q.begin() + (t + 1) * row);
        alone.positions = {batch.positions[t]};
        // Alone with only the rows up to its own position, as plain decoding would have them.
        const int64_t n_kv_alone = batch.positions[t] + 1;
        EXPECT_TRUE(test::same_bits(run_attention(isa, alone, n_kv_alone, params, &pool),
                                    std::vector<float>(reference.begin() + t * row, reference.begin() + (t + 1) * row)))
            << "token " << t << " softcap " << softcap << " window " << window;
      }
    }
  }
}

// Several sequences in one round (every slot of a step): decode tokens, a verify batch, a sequence whose keys
// are a tree's paths and an empty one, with different KV lengths; each output equals its sequence's attention
// alone, bit for bit, with 1 to 4 threads (which also changes how query heads are grouped).
TEST_P(AttentionTest, SequencesInOneRoundEqualEachAlone) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(131);
  const auto group = isa == Isa::scalar ? kernels::cpu::detail::attention_group_scalar
                                        : kernels::cpu::detail::attention_group_avx2;
  const AttentionParams params{.n_head = 8, .n_head_kv = 2, .head_dim = 64, .scale = 0.125f};
  const size_t row_bytes = static_cast<size_t>(params.n_head_kv * params.head_dim) * sizeof(float);
  const std::vector<Inputs> sequences = {make_inputs(random, params, 40, {39}),
                                         make_inputs(random, params, 300, trailing_positions(5, 300)),
                                         make_inputs(random, params, 12, {}),
                                         make_inputs(random, params, 70, {66, 67, 67, 68}),
                                         make_inputs(random, params, 9, {8})};
  // The tree of sequence 3: nodes at rows 66.. (siblings at position 67), its keys from 66 on by path.
  const std::vector<int32_t> path_rows = {66, -1, -1, 66, 67, -1, 66, 68, -1, 66, 67, 69};
  const kernels::cpu::KeyPaths paths{66, path_rows.data(), 3};
  const auto call_of = [&](size_t i, float* out) {
    const Inputs& in = sequences[i];
    return kernels::cpu::AttentionCall{in.q.data(),
                                       in.positions.data(),
                                       static_cast<int64_t>(in.positions.size()),
                                       {in.k.data(), tensor::DType::f32, row_bytes},
                                       {in.v.data(), tensor::DType::f32, row_bytes},
                                       static_cast<int64_t>(in.k.size()) / (params.n_head_kv * params.head_dim),
                                       out,
                                       i == 3 ? &paths : nullptr};
  };
  const int64_t q_row = params.n_head * params.head_dim;
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < sequences.size(); ++i) {
    alone.push_back(test::nan_filled(static_cast<int64_t>(sequences[i].positions.size()) * q_row));
    const kernels::cpu::AttentionCall call = call_of(i, alone.back().data());
    kernels::cpu::detail::attention_sequences_with(group, {&call, 1}, params, nullptr);
  }
  for (int n_threads : {1, 2, 3, 4}) {
    ThreadPool pool(n_threads);
    std::vector<std::vector<float>> together;
    std::vector<kernels::cpu::AttentionCall> calls;
    for (size_t i = 0; i < sequences.size(); ++i) {
      together.push_back(test::nan_filled(static_cast<int64_t>(sequences[i].positions.size()) * q_row));
    }
    for (size_t i = 0; i < sequences.size(); ++i) calls.push_back(call_of(i, together[i].data()));
    kernels::cpu::detail::attention_sequences_with(group, calls, params, &pool);
    for (size_t i = 0; i < sequences.size(); ++i) {
      EXPECT_TRUE(test::same_bits(together[i], alone[i])) << "sequence " << i << " threads " << n_threads;
    }
  }
}

// A token tree's keys (tree speculation): nodes at KV rows first + index, siblings sharing a position. Each
// node's output equals, bit for bit, that of the same query over rows laid out along its path (its ancestors'
// rows moved to their positions), with windows that start before, inside and after the tree's first position,
// for each type the cache stores.
TEST_P(AttentionTest, TreeKeyPathsEqualTheirPathsLaidOut) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(101);
  const std::vector<int32_t> parents = {-1, 0, 1, 2, 1, 4, 0, 6};
  const auto n = static_cast<int64_t>(parents.size());
  const int64_t first = 200;  // the root's position and KV row
  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions[t] = parents[t] < 0 ? first : positions[parents[t]] + 1;
  int64_t depth = 0;
  for (int32_t position : positions) depth = std::max<int64_t>(depth, position - first + 1);
  std::vector<int32_t> path_rows(static_cast<size_t>(n * depth), -1);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t a = t; a >= 0; a = parents[a]) path_rows[t * depth + positions[a] - first] = static_cast<int32_t>(first + a);
  }
  const kernels::cpu::KeyPaths paths{first, path_rows.data(), depth};
  for (int64_t window : {0, 2, 150}) {
    for (tensor::DType type : {tensor::DType::f32, tensor::DType::f16, tensor::DType::q8_0}) {
      const AttentionParams params{.n_head = 4, .n_head_kv = 2, .head_dim = 64, .scale = 0.125f, .window = window};
      const int64_t n_kv = first + n;
      const Inputs inputs = make_inputs(random, params, n_kv, positions);
      const int64_t row = params.n_head_kv * params.head_dim;
      const size_t row_bytes = tensor::row_bytes(type, row);
      std::vector<uint8_t> k(n_kv * row_bytes), v(n_kv * row_bytes);
      for (int64_t r = 0; r < n_kv; ++r) {
        tensor::dtype_traits(type).from_float(inputs.k.data() + r * row, k.data() + r * row_bytes, row);
        tensor::dtype_traits(type).from_float(inputs.v.data() + r * row, v.data() + r * row_bytes, row);
      }
      const auto group = isa == Isa::scalar ? kernels::cpu::detail::attention_group_scalar
                                            : kernels::cpu::detail::attention_group_avx2;
      std::vector<float> out = test::nan_filled(n * params.n_head * params.head_dim);
      ThreadPool pool(2);
      kernels::cpu::detail::attention_with(group, inputs.q.data(), positions.data(), n, {k.data(), type, row_bytes},
                                           {v.data(), type, row_bytes}, n_kv, out.data(), params, &pool, &paths);
      for (int64_t t = 0; t < n; ++t) {
        std::vector<uint8_t> k_laid = k, v_laid = v;
        for (int64_t d = 0; d <= positions[t] - first; ++d) {
          const int32_t source = path_rows[t * depth + d];
          std::memcpy(k_laid.data() + (first + d) * row_bytes, k.data() + source * row_bytes, row_bytes);
          std::memcpy(v_laid.data() + (first + d) * row_bytes, v.data() + source * row_bytes, row_bytes);
        }
        const int64_t q_row = params.n_head * params.head_dim;
        std::vector<float> alone = test::nan_filled(q_row);
        kernels::cpu::detail::attention_with(group, inputs.q.data() + t * q_row, positions.data() + t, 1,
                                             {k_laid.data(), type, row_bytes}, {v_laid.data(), type, row_bytes},
                                             positions[t] + 1, alone.data(), params, nullptr);
        EXPECT_TRUE(test::same_bits(std::vector<float>(out.begin() + t * q_row, out.begin() + (t + 1) * q_row), alone))
            << "node " << t << " window " << window << " " << tensor::dtype_name(type);
      }
    }
  }
}

// Query heads sharing a KV head are split into sub-groups by thread count (16 heads over 1 KV head: 2 groups of
// 8 on one thread, 5 groups with 5 threads, ...); a head's bits must not depend on which group it landed in.
TEST_P(AttentionTest, HeadGroupingInvariant) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(103);
  const AttentionParams params{.n_head = 16, .n_head_kv = 1, .head_dim = 64, .scale = 0.125f, .window = 0};
  const int64_t n_kv = 333;
  const Inputs inputs = make_inputs(random, params, n_kv, {332});
  const std::vector<float> reference = run_attention(isa, inputs, n_kv, params, nullptr);
  for (int n_threads : {2, 3, 5, 16}) {
    ThreadPool pool(n_threads);
    EXPECT_TRUE(test::same_bits(run_attention(isa, inputs, n_kv, params, &pool), reference)) << n_threads;
  }
  // Each head computed as a 1-head problem of its own.
  for (int64_t h = 0; h < params.n_head; ++h) {
    Inputs one_head = inputs;
    one_head.q.assign(inputs.q.begin() + h * 64, inputs.q.begin() + (h + 1) * 64);
    AttentionParams one_params = params;
    one_params.n_head = 1;
    EXPECT_TRUE(test::same_bits(run_attention(isa, one_head, n_kv, one_params, nullptr),
                                std::vector<float>(reference.begin() + h * 64, reference.begin() + (h + 1) * 64)))
        << "head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

// Rows stored as f16 or q8_0 are read as the values they store: the output equals, bit for bit, attention over
// those values as f32 rows (tensor/quant's reference conversions), on every ISA path, for GQA with head sizes
// that are whole q8_0 blocks, in decode and prefill, with a window.
TEST_P(AttentionTest, StoredTypesReadAsTheValuesTheyStore) {
  test::Random random(23);
  for (const tensor::DType type : {tensor::DType::f16, tensor::DType::q8_0}) {
    for (const int64_t head_dim : {32, 64, 128}) {
      AttentionParams params{.n_head = 8, .n_head_kv = 2, .head_dim = head_dim, .scale = 0.125f};
      for (const int64_t window : {int64_t{0}, int64_t{37}}) {
        params.window = window;
        const int64_t n_kv = 300;
        Inputs inputs = make_inputs(random, params, n_kv, trailing_positions(5, n_kv));
        const int64_t row_floats = params.n_head_kv * head_dim;
        const size_t row_bytes = tensor::row_bytes(type, row_floats);
        std::vector<uint8_t> k_rows(n_kv * row_bytes);
        std::vector<uint8_t> v_rows(n_kv * row_bytes);
        for (int64_t p = 0; p < n_kv; ++p) {
          const tensor::DTypeTraits& traits = tensor::dtype_traits(type);
          traits.from_float(inputs.k.data() + p * row_floats, k_rows.data() + p * row_bytes, row_floats);
          traits.from_float(inputs.v.data() + p * row_floats, v_rows.data() + p * row_bytes, row_floats);
          traits.to_float(k_rows.data() + p * row_bytes, inputs.k.data() + p * row_floats, row_floats);
          traits.to_float(v_rows.data() + p * row_bytes, inputs.v.data() + p * row_floats, row_floats);
        }
        const std::vector<float> expected = run_attention(GetParam(), inputs, n_kv, params, nullptr);
        std::vector<float> found = test::nan_filled(expected.size());
        kernels::cpu::detail::attention_with(
            GetParam() == Isa::scalar ? kernels::cpu::detail::attention_group_scalar
                                      : kernels::cpu::detail::attention_group_avx2,
            inputs.q.data(), inputs.positions.data(), 5, kernels::cpu::KvRows{k_rows.data(), type, row_bytes},
            kernels::cpu::KvRows{v_rows.data(), type, row_bytes}, n_kv, found.data(), params, nullptr);
        ASSERT_EQ(std::memcmp(found.data(), expected.data(), found.size() * sizeof(float)), 0)
            << tensor::dtype_name(type) << " head_dim " << head_dim << " window " << window;
      }
    }
  }
}

TEST(AttentionDispatch, PublicFunctionUsesSelectedPath) {
  test::Random random(101);
  const AttentionParams params{.n_head = 4, .n_head_kv = 1, .head_dim = 64, .scale = 0.125f};
  const Inputs inputs = make_inputs(random, params, 50, {47, 48, 49});
  std::vector<float> via_public = test::nan_filled(3 * 4 * 64);
  ThreadPool pool(2);
  kernels::cpu::attention(inputs.q.data(), inputs.positions.data(), 3, inputs.k.data(), inputs.v.data(), 50,
                          via_public.data(), params, &pool);
  const Isa isa = kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar;
  EXPECT_TRUE(test::same_bits(via_public, run_attention(isa, inputs, 50, params, nullptr)));
}

}  // namespace
}  // namespace rwd
