// Gated delta rule: both ISA paths against the float64 reference (H_k < H_v with both key-head mappings, scalar
// and per-channel decay, head dims 1 .. 128 including odd ones, T = 1 .. 200) with a norm-wise error bound
// derived from float rounding, and the bit-exact properties rollback relies on: replaying the recorded
// corrections reproduces every prefix's state, any split of the tokens into calls gives the same bits, and
// so does any thread count.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "float_kernel_test_util.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/ref/gated_delta.h"

namespace rwd {
namespace {

using kernels::cpu::GatedDeltaParams;
using kernels::cpu::KeyHeadMapping;
using test::Isa;

// Unit roundoff of float32.
constexpr double kUnit = 0x1p-24;

struct Case {
  int64_t n_head_k;
  int64_t n_head_v;
  int64_t head_k_dim;
  int64_t head_v_dim;
  bool per_channel_decay;
  KeyHeadMapping mapping;
  bool subtract_prediction;  // false: Mamba2's scan
};

std::string describe(const Case& c) {
  return "H_k=" + std::to_string(c.n_head_k) + " H_v=" + std::to_string(c.n_head_v) +
         " d_k=" + std::to_string(c.head_k_dim) + " d_v=" + std::to_string(c.head_v_dim) +
         (c.per_channel_decay ? " per-channel" : " per-head") +
         (c.mapping == KeyHeadMapping::modulo ? " modulo" : " divide") + (c.subtract_prediction ? "" : " mamba2");
}

struct Inputs {
  GatedDeltaParams params;
  int64_t n_tokens = 0;
  std::vector<float> q, k;   // [n_tokens, n_head_k, head_k_dim], rows of unit L2 norm
  std::vector<float> v;      // [n_tokens, n_head_v, head_v_dim]
  std::vector<float> g;      // [n_tokens, n_head_v(, head_k_dim)]
  std::vector<float> beta;   // [n_tokens, n_head_v]
  std::vector<float> state;  // [n_head_v, head_v_dim, head_k_dim], the initial state

  int64_t n_decay() const { return params.per_channel_decay ? params.head_k_dim : 1; }
  int64_t head_state_size() const { return params.head_k_dim * params.head_v_dim; }
  int64_t v_row(int64_t t, int64_t h) const { return (t * params.n_head_v + h) * params.head_v_dim; }
};

std::vector<float> unit_rows(test::Random& random, int64_t n_rows, int64_t n) {
  std::vector<float> values = random.floats(n_rows * n, -1.0f, 1.0f);
  for (int64_t row = 0; row < n_rows; ++row) {
    double sum_squares = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(values[row * n + i]) * values[row * n + i];
    const double norm = std::sqrt(sum_squares);
    for (int64_t i = 0; i < n; ++i) values[row * n + i] = static_cast<float>(values[row * n + i] / norm);
  }
  return values;
}

Inputs make_inputs(const Case& c, int64_t n_tokens, uint64_t seed) {
  test::Random random(seed);
  Inputs in;
  in.params = {c.n_head_k, c.n_head_v, c.head_k_dim, c.head_v_dim, c.per_channel_decay, c.mapping,
               static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_k_dim))), c.subtract_prediction};
  in.n_tokens = n_tokens;
  in.q = unit_rows(random, n_tokens * c.n_head_k, c.head_k_dim);
  in.k = unit_rows(random, n_tokens * c.n_head_k, c.head_k_dim);
  in.v = random.floats(n_tokens * c.n_head_v * c.head_v_dim, -1.0f, 1.0f);
  in.g = random.floats(n_tokens * c.n_head_v * in.n_decay(), -0.7f, -0.01f);
  in.beta = random.floats(n_tokens * c.n_head_v, 0.05f, 0.95f);
  in.state = random.floats(c.n_head_v * in.head_state_size(), -1.0f, 1.0f);
  return in;
}

kernels::cpu::detail::GatedDeltaRowsFn rows_fn(Isa isa) {
  return isa == Isa::scalar ? kernels::cpu::detail::gated_delta_rows_scalar : kernels::cpu::detail::gated_delta_rows_avx2;
}

kernels::cpu::detail::ApplyRecordRowsFn apply_rows_fn(Isa isa) {
  return isa == Isa::scalar ? kernels::cpu::detail::apply_record_rows_scalar
                            : kernels::cpu::detail::apply_record_rows_avx2;
}

using DecayFn = void (*)(const float* g, float* decay, int64_t n);
DecayFn decay_path(Isa isa) {
  return isa == Isa::scalar ? kernels::cpu::detail::gated_delta_decay_scalar
                            : kernels::cpu::detail::gated_delta_decay_avx2;
}

