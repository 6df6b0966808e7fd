// Sampling: greedy = argmax, seeded reproducibility (pinned to the standard's mt19937_64), the empirical
// distribution against softmax(logits / T), kept sets of top-k/top-p/min-p against a straightforward reference
// written here, penalty arithmetic, log-softmax against float64, and parameter validation.
// links: rewind_sampling
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace rwd::sampling {
namespace {

Sampler make_sampler(const SamplingParams& params) {
  Result<Sampler> sampler = Sampler::create(params);
  EXPECT_TRUE(sampler.is_ok()) << sampler.status().message();
  return std::move(sampler).value();
}

std::vector<float> random_logits(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::vector<float> logits(n);
  for (float& logit : logits) logit = static_cast<float>(lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1p-53);
  return logits;
}

// softmax(logits / temperature) in float64.
std::vector<double> reference_softmax(const std::vector<float>& logits, double temperature) {
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += probs[i] = std::exp((logits[i] - max_logit) / temperature);
  for (double& p : probs) p /= sum;
  return probs;
}

// The chain spelled out over ids sorted once by (logit desc, id asc): top-k, softmax at T of what is left,
// top-p prefix, min-p threshold. Returns the kept ids, ascending.
std::vector<int32_t> reference_kept(const std::vector<float>& logits, const SamplingParams& params) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < order.size()) order.resize(params.top_k);
  std::vector<float> kept_logits;
  for (int32_t id : order) kept_logits.push_back(logits[id]);
  const std::vector<double> probs = reference_softmax(kept_logits, params.temperature);
  size_t n_keep = order.size();
  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < order.size(); ++i) {
      cumulative += probs[i];
      if (cumulative >= params.top_p) {
        n_keep = i + 1;
        break;
      }
    }
  }
  std::vector<int32_t> kept;
  for (size_t i = 0; i < n_keep; ++i) {
    if (probs[i] >= params.min_p * probs[0]) kept.push_back(order[i]);
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

TEST(Argmax, LowestIdWinsTiesAndNaNNeverWins) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{NAN, -5.0f, NAN, -4.0f}), 3);
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -INFINITY}), 0);
}

TEST(Sampler, GreedyIsArgmaxAndDrawsNothing) {
  std::mt19937_64 rng(1);
  Sampler greedy = make_sampler({.temperature = 0.0f, .top_k = 3, .top_p = 0.5f, .seed = 7});
  Sampler untouched = make_sampler({.temperature = 0.0f, .seed = 7});
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits = random_logits(rng, 1 + trial, -5.0, 5.0);
    if (trial % 7 == 0) logits[trial / 2] = logits[trial];  // some exact ties
    ASSERT_EQ(greedy.sample(logits), argmax(logits)) << trial;
    const std::span<const TokenProb> dist = greedy.distribution(logits);
    ASSERT_EQ(dist.size(), 1u);
    EXPECT_EQ(dist[0].id, argmax(logits));
    EXPECT_EQ(dist[0].prob, 1.0f);
  }
  EXPECT_EQ(greedy.uniform(), untouched.uniform());  // greedy consumed no random numbers
}

// std::mt19937_64's 10000th output from the default seed 5489 is fixed by the C++ standard; uniform() is its
// top 53 bits. This pins the generator and the float conversion on every platform.
TEST(Sampler, RandomStreamIsTheStandardMersenneTwister) {
  Sampler sampler = make_sampler({.seed = 5489});
  double value = 0.0;
  for (int i = 0; i < 10000; ++i) value = sampler.uniform();
  EXPECT_EQ(value, static_cast<double>(9981545732273789042ull >> 11) * 0x1p-53);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
  std::mt19937_64 rng(2);
  const std::vector<float> logits = random_logits(rng, 50, -1.0, 1.0);
  const SamplingParams params{.temperature = 1.0f, .top_p = 0.9f, .seed = 1234};
  Sampler a = make_sampler(params);
  Sampler b = make_sampler(params);
  SamplingParams other = params;
  other.seed = 1235;
  Sampler c = make_sampler(other);
  int n_differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const int32_t token = a.sample(logits);
    ASSERT_EQ(token, b.sample(logits)) << i;
    n_differ += token != c.sample(logits);
  }
  EXPECT_GT(n_differ, 500);  // 50 near-uniform choices: two seeds agree about 1 time in 50
}

// 200k draws over a 6-token vocabulary at T = 0.7: Pearson's chi-square against softmax(logits / T) stays below
// 36, which a correct sampler exceeds with probability 1e-6 (5 degrees of freedom); the seed is fixed.
TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f};
  Sampler sampler = make_sampler({.temperature = 0.7f, .seed = 99});
  const int n_draws = 200000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n_draws; ++i) ++counts[sampler.sample(logits)];
  const std::vector<double> probs = reference_softmax(logits, 0.7);
  double chi_square = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double expected = probs[i] * n_draws;
    chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  EXPECT_LT(chi_square, 36.0);
  // The distribution the draws came from is the softmax itself.
  const std::span<const TokenProb> dist = sampler.distribution(logits);
  ASSERT_EQ(dist.size(), logits.size());
  for (size_t i = 0; i < dist.size(); ++i) {
    EXPECT_EQ(dist[i].id, static_cast<int32_t>(i));
    EXPECT_NEAR(dist[i].prob, probs[i], 1e-7);
  }
}

