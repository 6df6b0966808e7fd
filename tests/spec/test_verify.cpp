// links: rewind_spec
// Speculative verification against math written here: greedy output equals argmax (and a plain sample+accept
// loop under penalties) for every accepted prefix; stochastic output has the target's distribution (Pearson's
// chi-square against a float64 reference of the sampler chain, p-value threshold 1e-4 with fixed seeds, so the
// suite is deterministic and a failure means a biased rule); acceptance rates equal sum_x min(p, q); bad input fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "spec/verify.h"

namespace rwd::spec {
namespace {

using sampling::Sampler;
using sampling::SamplingParams;
using sampling::TokenProb;

constexpr double kMinPValue = 1e-4;

Sampler make_sampler(const SamplingParams& params) {
  Result<Sampler> sampler = Sampler::create(params);
  EXPECT_TRUE(sampler.is_ok()) << sampler.status().message();
  return std::move(sampler).value();
}

VerifyOutcome verify_ok(Sampler& sampler, const std::vector<DraftToken>& draft, const std::vector<float>& logits,
                        int64_t n_vocab, const std::function<bool(int32_t)>& stop = {}) {
  Result<VerifyOutcome> outcome = verify(sampler, draft, logits.data(), n_vocab, stop);
  EXPECT_TRUE(outcome.is_ok()) << outcome.status().message();
  return outcome.is_ok() ? std::move(outcome).value() : VerifyOutcome{};
}

double unit_double(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

std::vector<float> random_logits(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::vector<float> logits(n);
  for (float& logit : logits) logit = static_cast<float>(lo + (hi - lo) * unit_double(rng));
  return logits;
}

int32_t reference_argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// The sampler chain spelled out densely: repetition penalty over the distinct history tokens, ids sorted by
// (logit desc, id asc), top-k, softmax at T in float64, top-p prefix, renormalise. Min-p and the other
// penalties are not used by these tests.
std::vector<double> reference_probs(std::vector<float> logits, const SamplingParams& params,
                                    std::vector<int32_t> history = {}) {
  std::sort(history.begin(), history.end());
  history.erase(std::unique(history.begin(), history.end()), history.end());
  for (int32_t id : history) {
    float& logit = logits[id];
    logit = logit > 0.0f ? logit / params.repetition_penalty : logit * params.repetition_penalty;
  }
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < order.size()) order.resize(params.top_k);
  std::vector<double> kept(order.size());
  double sum = 0.0;
  for (size_t i = 0; i < order.size(); ++i) {
    sum += kept[i] = std::exp((static_cast<double>(logits[order[i]]) - logits[order[0]]) / params.temperature);
  }
  size_t n_keep = order.size();
  double cumulative = 0.0;
  for (size_t i = 0; i < order.size() && params.top_p < 1.0f; ++i) {
    cumulative += kept[i] / sum;
    if (cumulative >= params.top_p) {
      n_keep = i + 1;
      break;
    }
  }
  const double kept_sum = std::accumulate(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(n_keep), 0.0);
  std::vector<double> probs(logits.size(), 0.0);
  for (size_t i = 0; i < n_keep; ++i) probs[order[i]] = kept[i] / kept_sum;
  return probs;
}

// Regularized upper incomplete gamma Q(a, x): series for P below a + 1, Lentz's continued fraction above.
double upper_gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double prefactor = std::exp(-x + a * std::log(x) - std::lgamma(a));
  if (x < a + 1.0) {
    double term = 1.0 / a;
    double sum = term;
    for (int n = 1; n < 10000 && term > sum * 1e-16; ++n) sum += term *= x / (a + n);
    return 1.0 - prefactor * sum;
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1.0 - a;
  double c = 1.0 / kTiny;
  double d = 1.0 / b;
  double h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    if (std::abs(d * c - 1.0) < 1e-16) break;
  }
  return prefactor * h;
}

double chi_square_p_value(double statistic, int df) { return upper_gamma_q(0.5 * df, 0.5 * statistic); }

// Pearson's chi-square of counts against probs over the cells with probs > 0 (cells with probs == 0 must stay
// empty); expects p-value > kMinPValue and prints the statistic for the record.
void expect_distribution(const std::vector<int64_t>& counts, const std::vector<double>& probs,
                         const std::string& label) {
  const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  ASSERT_GT(n, 0) << label;
  double statistic = 0.0;
  int n_cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << label << ": token " << i << " has probability 0";
      continue;
    }
    const double expected = static_cast<double>(n) * probs[i];
    statistic += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) / expected;
    ++n_cells;
  }
  const int df = n_cells - 1;
  const double p_value = df > 0 ? chi_square_p_value(statistic, df) : 1.0;
  std::printf("[chi-square] %-52s n=%7lld X2=%7.2f df=%d p=%.3f\n", label.c_str(), static_cast<long long>(n),
              statistic, df, p_value);
  EXPECT_GT(p_value, kMinPValue) << label << ": X2=" << statistic << " df=" << df;
}