// Runs tokens [t_begin, t_end) of the inputs over state; out and u_out hold rows for those tokens only.
void run_tokens(Isa isa, const Inputs& in, int64_t t_begin, int64_t t_end, float* state, float* out, float* u_out,
                ThreadPool* pool) {
  const GatedDeltaParams& p = in.params;
  kernels::cpu::detail::gated_delta_rule_with(
      rows_fn(isa),
      {in.q.data() + t_begin * p.n_head_k * p.head_k_dim, in.k.data() + t_begin * p.n_head_k * p.head_k_dim,
       in.v.data() + in.v_row(t_begin, 0), in.g.data() + t_begin * p.n_head_v * in.n_decay(),
       in.beta.data() + t_begin * p.n_head_v, t_end - t_begin, state, out, u_out, p},
      pool);
}

struct Result {
  std::vector<float> state, out, u;
};

Result run_all(Isa isa, const Inputs& in, ThreadPool* pool = nullptr) {
  Result r{in.state, test::nan_filled(in.v.size()), test::nan_filled(in.v.size())};
  run_tokens(isa, in, 0, in.n_tokens, r.state.data(), r.out.data(), r.u.data(), pool);
  return r;
}

// Replays token t's records onto every head of state with the path's own decay and apply functions.
void replay_token(Isa isa, const Inputs& in, const std::vector<float>& u, int64_t t, float* state) {
  const GatedDeltaParams& p = in.params;
  std::vector<float> decay(static_cast<size_t>(in.n_decay()));
  for (int64_t h = 0; h < p.n_head_v; ++h) {
    const float* g = in.g.data() + (t * p.n_head_v + h) * in.n_decay();
    const float* k = in.k.data() + (t * p.n_head_k + kernels::ref::key_head_of(h, p)) * p.head_k_dim;
    float* head_state = state + h * in.head_state_size();
    if (isa == Isa::scalar) {
      kernels::cpu::detail::gated_delta_decay_scalar(g, decay.data(), in.n_decay());
      kernels::cpu::detail::apply_gated_delta_record_scalar(head_state, k, u.data() + in.v_row(t, h), decay.data(), p);
    } else {
      kernels::cpu::detail::gated_delta_decay_avx2(g, decay.data(), in.n_decay());
      kernels::cpu::detail::apply_gated_delta_record_avx2(head_state, k, u.data() + in.v_row(t, h), decay.data(), p);
    }
  }
}

double norm(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return std::sqrt(sum);
}

double distance(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return std::sqrt(sum);
}

const Case kCases[] = {
    {2, 4, 32, 32, false, KeyHeadMapping::modulo, true},   {2, 4, 32, 32, true, KeyHeadMapping::divide, true},
    {1, 3, 64, 64, true, KeyHeadMapping::modulo, true},    {1, 3, 64, 64, false, KeyHeadMapping::divide, true},
    {4, 8, 128, 128, false, KeyHeadMapping::modulo, true}, {4, 8, 128, 128, true, KeyHeadMapping::divide, true},
    {2, 4, 48, 48, true, KeyHeadMapping::modulo, true},    {1, 2, 48, 20, false, KeyHeadMapping::divide, true},
    {3, 3, 13, 7, true, KeyHeadMapping::modulo, true},     {1, 1, 1, 1, false, KeyHeadMapping::modulo, true},
    // Mamba2: B/C groups as key heads (grouped), d_state as head_k_dim, the head size as head_v_dim.
    {1, 4, 128, 64, false, KeyHeadMapping::divide, false}, {2, 8, 16, 8, false, KeyHeadMapping::divide, false},
    {1, 3, 13, 7, false, KeyHeadMapping::divide, false},
};

class GatedDeltaTest : public ::testing::TestWithParam<Isa> {};