TEST(Sampler, TruncationKeepsTheReferenceSets) {
  std::mt19937_64 rng(3);
  struct Case {
    int32_t top_k;
    float top_p;
    float min_p;
    float temperature;
  };
  const Case cases[] = {{5, 1.0f, 0.0f, 1.0f},  {40, 1.0f, 0.0f, 0.5f}, {0, 0.9f, 0.0f, 1.0f},  {0, 0.5f, 0.0f, 2.0f},
                        {0, 1.0f, 0.05f, 1.0f}, {0, 1.0f, 0.5f, 0.3f}, {50, 0.8f, 0.02f, 0.8f}, {1, 1.0f, 0.0f, 1.0f},
                        {0, 1e-6f, 0.0f, 1.0f}, {3000, 0.95f, 0.0f, 1.3f}};
  for (const Case& c : cases) {
    for (size_t n_vocab : {7, 1000, 2048}) {
      std::vector<float> logits = random_logits(rng, n_vocab, -4.0, 4.0);
      for (size_t i = 0; i + 1 < n_vocab; i += 9) logits[i + 1] = logits[i];  // exact ties cross the cut-offs
      const SamplingParams params{.temperature = c.temperature, .top_k = c.top_k, .top_p = c.top_p, .min_p = c.min_p,
                                  .seed = n_vocab};
      Sampler sampler = make_sampler(params);
      const std::vector<int32_t> expected_ids = reference_kept(logits, params);
      const std::span<const TokenProb> dist = sampler.distribution(logits);
      std::vector<int32_t> ids;
      for (const TokenProb& tp : dist) ids.push_back(tp.id);
      ASSERT_EQ(ids, expected_ids) << "top_k " << c.top_k << " top_p " << c.top_p << " min_p " << c.min_p
                                   << " n_vocab " << n_vocab;
      // Kept probabilities are softmax(logits / T) renormalised over the kept set.
      std::vector<float> kept_logits;
      for (int32_t id : expected_ids) kept_logits.push_back(logits[id]);
      const std::vector<double> probs = reference_softmax(kept_logits, c.temperature);
      for (size_t i = 0; i < dist.size(); ++i) ASSERT_NEAR(dist[i].prob, probs[i], 1e-6 * probs[i] + 1e-12);
      // And draws never leave the kept set.
      const std::set<int32_t> allowed(expected_ids.begin(), expected_ids.end());
      for (int i = 0; i < 300; ++i) ASSERT_TRUE(allowed.count(sampler.sample(logits))) << i;
    }
  }
}

TEST(Sampler, MaskedLogitsAreNeverDrawn) {
  std::vector<float> logits(100, -std::numeric_limits<float>::infinity());
  logits[17] = -3.0f;
  logits[42] = -3.5f;
  logits[5] = NAN;
  Sampler sampler = make_sampler({.temperature = 1.5f, .seed = 5});
  for (int i = 0; i < 500; ++i) {
    const int32_t token = sampler.sample(logits);
    ASSERT_TRUE(token == 17 || token == 42) << token;
  }
  const std::vector<float> nothing(10, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(sampler.sample(nothing), 0);
}

// llama.cpp's rule: a positive logit is divided by the penalty, a non-positive one multiplied, once per distinct
// token in the window; then count * frequency + presence is subtracted.
TEST(Sampler, PenaltiesFollowTheRule) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  const SamplingParams params{.temperature = 1.0f, .repetition_penalty = 1.5f, .repeat_last_n = 4,
                              .frequency_penalty = 0.25f, .presence_penalty = 0.125f, .seed = 1};
  Sampler sampler = make_sampler(params);
  // Token 3 falls out of the 4-token window; the window is {0, 1, 0, 4}.
  for (int32_t token : {3, 0, 1, 0, 4}) sampler.accept(token);
  ASSERT_EQ(std::vector<int32_t>(sampler.penalty_window().begin(), sampler.penalty_window().end()),
            (std::vector<int32_t>{0, 1, 0, 4}));
  std::vector<float> expected = logits;
  expected[0] = 2.0f / 1.5f - (2 * 0.25f + 0.125f);
  expected[1] = -1.0f * 1.5f - (1 * 0.25f + 0.125f);
  expected[4] = -2.0f * 1.5f - (1 * 0.25f + 0.125f);
  const std::vector<double> probs = reference_softmax(expected, 1.0);
  const std::span<const TokenProb> dist = sampler.distribution(logits);
  ASSERT_EQ(dist.size(), logits.size());
  for (size_t i = 0; i < dist.size(); ++i) EXPECT_NEAR(dist[i].prob, probs[i], 1e-7) << i;
  // Greedy sees the penalised logits too: token 3 (untouched, 3.0) beats token 0 (2.0 -> 0.71).
  Sampler greedy = make_sampler({.temperature = 0.0f, .repetition_penalty = 4.0f, .repeat_last_n = -1});
  EXPECT_EQ(greedy.sample(std::vector<float>{5.0f, 2.0f}), 0);
  greedy.accept(0);
  EXPECT_EQ(greedy.sample(std::vector<float>{5.0f, 2.0f}), 1);  // 5 / 4 < 2
}