// |successes/n - rate| within 5 binomial standard deviations (exact when rate is 0 or 1).
void expect_rate(int64_t successes, int64_t n, double rate, const std::string& label) {
  const double observed = static_cast<double>(successes) / static_cast<double>(n);
  const double tolerance = 5.0 * std::sqrt(rate * (1.0 - rate) / static_cast<double>(n)) + 1e-12;
  std::printf("[rate]       %-52s observed=%.5f expected=%.5f\n", label.c_str(), observed, rate);
  EXPECT_NEAR(observed, rate, tolerance) << label;
}

// The draft's distribution as Sampler::distribution would give it: kept ids ascending, float probabilities.
std::vector<TokenProb> sparse(const std::vector<double>& probs) {
  std::vector<TokenProb> out;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0) out.push_back({static_cast<int32_t>(i), static_cast<float>(probs[i])});
  }
  return out;
}

int32_t draw_from(std::mt19937_64& rng, const std::vector<TokenProb>& probs) {
  double total = 0.0;
  for (const TokenProb& entry : probs) total += entry.prob;
  const double target = unit_double(rng) * total;
  double cumulative = 0.0;
  for (const TokenProb& entry : probs) {
    cumulative += entry.prob;
    if (target < cumulative) return entry.id;
  }
  return probs.back().id;
}

double overlap(const std::vector<double>& p, const std::vector<double>& q) {
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) sum += std::min(p[i], q[i]);
  return sum;
}

// Greedy ------------------------------------------------------------------------------------------------------

TEST(VerifyGreedy, AcceptsExactlyTheMatchingPrefixAndEmitsArgmax) {
  constexpr int64_t n_vocab = 32;
  std::mt19937_64 rng(11);
  for (int k = 1; k <= 8; ++k) {
    for (int m = 0; m <= k; ++m) {
      const std::vector<float> logits = random_logits(rng, static_cast<size_t>((k + 1) * n_vocab), -4.0, 4.0);
      std::vector<int32_t> argmax(k + 1);
      for (int i = 0; i <= k; ++i) argmax[i] = reference_argmax(std::span(logits).subspan(i * n_vocab, n_vocab));
      std::vector<DraftToken> draft(k);
      for (int i = 0; i < k; ++i) {
        const int32_t other = static_cast<int32_t>((argmax[i] + 1 + rng() % (n_vocab - 1)) % n_vocab);
        draft[i] = {i < m ? argmax[i] : other, {}};
      }
      Sampler sampler = make_sampler({.temperature = 0.0f, .seed = 5});
      const VerifyOutcome outcome = verify_ok(sampler, draft, logits, n_vocab);
      EXPECT_EQ(outcome.n_accepted, m) << "k=" << k << " m=" << m;
      EXPECT_EQ(outcome.emitted, std::vector<int32_t>(argmax.begin(), argmax.begin() + m + 1))
          << "k=" << k << " m=" << m;
      // Greedy verification must not touch the random generator.
      Sampler fresh = make_sampler({.temperature = 0.0f, .seed = 5});
      EXPECT_EQ(sampler.uniform(), fresh.uniform());
    }
  }
}