// Error bound, per head, in the Frobenius norm. The exact update S -> (I - beta k kᵀ) D S + beta k vᵀ scales an
// error by at most max(decay) for ||k|| = 1, beta <= 1, D = diag(decay), so the state error after token t is at
// most max(decay_t) times the error before it plus the token's own rounding error. With
// unit roundoff u and the dot products' depth d_k/4 + 3 (eight partial sums of two roundings each, then a tree),
// one token adds at most u * ((d_k/4 + 18) ||S_{t-1}||_F + 4 ||u_t||): the decay (exp within 2 ulp) and the
// products (8u ||S||), the correction's dot product through k uᵀ ((d_k/4 + 10) u ||S||), and the roundings of
// the correction and the rank-1 update (4u ||u||). Outputs add the dot product with q: (d_k/4 + 5) u ||S_t||.
// The norms are those of the float run itself, taken token by token; a factor 2 covers second-order terms.
TEST_P(GatedDeltaTest, MatchesReferenceWithinDerivedBound) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  for (const Case& c : kCases) {
    for (int64_t n_tokens : {1, 2, 63, 200}) {
      const Inputs in = make_inputs(c, n_tokens, 1000 + n_tokens);
      const GatedDeltaParams& p = in.params;
      const int64_t n_state = in.head_state_size();
      const Result fast = run_all(isa, in);
      Result ref{in.state, test::nan_filled(in.v.size()), test::nan_filled(in.v.size())};
      kernels::ref::gated_delta_rule(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), n_tokens,
                                     ref.state.data(), ref.out.data(), ref.u.data(), p);

      // The fast path token by token (bit-identical to the whole run, tested below) gives the norms.
      std::vector<float> state = in.state;
      std::vector<double> bound(static_cast<size_t>(p.n_head_v), 0.0);
      const double depth = static_cast<double>(p.head_k_dim) / 4.0;
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::vector<double> norm_before(static_cast<size_t>(p.n_head_v));
        for (int64_t h = 0; h < p.n_head_v; ++h) norm_before[h] = norm(state.data() + h * n_state, n_state);
        std::vector<float> out(static_cast<size_t>(p.n_head_v * p.head_v_dim));
        std::vector<float> u(out.size());
        run_tokens(isa, in, t, t + 1, state.data(), out.data(), u.data(), nullptr);
        for (int64_t h = 0; h < p.n_head_v; ++h) {
          const float* u_h = u.data() + h * p.head_v_dim;
          const double u_norm = norm(u_h, p.head_v_dim);
          const double u_bound = 2.0 * (bound[h] + (depth + 12.0) * kUnit * norm_before[h] + 4.0 * kUnit * u_norm);
          EXPECT_LE(distance(fast.u.data() + in.v_row(t, h), ref.u.data() + in.v_row(t, h), p.head_v_dim), u_bound)
              << describe(c) << " T=" << n_tokens << " t=" << t << " h=" << h;
          const float* g = in.g.data() + (t * p.n_head_v + h) * in.n_decay();
          const double max_decay = std::exp(static_cast<double>(*std::max_element(g, g + in.n_decay())));
          bound[h] = bound[h] * max_decay + kUnit * ((depth + 18.0) * norm_before[h] + 4.0 * u_norm);
          const double state_norm = norm(state.data() + h * n_state, n_state);
          const double o_norm = norm(ref.out.data() + in.v_row(t, h), p.head_v_dim);
          const double out_bound = 2.0 * (p.scale * (bound[h] + (depth + 5.0) * kUnit * state_norm) + kUnit * o_norm);
          EXPECT_LE(distance(fast.out.data() + in.v_row(t, h), ref.out.data() + in.v_row(t, h), p.head_v_dim),
                    out_bound)
              << describe(c) << " T=" << n_tokens << " t=" << t << " h=" << h;
        }
      }
      for (int64_t h = 0; h < p.n_head_v; ++h) {
        const double state_norm = norm(ref.state.data() + h * n_state, n_state);
        EXPECT_LE(distance(fast.state.data() + h * n_state, ref.state.data() + h * n_state, n_state),
                  2.0 * (bound[h] + kUnit * state_norm))
            << describe(c) << " T=" << n_tokens << " h=" << h;
      }
      ASSERT_FALSE(HasFailure()) << test::isa_name(isa) << " " << describe(c) << " T=" << n_tokens;
    }
  }
}

// Rollback by replay: the forward over n tokens and the replay of its first n records from the initial state
// give the same bits, for every n = 1 .. T.
TEST_P(GatedDeltaTest, ReplayOfRecordsReproducesEveryPrefixState) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  for (const Case& c : kCases) {
    const int64_t n_tokens = c.head_k_dim >= 128 ? 17 : 40;
    const Inputs in = make_inputs(c, n_tokens, 77);
    const Result full = run_all(isa, in);
    std::vector<float> replayed = in.state;
    for (int64_t n = 1; n <= n_tokens; ++n) {
      replay_token(isa, in, full.u, n - 1, replayed.data());
      std::vector<float> prefix_state = in.state;
      std::vector<float> out = test::nan_filled(n * c.n_head_v * c.head_v_dim);
      run_tokens(isa, in, 0, n, prefix_state.data(), out.data(), nullptr, nullptr);
      ASSERT_TRUE(test::same_bits(prefix_state, replayed)) << test::isa_name(isa) << " " << describe(c) << " n=" << n;
    }
    EXPECT_TRUE(test::same_bits(replayed, full.state)) << describe(c);
  }
}

