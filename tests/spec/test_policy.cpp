// The draft-length policy against the expected-tokens-per-cost rule worked out by hand: long drafts when
// acceptance is high and verify batches are cheap, short ones when batches are expensive, plain decoding (and
// a periodic probe) when speculation cannot pay; and the cost model's fit of measured forward times.
// links: rewind_spec
#include <gtest/gtest.h>

#include <cmath>

#include "spec/policy.h"

namespace rwd::spec {
namespace {

CostModel linear_cost(double step_seconds, double per_token_seconds) {
  CostModel cost;
  for (int n = 1; n <= 9; ++n) cost.observe(n, step_seconds + per_token_seconds * (n - 1));
  return cost;
}

void feed(DraftPolicy& policy, int rounds, int drafted, int accepted) {
  for (int i = 0; i < rounds; ++i) policy.record(drafted, accepted);
}

TEST(CostModel, MeasuredRatiosInterpolationAndOptimisticExtension) {
  CostModel cost;
  EXPECT_DOUBLE_EQ(cost.relative_cost(5), 1.0 + 0.1 * 4);  // nothing measured: optimistic
  cost.observe(1, 0.004);
  cost.observe(3, 0.006);
  cost.observe(7, 0.014);
  EXPECT_DOUBLE_EQ(cost.relative_cost(3), 1.5);
  EXPECT_NEAR(cost.relative_cost(5), 2.5, 1e-9);            // halfway between t(3) and t(7)
  EXPECT_NEAR(cost.relative_cost(9), 3.5 + 0.2, 1e-9);      // t(7) / t(1) plus 0.1 per token beyond it
  EXPECT_NEAR(cost.relative_cost(9, 3), 14.0 / 6.0 + 2 * 0.1 / 3, 1e-9);
  cost.observe(0, 1.0);    // ignored: out of range
  cost.observe(2, -1.0);   // ignored: not a time
  EXPECT_DOUBLE_EQ(cost.seconds(2), 0.0);
}

TEST(CostModel, TheSecondTimingOfASizeReplacesTheFirst) {
  CostModel cost;
  cost.observe(1, 0.010);
  cost.observe(4, 0.100);  // the first 4-token forward grew its scratch buffers
  EXPECT_DOUBLE_EQ(cost.relative_cost(4), 10.0);
  cost.observe(4, 0.015);
  EXPECT_DOUBLE_EQ(cost.seconds(4), 0.015);
  cost.observe(4, 0.025);  // from the third on, an exponential average
  EXPECT_NEAR(cost.seconds(4), 0.9 * 0.015 + 0.1 * 0.025, 1e-15);
  ProposerCost proposer;
  proposer.observe(3, 0.090);
  proposer.observe(3, 0.030);
  EXPECT_DOUBLE_EQ(proposer.seconds(3), 0.030);
}

TEST(DraftPolicy, HighAcceptanceAndCheapVerifyDraftLong) {
  const CostModel cost = linear_cost(0.010, 0.0005);  // an extra token costs 5 % of a step
  DraftPolicy policy(1, 8, true);
  feed(policy, 60, 8, 8);
  EXPECT_GT(policy.acceptance(), 0.95);
  EXPECT_EQ(policy.next_length(cost, ProposerCost{}, 1), 8);
}

TEST(DraftPolicy, ExpensiveVerifyKeepsDraftsShort) {
  // Acceptance 0.7 and an extra token costing 40 % of a step: expected tokens per cost peaks at k = 1 or 2,
  // (1 + a) / 1.4 = 1.21, (1 + a + a^2) / 1.8 = 1.22, (1 + a + a^2 + a^3) / 2.2 = 1.16.
  const CostModel cost = linear_cost(0.010, 0.004);
  DraftPolicy policy(1, 8, true);
  for (int i = 0; i < 200; ++i) policy.record(10, 7);  // 7 accepted then a rejection: 7 of 8 evaluated
  const double a = policy.acceptance();
  ASSERT_NEAR(a, 7.0 / 8.0, 0.01);
  int best = 0;
  double best_gain = 0.0;
  for (int k = 1; k <= 8; ++k) {
    const double gain = (1.0 - std::pow(a, k + 1)) / (1.0 - a) / (1.0 + 0.4 * k);
    if (gain > best_gain) {
      best_gain = gain;
      best = k;
    }
  }
  EXPECT_EQ(policy.next_length(cost, ProposerCost{}, 1), best);
}

TEST(DraftPolicy, EverySixteenthRoundDraftsOneLonger) {
  // A length that looks worse than the best is tried again now and then, so its cost is measured afresh.
  const CostModel cost = linear_cost(0.010, 0.004);
  DraftPolicy policy(1, 8, true);
  feed(policy, 192, 10, 7);  // 192 rounds: the next is the 193rd
  const int best = policy.next_length(cost, ProposerCost{}, 1);
  ASSERT_LT(best, 8);
  int longer = 0;
  for (int round = 193; round <= 224; ++round) {
    const int k = policy.next_length(cost, ProposerCost{}, 1);
    if (k != best) {
      EXPECT_EQ(k, best + 1);
      EXPECT_EQ(round % 16, 0) << "round " << round;
      ++longer;
    }
    policy.record(10, 7);
  }
  EXPECT_EQ(longer, 2);
}

TEST(DraftPolicy, LosingSpeculationFallsBackAndProbesAgain) {
  const CostModel cost = linear_cost(0.004, 0.002);  // an extra token costs half a step
  DraftPolicy policy(1, 8, true);
  feed(policy, 40, 4, 0);  // nothing is ever accepted
  EXPECT_EQ(policy.next_length(cost, ProposerCost{}, 1), 0);
  EXPECT_EQ(policy.decisions().fallbacks, 1);
  int plain = 1;
  while (plain < 100 && policy.next_length(cost, ProposerCost{}, 1) == 0) ++plain;
  EXPECT_EQ(plain, 32) << "a probe round of draft_min tokens after 32 plain steps";
  EXPECT_EQ(policy.decisions().plain_steps, 32);
  policy.record(1, 0);  // the probe failed: back to plain decoding
  EXPECT_EQ(policy.next_length(cost, ProposerCost{}, 1), 0);
  EXPECT_EQ(policy.decisions().fallbacks, 2);
}

// Each probe that finds speculation still losing doubles the wait for the next (a draft model's probe first
// reads every token decoded without it), up to 512 plain steps; a probe after which speculation pays again
// brings the wait back to 32.
TEST(DraftPolicy, FailedProbesWaitLongerUntilOneSucceeds) {
  const CostModel cost = linear_cost(0.004, 0.002);
  DraftPolicy policy(1, 8, true);
  const auto plain_until_probe = [&] {
    int plain = 0;
    while (plain < 2000 && policy.next_length(cost, ProposerCost{}, 1) == 0) ++plain;
    return plain;
  };
  feed(policy, 40, 4, 0);
  ASSERT_EQ(policy.next_length(cost, ProposerCost{}, 1), 0);
  EXPECT_EQ(plain_until_probe(), 31);  // the fallback decision above was the first plain step
  for (const int wait : {64, 128, 256, 512, 512}) {
    policy.record(1, 0);
    EXPECT_EQ(plain_until_probe(), wait);
  }
  feed(policy, 40, 4, 4);  // the text turned predictable: the probe led to speculation that pays
  EXPECT_GE(policy.next_length(cost, ProposerCost{}, 1), 1);
  feed(policy, 40, 4, 0);
  ASSERT_EQ(policy.next_length(cost, ProposerCost{}, 1), 0);
  EXPECT_EQ(plain_until_probe(), 31);
}

TEST(DraftPolicy, ANewSlotDraftsUntilItHasEvidence) {
  // A proposer costing 0.45 of a step per token and an extra verify token 20 %: at the prior's acceptance of
  // 1/2 no length pays ((1 + a) / 1.65 = 0.91 at k = 1), but the prior is no evidence. The slot drafts until
  // 16 of its draft tokens were verified; if they were right it goes on, if wrong it falls back.
  const CostModel cost = linear_cost(0.010, 0.002);
  ProposerCost proposer;
  for (int k = 1; k <= 8; ++k) proposer.observe(k, 0.0045 * k);
  for (const bool right : {true, false}) {
    DraftPolicy policy(1, 8, true);
    int64_t verified = 0;
    while (verified < 16) {
      const int k = policy.next_length(cost, proposer, 1);
      ASSERT_GE(k, 1) << "fell back after " << verified << " verified draft tokens";
      policy.record(k, right ? k : 0);
      verified += right ? k : 1;
    }
    EXPECT_EQ(policy.next_length(cost, proposer, 1) == 0, !right) << (right ? "right drafts" : "wrong drafts");
  }
}

TEST(ProposerCost, MeasuredInterpolatedAndOptimisticallyExtended) {
  ProposerCost proposer;
  EXPECT_DOUBLE_EQ(proposer.seconds(3), 0.0);
  proposer.observe(2, 0.010);  // a first forward of 6 ms and one more of 4 ms
  proposer.observe(6, 0.026);
  EXPECT_DOUBLE_EQ(proposer.seconds(2), 0.010);
  EXPECT_NEAR(proposer.seconds(4), 0.018, 1e-12);              // halfway
  EXPECT_NEAR(proposer.seconds(8), 0.026 * (1 + 0.5 * 2 / 6.0), 1e-12);  // half the per-token time per extra token
  EXPECT_NEAR(proposer.seconds(1), 0.005, 1e-12);              // scaled down from 2
  proposer.observe(0, 1.0);
  proposer.observe(3, -1.0);
  EXPECT_NEAR(proposer.seconds(3), 0.014, 1e-12);              // ignored: still interpolated
}

TEST(DraftPolicy, FixedLengthIgnoresTheMeasurements) {
  const CostModel cost = linear_cost(0.004, 0.004);
  DraftPolicy policy(2, 5, false);
  feed(policy, 40, 5, 0);
  EXPECT_EQ(policy.next_length(cost, ProposerCost{}, 1), 5);
}

TEST(DraftPolicy, SharedBatchesCompareAgainstAStepOfAllSlots) {
  // Four slots: a plain step is 4 tokens, a round 4 (k + 1); with t(n) = 10 ms + 1 ms n, k = 2 costs
  // t(12) / t(4) = 22 / 14, not t(3) / t(1).
  CostModel cost;
  for (int n = 1; n <= 40; ++n) cost.observe(n, 0.010 + 0.001 * n);
  EXPECT_NEAR(cost.relative_cost(12, 4), 22.0 / 14.0, 1e-9);
  DraftPolicy policy(1, 8, true);
  feed(policy, 100, 8, 8);
  const int k = policy.next_length(cost, ProposerCost{}, 4);
  EXPECT_GE(k, 1);
  EXPECT_LE(k, 8);
}

// Tree or chain: the shapes alternate until each has 4 rounds, then the one that gave more tokens per unit of
// verify cost drafts, with the other tried every 16th choice; when the other starts winning, the choice follows.
TEST(DraftPolicy, TreeOrChainFollowsTokensPerCost) {
  DraftPolicy policy(1, 8, true);
  const auto play = [&](int n, double tree_tokens, double chain_tokens, int& trees) {
    trees = 0;
    for (int i = 0; i < n; ++i) {
      const bool tree = policy.next_tree();
      trees += tree ? 1 : 0;
      // Trees verify 9 tokens at a relative cost of 2, chains 5 at 1.5.
      policy.record_shape(tree, static_cast<int>(tree ? tree_tokens : chain_tokens), tree ? 2.0 : 1.5);
    }
  };
  int trees = 0;
  play(8, 4, 2, trees);
  EXPECT_EQ(trees, 4) << "the first rounds alternate";
  play(64, 4, 2, trees);  // trees: 2 tokens per unit of cost, chains 1.33
  EXPECT_EQ(trees, 60) << "the tree wins and the chain is retried every 16th round";
  play(128, 2, 3, trees);  // now chains give 2 per cost, trees 1
  EXPECT_LT(trees, 32) << "the choice moves to the chain once its average overtakes";
  int last_trees = 0;
  play(64, 2, 3, last_trees);
  EXPECT_EQ(last_trees, 4);
  DraftPolicy fixed(1, 8, false);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(fixed.next_tree()) << "fixed drafting always takes the tree";
}

}  // namespace
}  // namespace rwd::spec