TEST(VerifyGreedy, RepetitionPenaltyMatchesPlainDecoding) {
  constexpr int64_t n_vocab = 6;
  const std::vector<int32_t> prompt = {1, 3};
  const SamplingParams params = {.temperature = 0.0f, .repetition_penalty = 1.3f};
  std::mt19937_64 rng(12);
  int n_penalty_changed_argmax = 0;
  for (int k = 1; k <= 8; ++k) {
    for (int m = 0; m <= k; ++m) {
      // Positive logits close together, so dividing a repeated token's logit by 1.3 often moves the argmax.
      const std::vector<float> logits = random_logits(rng, static_cast<size_t>((k + 1) * n_vocab), 0.5, 2.0);
      Sampler plain = make_sampler(params);
      for (int32_t token : prompt) plain.accept(token);
      std::vector<int32_t> expected;
      for (int i = 0; i <= k; ++i) {
        const std::span<const float> row = std::span(logits).subspan(i * n_vocab, n_vocab);
        expected.push_back(plain.sample(row));
        plain.accept(expected.back());
        n_penalty_changed_argmax += expected.back() != reference_argmax(row);
      }
      std::vector<DraftToken> draft(k);
      for (int i = 0; i < k; ++i) {
        const int32_t other = static_cast<int32_t>((expected[i] + 1 + rng() % (n_vocab - 1)) % n_vocab);
        draft[i] = {i < m ? expected[i] : other, {}};
      }
      Sampler sampler = make_sampler(params);
      for (int32_t token : prompt) sampler.accept(token);
      const VerifyOutcome outcome = verify_ok(sampler, draft, logits, n_vocab);
      EXPECT_EQ(outcome.n_accepted, m) << "k=" << k << " m=" << m;
      expected.resize(m + 1);
      EXPECT_EQ(outcome.emitted, expected) << "k=" << k << " m=" << m;
      std::vector<int32_t> history = prompt;
      history.insert(history.end(), expected.begin(), expected.end());
      const std::span<const int32_t> window = sampler.penalty_window();
      EXPECT_EQ(std::vector<int32_t>(window.begin(), window.end()), history);
    }
  }
  EXPECT_GT(n_penalty_changed_argmax, 0) << "the penalty never mattered; the test proves nothing";
}

TEST(VerifyGreedy, EmptyDraftEmitsOneTargetToken) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f};
  Sampler sampler = make_sampler({.temperature = 0.0f});
  const VerifyOutcome outcome = verify_ok(sampler, {}, logits, 3);
  EXPECT_EQ(outcome.n_accepted, 0);
  EXPECT_EQ(outcome.emitted, std::vector<int32_t>({1}));
}

TEST(VerifyGreedy, StopEndsRightAfterTheStopToken) {
  constexpr int64_t n_vocab = 4;
  // Row argmaxes: 2, 3, 1, 0.
  const std::vector<float> logits = {0, 0, 5, 0, 0, 0, 0, 5, 0, 5, 0, 0, 5, 0, 0, 0};
  const std::vector<DraftToken> draft = {{2, {}}, {3, {}}, {1, {}}};
  Sampler sampler = make_sampler({.temperature = 0.0f});
  VerifyOutcome outcome = verify_ok(sampler, draft, logits, n_vocab, [](int32_t token) { return token == 3; });
  EXPECT_EQ(outcome.n_accepted, 2);
  EXPECT_EQ(outcome.emitted, std::vector<int32_t>({2, 3}));

  // The stop token as the bonus: everything accepted, then the target's own token ends it as usual.
  outcome = verify_ok(sampler, draft, logits, n_vocab, [](int32_t token) { return token == 0; });
  EXPECT_EQ(outcome.n_accepted, 3);
  EXPECT_EQ(outcome.emitted, std::vector<int32_t>({2, 3, 1, 0}));

  // The stop token as a correction.
  const std::vector<DraftToken> wrong = {{2, {}}, {0, {}}, {1, {}}};
  outcome = verify_ok(sampler, wrong, logits, n_vocab, [](int32_t token) { return token == 3; });
  EXPECT_EQ(outcome.n_accepted, 1);
  EXPECT_EQ(outcome.emitted, std::vector<int32_t>({2, 3}));
}