// One call over T tokens equals the same tokens split into two calls at every point and one call per token.
TEST_P(GatedDeltaTest, SplitIntoCallsIsBitIdentical) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  for (const Case& c : kCases) {
    const int64_t n_tokens = 9;
    const Inputs in = make_inputs(c, n_tokens, 5);
    const Result whole = run_all(isa, in);
    for (int64_t split = 0; split <= n_tokens; ++split) {
      Result parts{in.state, test::nan_filled(in.v.size()), test::nan_filled(in.v.size())};
      run_tokens(isa, in, 0, split, parts.state.data(), parts.out.data(), parts.u.data(), nullptr);
      run_tokens(isa, in, split, n_tokens, parts.state.data(), parts.out.data() + in.v_row(split, 0),
                 parts.u.data() + in.v_row(split, 0), nullptr);
      EXPECT_TRUE(test::same_bits(parts.state, whole.state)) << describe(c) << " split=" << split;
      EXPECT_TRUE(test::same_bits(parts.out, whole.out)) << describe(c) << " split=" << split;
      EXPECT_TRUE(test::same_bits(parts.u, whole.u)) << describe(c) << " split=" << split;
    }
    Result single{in.state, test::nan_filled(in.v.size()), test::nan_filled(in.v.size())};
    for (int64_t t = 0; t < n_tokens; ++t) {
      run_tokens(isa, in, t, t + 1, single.state.data(), single.out.data() + in.v_row(t, 0),
                 single.u.data() + in.v_row(t, 0), nullptr);
    }
    EXPECT_TRUE(test::same_bits(single.state, whole.state)) << describe(c);
    EXPECT_TRUE(test::same_bits(single.out, whole.out)) << describe(c);
    EXPECT_TRUE(test::same_bits(single.u, whole.u)) << describe(c);
  }
}

// Without u_out the forward computes the same state and outputs.
TEST_P(GatedDeltaTest, RecordOutputDoesNotChangeTheForward) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  const Inputs in = make_inputs({2, 4, 48, 40, true, KeyHeadMapping::modulo, true}, 11, 8);
  const Result with_records = run_all(isa, in);
  std::vector<float> state = in.state;
  std::vector<float> out = test::nan_filled(in.v.size());
  run_tokens(isa, in, 0, in.n_tokens, state.data(), out.data(), nullptr, nullptr);
  EXPECT_TRUE(test::same_bits(state, with_records.state));
  EXPECT_TRUE(test::same_bits(out, with_records.out));
}

TEST_P(GatedDeltaTest, ThreadCountDoesNotChangeResults) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  // Few heads with long rows are also split into row ranges (1 head: 2 or 4 ranges; 2 heads of 72 rows: 2 or 3).
  for (const Case& c : {Case{4, 8, 128, 128, true, KeyHeadMapping::divide, true},
                        Case{1, 3, 48, 20, false, KeyHeadMapping::modulo, true},
                        Case{1, 1, 128, 128, false, KeyHeadMapping::modulo, true},
                        Case{1, 2, 40, 72, true, KeyHeadMapping::divide, true},
                        Case{1, 2, 40, 72, false, KeyHeadMapping::divide, false}}) {
    const Inputs in = make_inputs(c, 11, 21);
    const Result alone = run_all(isa, in);
    for (int n_threads : {1, 2, 3}) {
      ThreadPool pool(n_threads);
      const Result pooled = run_all(isa, in, &pool);
      EXPECT_TRUE(test::same_bits(pooled.state, alone.state)) << describe(c) << " threads=" << n_threads;
      EXPECT_TRUE(test::same_bits(pooled.out, alone.out)) << describe(c) << " threads=" << n_threads;
      EXPECT_TRUE(test::same_bits(pooled.u, alone.u)) << describe(c) << " threads=" << n_threads;
    }
  }
}