TEST(Sampler, WindowZeroAndAllHistory) {
  const std::vector<float> logits = {1.0f, 1.0f};
  Sampler none = make_sampler({.temperature = 1.0f, .repetition_penalty = 2.0f, .repeat_last_n = 0});
  Sampler all = make_sampler({.temperature = 1.0f, .repetition_penalty = 2.0f, .repeat_last_n = -1});
  for (int i = 0; i < 500; ++i) {
    none.accept(0);
    all.accept(i == 0 ? 0 : 1);
  }
  EXPECT_TRUE(none.penalty_window().empty());
  EXPECT_EQ(all.penalty_window().size(), 500u);
  EXPECT_EQ(none.distribution(logits)[0].prob, 0.5f);
  EXPECT_NEAR(all.distribution(logits)[0].prob, 0.5f, 1e-7);  // both penalised alike: 1 / 2 each
  all.reset_history();
  EXPECT_TRUE(all.penalty_window().empty());
}

TEST(Sampler, HistoryTrimKeepsTheLastTokens) {
  Sampler sampler = make_sampler({.repeat_last_n = 3});
  for (int32_t token = 0; token < 1000; ++token) sampler.accept(token);
  EXPECT_EQ(std::vector<int32_t>(sampler.penalty_window().begin(), sampler.penalty_window().end()),
            (std::vector<int32_t>{997, 998, 999}));
}

TEST(LogSoftmax, MatchesFloat64Reference) {
  std::mt19937_64 rng(4);
  for (double offset : {0.0, 1000.0, -1000.0}) {
    std::vector<float> logits = random_logits(rng, 4099, offset - 20.0, offset + 20.0);
    logits[100] = -std::numeric_limits<float>::infinity();
    std::vector<float> out = {1.0f, 2.0f};  // resized by the call
    log_softmax(logits, out);
    ASSERT_EQ(out.size(), logits.size());
    // Independent of the implementation's max-subtraction: long double, pivoting on the first logit.
    long double sum = 0.0L;
    for (float l : logits) sum += std::exp(static_cast<long double>(l) - logits[0]);
    const long double lse = logits[0] + std::log(sum);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (i == 100) {
        EXPECT_EQ(out[i], -std::numeric_limits<float>::infinity());
        continue;
      }
      const double expected = static_cast<double>(logits[i] - lse);
      // One float rounding of the result; float64 work before it is exact to ~1e-13 of |logit|.
      ASSERT_NEAR(out[i], expected, 0x1p-24 * std::fabs(expected) + 1e-12 * (std::fabs(offset) + 1.0)) << i;
    }
  }
}

TEST(LogSoftmax, TopKLogprobs) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  std::vector<float> all;
  log_softmax(logits, all);
  const std::vector<TokenLogprob> top = top_k_logprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);  // tie with id 3: lower id first
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 4);
  for (const TokenLogprob& t : top) EXPECT_EQ(t.logprob, all[t.id]);
  double prob_sum = 0.0;
  for (float lp : all) prob_sum += std::exp(static_cast<double>(lp));
  EXPECT_NEAR(prob_sum, 1.0, 1e-6);
  EXPECT_EQ(top_k_logprobs(logits, 50).size(), logits.size());
  EXPECT_TRUE(top_k_logprobs(logits, 0).empty());
}

TEST(SamplingParams, ValidationNamesFieldAndValue) {
  EXPECT_TRUE(validate(SamplingParams{}).is_ok());
  EXPECT_TRUE(validate({.temperature = 0.0f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f}).is_ok());
  struct Bad {
    SamplingParams params;
    const char* field;
    const char* value;
  };
  const Bad bad[] = {{{.temperature = -0.5f}, "temperature", "-0.5"},
                     {{.temperature = INFINITY}, "temperature", "inf"},
                     {{.top_k = -1}, "top_k", "-1"},
                     {{.top_p = 0.0f}, "top_p", "0"},
                     {{.top_p = 1.5f}, "top_p", "1.5"},
                     {{.min_p = -0.1f}, "min_p", "-0.1"},
                     {{.min_p = 2.0f}, "min_p", "2"},
                     {{.repetition_penalty = 0.0f}, "repetition_penalty", "0"},
                     {{.repetition_penalty = -1.0f}, "repetition_penalty", "-1"},
                     {{.repeat_last_n = -2}, "repeat_last_n", "-2"},
                     {{.frequency_penalty = NAN}, "frequency_penalty", "nan"},
                     {{.presence_penalty = INFINITY}, "presence_penalty", "inf"}};
  for (const Bad& b : bad) {
    const Status status = validate(b.params);
    ASSERT_FALSE(status.is_ok()) << b.field;
    EXPECT_NE(status.message().find(b.field), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(b.value), std::string::npos) << status.message();
    EXPECT_FALSE(Sampler::create(b.params).is_ok()) << b.field;
  }
}

}  // namespace
}  // namespace rwd::sampling