// Stochastic ----------------------------------------------------------------------------------------------------

constexpr int64_t kSmallVocab = 8;
const std::vector<float> kRow0 = {2.0f, 0.5f, -1.0f, 1.2f, 0.0f, -2.5f, 0.8f, -0.3f};
const std::vector<float> kRow1 = {-0.4f, 1.1f, 0.3f, -1.5f, 1.6f, 0.9f, 0.0f, 2.1f};

std::vector<float> rows(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> out;
  for (const std::vector<float>& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// k = 1 with a fixed deterministic draft: the first emitted token must be ~ p whatever the draft, and the draft
// must be accepted with probability p(draft). Draft 0 has the highest p, 1 a low one, 5 is outside the top-k
// support of the truncated chains and 4 is cut by top-p in the last one.
TEST(VerifyStochastic, DeterministicDraftEmitsTheTargetDistribution) {
  constexpr int64_t n_samples = 200000;
  const std::vector<std::pair<std::string, SamplingParams>> chains = {
      {"T=1", {.temperature = 1.0f}},
      {"T=1 top_k=6", {.temperature = 1.0f, .top_k = 6}},
      {"T=0.7 top_k=5 top_p=0.9", {.temperature = 0.7f, .top_k = 5, .top_p = 0.9f}},
  };
  const std::vector<float> logits = rows({kRow0, kRow1});
  uint64_t seed = 100;
  for (const auto& [name, params] : chains) {
    const std::vector<double> p = reference_probs(kRow0, params);
    for (int32_t draft_id : {0, 1, 4, 5}) {
      SamplingParams seeded = params;
      seeded.seed = ++seed;
      Sampler sampler = make_sampler(seeded);
      const std::vector<DraftToken> draft = {{draft_id, {}}};
      std::vector<int64_t> counts(kSmallVocab, 0);
      int64_t n_accepted = 0;
      for (int64_t s = 0; s < n_samples; ++s) {
        const VerifyOutcome outcome = verify_ok(sampler, draft, logits, kSmallVocab);
        ++counts[outcome.emitted[0]];
        n_accepted += outcome.n_accepted;
        ASSERT_EQ(outcome.emitted.size(), static_cast<size_t>(outcome.n_accepted + 1));
      }
      const std::string label = name + " draft=" + std::to_string(draft_id);
      expect_distribution(counts, p, label + " first token");
      expect_rate(n_accepted, n_samples, p[draft_id], label + " acceptance");
    }
  }
}

// k = 2 with drafts drawn from q (by the test's own generator). q gives probability to tokens p cuts (top-k on a
// different row) and none to some p keeps, so both sides of the residual are exercised.
TEST(VerifyStochastic, SampledDraftEmitsTheTargetDistribution) {
  constexpr int64_t n_samples = 200000;
  const SamplingParams target_params = {.temperature = 0.8f, .top_k = 6, .seed = 7};
  const SamplingParams draft_params = {.temperature = 1.0f, .top_k = 5};
  const std::vector<float> draft_row0 = {1.0f, 1.4f, 0.2f, 0.3f, 1.2f, 0.9f, -2.0f, 0.1f};
  const std::vector<float> draft_row1 = {0.5f, 0.7f, 1.9f, -1.0f, 1.0f, 0.2f, 0.4f, 1.5f};
  const std::vector<double> p0 = reference_probs(kRow0, target_params);
  const std::vector<double> p1 = reference_probs(kRow1, target_params);
  const std::vector<double> q0 = reference_probs(draft_row0, draft_params);
  const std::vector<double> q1 = reference_probs(draft_row1, draft_params);
  const std::vector<TokenProb> q0_sparse = sparse(q0);
  const std::vector<TokenProb> q1_sparse = sparse(q1);
  const std::vector<float> logits = rows({kRow0, kRow1, kRow0});

  Sampler sampler = make_sampler(target_params);
  std::mt19937_64 draft_rng(8);
  std::vector<int64_t> first(kSmallVocab, 0);
  std::vector<int64_t> second(kSmallVocab, 0);
  int64_t n_first_accepted = 0;
  int64_t n_second_accepted = 0;
  for (int64_t s = 0; s < n_samples; ++s) {
    const std::vector<DraftToken> draft = {{draw_from(draft_rng, q0_sparse), q0_sparse},
                                           {draw_from(draft_rng, q1_sparse), q1_sparse}};
    const VerifyOutcome outcome = verify_ok(sampler, draft, logits, kSmallVocab);
    ASSERT_EQ(outcome.emitted.size(), static_cast<size_t>(outcome.n_accepted + 1));
    ++first[outcome.emitted[0]];
    if (outcome.n_accepted >= 1) {
      ++n_first_accepted;
      ++second[outcome.emitted[1]];
      n_second_accepted += outcome.n_accepted == 2;
    }
  }
  expect_distribution(first, p0, "q-draft k=2 first token");
  // Row 1's logits do not depend on the first token here, so given an accepted first draft the second is ~ p1.
  expect_distribution(second, p1, "q-draft k=2 second token | first accepted");
  expect_rate(n_first_accepted, n_samples, overlap(p0, q0), "q-draft first acceptance = sum min(p0, q0)");
  expect_rate(n_second_accepted, n_first_accepted, overlap(p1, q1), "q-draft second acceptance = sum min(p1, q1)");
}

// The penalties of row 1 must see the accepted draft: with repetition penalty 1.3 and history {prompt, d0},
// the second token is ~ the penalised p1 (computed here), not the unpenalised one.
TEST(VerifyStochastic, PenaltiesOfLaterRowsSeeAcceptedDrafts) {
  constexpr int64_t n_samples = 100000;
  const std::vector<int32_t> prompt = {6};
  const SamplingParams params = {.temperature = 1.0f, .repetition_penalty = 1.3f, .seed = 9};
  const int32_t d0 = 0;
  // d0 = 0 and prompt token 6 are among the top logits of row 1, so the penalty moves real mass.
  const std::vector<float> row1 = {2.2f, 1.1f, 0.3f, -1.5f, 1.6f, 0.9f, 2.0f, 1.8f};
  const std::vector<float> logits = rows({kRow0, row1, kRow0});
  const std::vector<double> p1 = reference_probs(row1, params, {6, d0});
  ASSERT_GT(std::abs(p1[d0] - reference_probs(row1, params, {6})[d0]), 0.05);

  Sampler sampler = make_sampler(params);
  const std::vector<DraftToken> draft = {{d0, {}}, {7, {}}};
  std::vector<int64_t> second(kSmallVocab, 0);
  for (int64_t s = 0; s < n_samples; ++s) {
    sampler.reset_history();
    for (int32_t token : prompt) sampler.accept(token);
    const VerifyOutcome outcome = verify_ok(sampler, draft, logits, kSmallVocab);
    if (outcome.n_accepted >= 1) ++second[outcome.emitted[1]];
  }
  expect_distribution(second, p1, "penalty 1.3 second token | d0 accepted");
}

TEST(VerifyStochastic, SameSeedSameOutcomes) {
  const SamplingParams params = {.temperature = 0.9f, .top_k = 6, .seed = 31};
  const std::vector<float> logits = rows({kRow0, kRow1, kRow0});
  const std::vector<DraftToken> draft = {{3, {}}, {1, {}}};
  Sampler a = make_sampler(params);
  Sampler b = make_sampler(params);
  for (int s = 0; s < 1000; ++s) {
    const VerifyOutcome outcome_a = verify_ok(a, draft, logits, kSmallVocab);
    const VerifyOutcome outcome_b = verify_ok(b, draft, logits, kSmallVocab);
    ASSERT_EQ(outcome_a.n_accepted, outcome_b.n_accepted);
    ASSERT_EQ(outcome_a.emitted, outcome_b.emitted);
  }
}

// Errors ----------------------------------------------------------------------------------------------------------

void expect_error(const std::vector<DraftToken>& draft, const float* logits, int64_t n_vocab,
                  const std::string& fragment) {
  Sampler sampler = make_sampler({.temperature = 1.0f, .seed = 3});
  const Result<VerifyOutcome> outcome = verify(sampler, draft, logits, n_vocab, {});
  ASSERT_FALSE(outcome.is_ok()) << fragment;
  EXPECT_NE(outcome.status().message().find(fragment), std::string::npos) << outcome.status().message();
  // A failed call leaves the sampler as it was.
  Sampler fresh = make_sampler({.temperature = 1.0f, .seed = 3});
  EXPECT_EQ(sampler.uniform(), fresh.uniform());
  EXPECT_TRUE(sampler.penalty_window().empty());
}

TEST(VerifyErrors, RejectsBadInputWithAClearMessage) {
  const std::vector<float> logits(3 * 4, 0.5f);
  expect_error({}, logits.data(), 0, "n_vocab is 0, expected > 0");
  expect_error({}, nullptr, 4, "logits is null");
  expect_error({{1, {}}, {4, {}}}, logits.data(), 4, "draft[1] token 4 outside the vocabulary [0, 4)");
  expect_error({{-1, {}}}, logits.data(), 4, "draft[0] token -1 outside the vocabulary [0, 4)");
  expect_error({{1, {{1, 0.5f}, {7, 0.5f}}}}, logits.data(), 4, "draft[0].probs[1] token 7 outside the vocabulary");
  expect_error({{1, {{2, 0.5f}, {1, 0.5f}}}}, logits.data(), 4, "expected increasing ids");
  expect_error({{1, {{1, 1.5f}, {2, -0.5f}}}}, logits.data(), 4, "probability -0.5, expected finite and >= 0");
  expect_error({{1, {{1, NAN}}}}, logits.data(), 4, "expected finite and >= 0");
  expect_error({{1, {{1, 0.5f}, {2, 0.2f}}}}, logits.data(), 4, "draft[0].probs sum to 0.7");
  expect_error({{1, {{0, 0.5f}, {2, 0.5f}}}}, logits.data(), 4, "draft[0] token 1 has probability 0 in its own probs");
}

// A tree's greedy walk: at each node the argmax picks among its children, and the path is the longest one
// whose every token is the argmax after its ancestors; random trees over random rows, against the walk spelled
// out here.
TEST(VerifyTreeGreedy, AcceptsTheLongestArgmaxPath) {
  constexpr int64_t n_vocab = 6;  // few ids, so children often hold the argmax
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 12);
    std::vector<DraftToken> draft;
    for (int i = 0; i < n; ++i) {
      const int32_t parent = static_cast<int32_t>(rng() % (i + 1)) - 1;  // -1 .. i - 1
      std::vector<int32_t> taken;
      for (const DraftToken& token : draft) {
        if (token.parent == parent) taken.push_back(token.id);
      }
      if (taken.size() == n_vocab) break;
      int32_t id = static_cast<int32_t>(rng() % n_vocab);
      while (std::find(taken.begin(), taken.end(), id) != taken.end()) id = (id + 1) % n_vocab;
      draft.push_back({id, {}, parent});
    }
    const std::vector<float> logits = random_logits(rng, (draft.size() + 1) * n_vocab, -4.0, 4.0);
    std::vector<int32_t> expected_emitted;
    std::vector<int32_t> expected_path;
    for (int32_t node = -1;;) {
      const int32_t best = reference_argmax(std::span(logits).subspan((node + 1) * n_vocab, n_vocab));
      expected_emitted.push_back(best);
      int32_t next = -2;
      for (size_t i = 0; i < draft.size(); ++i) {
        if (draft[i].parent == node && draft[i].id == best) next = static_cast<int32_t>(i);
      }
      if (next == -2) break;
      expected_path.push_back(next);
      node = next;
    }
    Sampler sampler = make_sampler({.temperature = 0.0f, .seed = 5});
    const VerifyOutcome outcome = verify_ok(sampler, draft, logits, n_vocab);
    EXPECT_EQ(outcome.emitted, expected_emitted) << "trial " << trial;
    EXPECT_EQ(outcome.path, expected_path) << "trial " << trial;
    EXPECT_EQ(outcome.n_accepted, static_cast<int>(expected_path.size()));
  }
}