// The records of rollback by replay (DESIGN §5) fed back through gated_delta_rule_io: `fold` records applied to
// the state, then the call's tokens on a read-only copy after the `ahead` records, give the outputs and
// corrections of one in-place call over all the tokens, and leave the state of the folded prefix; folding every
// record leaves the in-place final state. Records are an earlier in-place run's u_out, its k, and the path's
// decay of g. Few heads with 2 threads also cut heads into row ranges, so records are applied per range.
TEST_P(GatedDeltaTest, FoldAndAheadRecordsReproduceTheInPlaceRun) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  const auto apply_fn = apply_rows_fn(isa);
  const auto decay_fn = decay_path(isa);
  for (const Case& c :
       {Case{2, 4, 32, 32, false, KeyHeadMapping::modulo, true}, Case{1, 2, 16, 24, false, KeyHeadMapping::divide, false},
        Case{2, 4, 48, 48, true, KeyHeadMapping::divide, true},
        Case{1, 1, 128, 128, false, KeyHeadMapping::modulo, true}, Case{1, 2, 40, 72, true, KeyHeadMapping::divide, true},
        Case{3, 3, 13, 7, true, KeyHeadMapping::modulo, true}}) {
    const int64_t n_fold = 3;
    const int64_t n_ahead = 4;
    const int64_t n_tokens = 12;
    const int64_t n_first = n_fold + n_ahead;  // the read-only call's first token
    const Inputs in = make_inputs(c, n_tokens, 91);
    const GatedDeltaParams& p = in.params;
    const Result full = run_all(isa, in);
    std::vector<float> decay(in.g.size());
    decay_fn(in.g.data(), decay.data(), static_cast<int64_t>(in.g.size()));
    const auto records = [&](int64_t t_begin, int64_t n) {
      return kernels::cpu::GatedDeltaRecords{in.k.data() + t_begin * p.n_head_k * p.head_k_dim,
                                             full.u.data() + in.v_row(t_begin, 0),
                                             decay.data() + t_begin * p.n_head_v * in.n_decay(), n};
    };
    std::vector<float> prefix_state = in.state;
    std::vector<float> scratch = test::nan_filled(in.v.size());
    run_tokens(isa, in, 0, n_fold, prefix_state.data(), scratch.data(), nullptr, nullptr);

    for (int n_threads : {1, 2}) {
      ThreadPool pool(n_threads);
      const std::string where = test::isa_name(isa) + " " + describe(c) + " threads=" + std::to_string(n_threads);
      const int64_t v_rows = (n_tokens - n_first) * p.n_head_v * p.head_v_dim;
      std::vector<float> state = in.state;
      std::vector<float> out = test::nan_filled(v_rows);
      std::vector<float> u = test::nan_filled(v_rows);
      kernels::cpu::GatedDeltaStateIo io;
      io.fold = records(0, n_fold);
      io.ahead = records(n_fold, n_ahead);
      io.read_only = true;
      kernels::cpu::detail::gated_delta_rule_with(
          rows_fn(isa), apply_fn,
          {in.q.data() + n_first * p.n_head_k * p.head_k_dim, in.k.data() + n_first * p.n_head_k * p.head_k_dim,
           in.v.data() + in.v_row(n_first, 0), in.g.data() + n_first * p.n_head_v * in.n_decay(),
           in.beta.data() + n_first * p.n_head_v, n_tokens - n_first, state.data(), out.data(), u.data(), p},
          io, &pool);
      const std::vector<float> full_out(full.out.begin() + in.v_row(n_first, 0), full.out.end());
      const std::vector<float> full_u(full.u.begin() + in.v_row(n_first, 0), full.u.end());
      EXPECT_TRUE(test::same_bits(out, full_out)) << where << ": outputs after fold + ahead records";
      EXPECT_TRUE(test::same_bits(u, full_u)) << where << ": corrections after fold + ahead records";
      EXPECT_TRUE(test::same_bits(state, prefix_state)) << where << ": a read-only call kept more than the fold";

      // Folding the remaining records (ahead and the read-only call's own) reaches the in-place final state.
      kernels::cpu::GatedDeltaStateIo fold_rest;
      fold_rest.fold = {in.k.data() + n_fold * p.n_head_k * p.head_k_dim, full.u.data() + in.v_row(n_fold, 0),
                        decay.data() + n_fold * p.n_head_v * in.n_decay(), n_ahead};
      kernels::cpu::detail::gated_delta_rule_with(
          rows_fn(isa), apply_fn, {nullptr, nullptr, nullptr, nullptr, nullptr, 0, state.data(), nullptr, nullptr, p},
          fold_rest, &pool);
      fold_rest.fold = {in.k.data() + n_first * p.n_head_k * p.head_k_dim, u.data(),
                        decay.data() + n_first * p.n_head_v * in.n_decay(), n_tokens - n_first};
      kernels::cpu::detail::gated_delta_rule_with(
          rows_fn(isa), apply_fn, {nullptr, nullptr, nullptr, nullptr, nullptr, 0, state.data(), nullptr, nullptr, p},
          fold_rest, &pool);
      EXPECT_TRUE(test::same_bits(state, full.state)) << where << ": state after folding every record";

      // A fold followed by in-place tokens in the same call (plain decoding after a lazy commit).
      std::vector<float> in_place_state = in.state;
      std::vector<float> in_place_out = test::nan_filled(in.v.size() - in.v_row(n_fold, 0));
      kernels::cpu::GatedDeltaStateIo fold_only;
      fold_only.fold = records(0, n_fold);
      kernels::cpu::detail::gated_delta_rule_with(
          rows_fn(isa), apply_fn,
          {in.q.data() + n_fold * p.n_head_k * p.head_k_dim, in.k.data() + n_fold * p.n_head_k * p.head_k_dim,
           in.v.data() + in.v_row(n_fold, 0), in.g.data() + n_fold * p.n_head_v * in.n_decay(),
           in.beta.data() + n_fold * p.n_head_v, n_tokens - n_fold, in_place_state.data(), in_place_out.data(), nullptr,
           p},
          fold_only, &pool);
      EXPECT_TRUE(test::same_bits(in_place_state, full.state)) << where << ": fold then in-place tokens";
      EXPECT_TRUE(
          test::same_bits(in_place_out, std::vector<float>(full.out.begin() + in.v_row(n_fold, 0), full.out.end())))
          << where << ": outputs of in-place tokens after a fold";
    }
  }
}