// Recursive rejection over deterministic siblings keeps the target's distribution: the root has children 0, 1
// and 4 (child 1 with a child 2 of its own), and the first token has p(row 0), the second, after an accepted
// 1, p(row of draft 1); a root with every kept id as a child accepts one always.
TEST(VerifyTreeStochastic, SiblingsEmitTheTargetDistribution) {
  constexpr int64_t n_samples = 200000;
  const SamplingParams params = {.temperature = 0.9f, .top_k = 6, .seed = 41};
  const std::vector<DraftToken> draft = {{0, {}, -1}, {1, {}, -1}, {2, {}, 1}, {4, {}, -1}};
  // Rows: root, draft 0, draft 1, draft 2 (a leaf), draft 3.
  const std::vector<float> logits = rows({kRow0, kRow1, kRow1, kRow0, kRow1});
  Sampler sampler = make_sampler(params);
  std::vector<int64_t> first(kSmallVocab, 0);
  std::vector<int64_t> second_after_1(kSmallVocab, 0);
  for (int64_t s = 0; s < n_samples; ++s) {
    const VerifyOutcome outcome = verify_ok(sampler, draft, logits, kSmallVocab);
    ++first[outcome.emitted[0]];
    const bool child_accepted = outcome.emitted[0] == 0 || outcome.emitted[0] == 1 || outcome.emitted[0] == 4;
    ASSERT_EQ(outcome.n_accepted >= 1, child_accepted) << "token " << outcome.emitted[0];
    if (outcome.emitted[0] == 1) {
      ASSERT_GE(outcome.emitted.size(), 2u);
      ++second_after_1[outcome.emitted[1]];
    }
  }
  expect_distribution(first, reference_probs(kRow0, params), "tree root, children 0 1 4");
  expect_distribution(second_after_1, reference_probs(kRow1, params), "tree after child 1, its child 2");

  const std::vector<double> p = reference_probs(kRow0, params);
  std::vector<DraftToken> every_kept;
  for (int32_t id = 0; id < kSmallVocab; ++id) {
    if (p[id] > 0.0) every_kept.push_back({id, {}, -1});
  }
  const std::vector<float> wide = rows({kRow0, kRow1, kRow1, kRow1, kRow1, kRow1, kRow1});
  ASSERT_EQ(every_kept.size(), 6u);
  std::vector<int64_t> counts(kSmallVocab, 0);
  for (int64_t s = 0; s < n_samples / 4; ++s) {
    const VerifyOutcome outcome = verify_ok(sampler, every_kept, wide, kSmallVocab);
    ASSERT_EQ(outcome.n_accepted, 1) << "a kept token was not among the children";
    ++counts[outcome.emitted[0]];
  }
  expect_distribution(counts, p, "tree root, every kept id a child");
}

TEST(VerifyTreeErrors, RejectsBadTreesWithAClearMessage) {
  const std::vector<float> logits(4 * 4, 0.5f);
  expect_error({{1, {}, -1}, {2, {}, 1}}, logits.data(), 4, "draft[1] has parent 1, expected -1 .. 0");
  expect_error({{1, {}, -1}, {2, {}, -3}}, logits.data(), 4, "draft[1] has parent -3");
  expect_error({{1, {}, -1}, {1, {}, -1}}, logits.data(), 4, "draft[0] and draft[1] are siblings with the same token 1");
  expect_error({{1, {}, -1}, {2, {{2, 1.0f}}, -1}}, logits.data(), 4, "siblings and one carries probs");
}

// The p-values above are only as good as this helper: closed forms and a table value.
TEST(VerifyTestMath, ChiSquarePValue) {
  for (double x : {0.5, 2.0, 9.0, 40.0}) EXPECT_NEAR(chi_square_p_value(x, 2), std::exp(-x / 2), 1e-12);
  EXPECT_NEAR(chi_square_p_value(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_p_value(18.475306906582357, 7), 0.01, 1e-9);
  EXPECT_NEAR(chi_square_p_value(1.6353828943279067, 6), 0.95, 1e-9);
}

}  // namespace
}  // namespace rwd::spec