// A token tree (tree speculation) in one read-only call: each node's output and correction equal those of its
// path run token by token from the state after the `ahead` records, and the state keeps only the fold. The
// trees branch at the root, mid-path and at a leaf's parent, with chains of only children between; with 2
// threads heads are also cut into row ranges, each of which walks the tree on its own copies.
TEST_P(GatedDeltaTest, TreeNodesEqualTheirPathsRunAlone) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  const auto apply_fn = apply_rows_fn(isa);
  const std::vector<std::vector<int32_t>> trees = {
      {-1, 0, 1, 2, 1, 4, 5, 0, 7, 7},  // depth-first: 0-1-2-3, 1-4-5-6, 0-7-8, 7-9
      {-1, 0, 0, 0, 3, 4, 5, 6, 6, 0},
  };
  ThreadPool pool(2);
  for (const Case& c : {Case{2, 4, 48, 40, true, KeyHeadMapping::modulo, true},
                        Case{1, 2, 40, 72, false, KeyHeadMapping::divide, true},
                        Case{1, 2, 16, 24, false, KeyHeadMapping::divide, false}}) {
    for (const std::vector<int32_t>& parents : trees) {
      const auto n = static_cast<int64_t>(parents.size());
      const int64_t n_ahead = 2;
      // Tokens 0 .. n_ahead - 1 are the records ahead of the tree, run in place first to make them.
      const Inputs in = make_inputs(c, n_ahead + n, 31);
      const GatedDeltaParams& p = in.params;
      std::vector<float> ahead_state = in.state;
      std::vector<float> ahead_u = test::nan_filled(in.v_row(n_ahead, 0));
      std::vector<float> ahead_out = test::nan_filled(in.v_row(n_ahead, 0));
      run_tokens(isa, in, 0, n_ahead, ahead_state.data(), ahead_out.data(), ahead_u.data(), nullptr);
      std::vector<float> ahead_decay(static_cast<size_t>(n_ahead * p.n_head_v * in.n_decay()));
      decay_path(isa)(in.g.data(), ahead_decay.data(), static_cast<int64_t>(ahead_decay.size()));
      for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> state = in.state;
        std::vector<float> out = test::nan_filled(n * p.n_head_v * p.head_v_dim);
        std::vector<float> u = test::nan_filled(n * p.n_head_v * p.head_v_dim);
        kernels::cpu::GatedDeltaStateIo io;
        io.ahead = {in.k.data(), ahead_u.data(), ahead_decay.data(), n_ahead};
        io.read_only = true;
        io.parents = parents.data();
        kernels::cpu::detail::gated_delta_rule_with(
            rows_fn(isa), apply_fn,
            {in.q.data() + n_ahead * p.n_head_k * p.head_k_dim, in.k.data() + n_ahead * p.n_head_k * p.head_k_dim,
             in.v.data() + in.v_row(n_ahead, 0), in.g.data() + n_ahead * p.n_head_v * in.n_decay(),
             in.beta.data() + n_ahead * p.n_head_v, n, state.data(), out.data(), u.data(), p},
            io, threads);
        EXPECT_TRUE(test::same_bits(state, in.state)) << describe(c) << ": a read-only tree wrote the state";
        for (int64_t node = 0; node < n; ++node) {
          std::vector<int64_t> path;
          for (int64_t a = node; a >= 0; a = parents[a]) path.insert(path.begin(), a);
          std::vector<float> path_state = ahead_state;
          std::vector<float> path_out = test::nan_filled(p.n_head_v * p.head_v_dim);
          std::vector<float> path_u = test::nan_filled(p.n_head_v * p.head_v_dim);
          for (int64_t a : path) {
            run_tokens(isa, in, n_ahead + a, n_ahead + a + 1, path_state.data(), path_out.data(), path_u.data(),
                       nullptr);
          }
          const auto row = [&](const std::vector<float>& values) {
            return std::vector<float>(values.begin() + in.v_row(node, 0), values.begin() + in.v_row(node + 1, 0));
          };
          EXPECT_TRUE(test::same_bits(row(out), path_out)) << describe(c) << " node " << node;
          EXPECT_TRUE(test::same_bits(row(u), path_u)) << describe(c) << " node " << node;
        }
      }
    }
  }
}

// The calls of several slots in one round (gated_delta_rules): three states, one of them met by two adjacent
// calls, as a slot whose plain tokens precede its transaction's in one forward: an in-place call folding two
// log records, then a read-only tree whose corrections overwrite those very records. Another slot runs a
// read-only chain after records ahead, a third an in-place call. Each state, output and correction equals
// making the calls one after another, whatever the thread count; few heads per slot also cut rows.
TEST_P(GatedDeltaTest, OneRoundOfSeveralSlotsEqualsTheirCallsOneByOne) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  const auto apply_fn = apply_rows_fn(isa);
  const auto decay_fn = decay_path(isa);
  const std::vector<int32_t> tree = {-1, 0, 1, 0, 3, 3};
  for (const Case& c : {Case{2, 4, 32, 40, false, KeyHeadMapping::modulo, true},
                        Case{1, 1, 64, 72, true, KeyHeadMapping::divide, true},
                        Case{1, 2, 16, 24, false, KeyHeadMapping::divide, false}}) {
    const int64_t n_tokens = static_cast<int64_t>(tree.size());
    const Inputs slot_a = make_inputs(c, n_tokens, 41);
    const Inputs slot_b = make_inputs(c, n_tokens, 42);
    const Inputs slot_c = make_inputs(c, n_tokens, 43);
    const GatedDeltaParams& p = slot_a.params;
    const int64_t k_row = p.n_head_k * p.head_k_dim;
    const int64_t v_row = p.n_head_v * p.head_v_dim;
    const int64_t g_row = p.n_head_v * slot_a.n_decay();
    // Per slot: records of its first two tokens as an in-place run wrote them (k, u, decay), the log.
    struct Log {
      std::vector<float> k, u, decay;
    };
    const auto make_log = [&](const Inputs& in) {
      const Result run = run_all(isa, in);
      Log log{in.k, run.u, std::vector<float>(in.g.size())};
      decay_fn(in.g.data(), log.decay.data(), static_cast<int64_t>(in.g.size()));
      return log;
    };
    // Everything the calls write, made afresh for each way of running them.
    struct World {
      std::vector<float> state_a, state_b, state_c;
      Log log_b, log_c;
      std::vector<float> out_a, out_b1, out_b2, out_c, u_c;
    };
    const auto make_world = [&] {
      return World{slot_a.state, slot_b.state, slot_c.state, make_log(slot_b), make_log(slot_c),
                   test::nan_filled(n_tokens * v_row), test::nan_filled(2 * v_row), test::nan_filled(n_tokens * v_row),
                   test::nan_filled(n_tokens * v_row), test::nan_filled(n_tokens * v_row)};
    };
    const auto make_calls = [&](World& w) {
      std::vector<kernels::cpu::GatedDeltaCall> calls(4);
      calls[0] = {slot_c.q.data(), slot_c.k.data(), slot_c.v.data(), slot_c.g.data(), slot_c.beta.data(), n_tokens,
                  w.state_c.data(), {}, w.out_c.data(), w.u_c.data()};
      calls[0].io.ahead = {w.log_c.k.data(), w.log_c.u.data(), w.log_c.decay.data(), 2};
      calls[0].io.read_only = true;
      calls[1] = {slot_b.q.data(), slot_b.k.data(), slot_b.v.data(), slot_b.g.data(), slot_b.beta.data(), 2,
                  w.state_b.data(), {}, w.out_b1.data(), nullptr};
      calls[1].io.fold = {w.log_b.k.data(), w.log_b.u.data(), w.log_b.decay.data(), 2};
      calls[2] = {slot_b.q.data() + 2 * k_row, slot_b.k.data() + 2 * k_row, slot_b.v.data() + 2 * v_row,
                  slot_b.g.data() + 2 * g_row, slot_b.beta.data() + 2 * p.n_head_v, n_tokens - 2,
                  w.state_b.data(), {}, w.out_b2.data(), w.log_b.u.data()};
      calls[2].io.read_only = true;
      calls[2].io.parents = tree.data();
      calls[3] = {slot_a.q.data(), slot_a.k.data(), slot_a.v.data(), slot_a.g.data(), slot_a.beta.data(), n_tokens,
                  w.state_a.data(), {}, w.out_a.data(), nullptr};
      return calls;
    };
    World one_by_one = make_world();
    for (const kernels::cpu::GatedDeltaCall& call : make_calls(one_by_one)) {
      kernels::cpu::detail::gated_delta_rules_with(rows_fn(isa), apply_fn, {&call, 1}, p, nullptr);
    }
    for (int n_threads : {1, 2, 3}) {
      ThreadPool pool(n_threads);
      World together = make_world();
      const std::vector<kernels::cpu::GatedDeltaCall> calls = make_calls(together);
      kernels::cpu::detail::gated_delta_rules_with(rows_fn(isa), apply_fn, calls, p, &pool);
      const std::string where = describe(c) + " threads=" + std::to_string(n_threads);
      EXPECT_TRUE(test::same_bits(together.state_a, one_by_one.state_a)) << where;
      EXPECT_TRUE(test::same_bits(together.state_b, one_by_one.state_b)) << where;
      EXPECT_TRUE(test::same_bits(together.state_c, one_by_one.state_c)) << where;
      EXPECT_TRUE(test::same_bits(together.out_a, one_by_one.out_a)) << where;
      EXPECT_TRUE(test::same_bits(together.out_b1, one_by_one.out_b1)) << where;
      EXPECT_TRUE(test::same_bits(together.out_b2, one_by_one.out_b2)) << where;
      EXPECT_TRUE(test::same_bits(together.log_b.u, one_by_one.log_b.u)) << where << ": the tree's corrections";
      EXPECT_TRUE(test::same_bits(together.out_c, one_by_one.out_c)) << where;
      EXPECT_TRUE(test::same_bits(together.u_c, one_by_one.u_c)) << where;
    }
    // The fold read the records before the tree overwrote them: the plain tokens' state is the log's run.
    std::vector<float> folded = slot_b.state;
    std::vector<float> scratch = test::nan_filled(n_tokens * v_row);
    run_tokens(isa, slot_b, 0, 2, folded.data(), scratch.data(), nullptr, nullptr);
    run_tokens(isa, slot_b, 0, 2, folded.data(), scratch.data(), nullptr, nullptr);
    EXPECT_TRUE(test::same_bits(one_by_one.state_b, folded)) << describe(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GatedDeltaTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

// The public functions take the path has_avx2_fma() selects, all three of them the same one, so records built
// with gated_delta_decay and applied with apply_gated_delta_record replay what gated_delta_rule did.
TEST(GatedDeltaDispatch, PublicForwardAndReplayUseTheSamePath) {
  const Inputs in = make_inputs({2, 4, 64, 64, false, KeyHeadMapping::modulo, true}, 7, 3);
  const GatedDeltaParams& p = in.params;
  ThreadPool pool(2);
  Result pub{in.state, test::nan_filled(in.v.size()), test::nan_filled(in.v.size())};
  kernels::cpu::gated_delta_rule(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.n_tokens,
                                 pub.state.data(), pub.out.data(), pub.u.data(), p, &pool);
  const Result path = run_all(kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar, in);
  EXPECT_TRUE(test::same_bits(pub.state, path.state));
  EXPECT_TRUE(test::same_bits(pub.out, path.out));
  std::vector<float> replayed = in.state;
  float decay = 0.0f;
  for (int64_t t = 0; t < in.n_tokens; ++t) {
    for (int64_t h = 0; h < p.n_head_v; ++h) {
      kernels::cpu::gated_delta_decay(in.g.data() + t * p.n_head_v + h, &decay, 1);
      kernels::cpu::apply_gated_delta_record(replayed.data() + h * in.head_state_size(),
                                             in.k.data() + (t * p.n_head_k + h % p.n_head_k) * p.head_k_dim,
                                             pub.u.data() + in.v_row(t, h), &decay, p);
    }
  }
  EXPECT_TRUE(test::same_bits(replayed, pub.state));
}

TEST(GatedDeltaDispatch, DecayIsElementwise) {
  test::Random random(4);
  const std::vector<float> g = random.floats(37, -30.0f, 0.0f);
  for (Isa isa : {Isa::scalar, Isa::avx2}) {
    if (isa == Isa::avx2 && !kernels::cpu::has_avx2_fma()) continue;
    const DecayFn decay_fn = decay_path(isa);
    std::vector<float> all = test::nan_filled(37);
    decay_fn(g.data(), all.data(), 37);
    for (int64_t i = 0; i < 37; ++i) {
      float one = std::nanf("");
      decay_fn(g.data() + i, &one, 1);
      EXPECT_EQ(std::memcmp(&one, &all[i], sizeof(float)), 0) << test::isa_name(isa) << " i=" << i;
      EXPECT_NEAR(one, std::exp(static_cast<double>(g[i])), 4.0 * test::kFloatEps * std::exp(static_cast<double>(g[i])))
          << test::isa_name(isa) << " i=" << i;
    }
  }
}

TEST(GatedDeltaDeathTest, RefusesCallsOnOneStateThatAreNotAdjacent) {
  const GatedDeltaParams params{1, 1, 8, 8, false, KeyHeadMapping::modulo, 1.0f, true};
  std::vector<float> state_a(64, 0.5f);
  std::vector<float> state_b(64, 0.5f);
  std::vector<kernels::cpu::GatedDeltaCall> calls(3);
  calls[0].state = state_a.data();
  calls[1].state = state_b.data();
  calls[2].state = state_a.data();
  EXPECT_DEATH(kernels::cpu::gated_delta_rules(calls, params, nullptr), "calls 0 and 2 share a state");
}

TEST(GatedDeltaDeathTest, RejectsUnsupportedShapes) {
  GatedDeltaParams params{2, 3, 64, 64, false, KeyHeadMapping::modulo, 1.0f, true};
  std::vector<float> head(64 * 64, 0.5f);
  std::vector<float> vec(64, 0.5f);
  EXPECT_DEATH(kernels::cpu::apply_gated_delta_record(head.data(), vec.data(), vec.data(), vec.data(), params),
               "n_head_v");
  params.n_head_v = 4;
  params.head_k_dim = kernels::cpu::kGatedDeltaMaxHeadDim + 1;
  EXPECT_DEATH(kernels::cpu::apply_gated_delta_record(head.data(), vec.data(), vec.data(), vec.data(), params),
               "head_k_dim");
}

}  // namespace
}  // namespace rwd
