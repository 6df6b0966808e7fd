// The draft-shape policy against the expected-tokens-per-cost rule worked out by hand: long drafts when
// acceptance is high and verify batches are cheap, short ones when batches are expensive, plain decoding (and
// a periodic probe) when speculation cannot pay, tree alternatives where they are taken often enough to pay
// for their rows (against every shape enumerated); the cost model's fit of measured forward times.
// The loss budget by hand, and generations simulated on hand-set costs: whatever the drafts' acceptance, the
// policy's choices never cost more than the budget allows against plain decoding.
// links: rewind_spec
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "spec/policy.h"

namespace rwd::spec {
namespace {

CostModel linear_cost(double step_seconds, double per_token_seconds) {
  CostModel cost;
  for (int n = 1; n <= 9; ++n) cost.observe(1, n, step_seconds + per_token_seconds * (n - 1));
  return cost;
}

// A round recorded and settled as costing one plain step: tests of the shape choice keep the loss budget out
// of the way (LossBudget and the simulated generations below test it).
void settled_round(DraftPolicy& policy, int drafted, int accepted) {
  policy.record(drafted, accepted);
  policy.settle(accepted + 1, 1.0);
}

void feed(DraftPolicy& policy, int rounds, int drafted, int accepted) {
  for (int i = 0; i < rounds; ++i) settled_round(policy, drafted, accepted);
}

TEST(CostModel, MeasuredRatiosInterpolationAndOptimisticExtension) {
  CostModel cost;
  EXPECT_DOUBLE_EQ(cost.relative_cost(1, 5), 1.0 + 0.1 * 4);  // nothing measured: optimistic
  cost.observe(1, 1, 0.004);
  cost.observe(1, 3, 0.006);
  cost.observe(1, 7, 0.014);
  EXPECT_DOUBLE_EQ(cost.relative_cost(1, 3), 1.5);
  EXPECT_NEAR(cost.relative_cost(1, 5), 2.5, 1e-9);            // halfway between t(3) and t(7)
  EXPECT_NEAR(cost.relative_cost(1, 9), 3.5 + 0.2, 1e-9);      // t(7) / t(1) plus 0.1 per token beyond it
  // Three slots: their own plain step is the base, and the slope is per slot.
  EXPECT_DOUBLE_EQ(cost.relative_cost(3, 9), 1.0 + 0.1 / 3 * 6) << "nothing measured for three slots";
  cost.observe(3, 3, 0.006);
  cost.observe(3, 7, 0.014);
  EXPECT_NEAR(cost.relative_cost(3, 9), 14.0 / 6.0 + 2 * 0.1 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(cost.relative_cost(1, 3), 1.5) << "one slot's three tokens are another size";
  cost.observe(0, 1, 1.0);     // ignored: no slot
  cost.observe(2, 1, 1.0);     // ignored: fewer tokens than slots
  cost.observe(1, 2, -1.0);    // ignored: not a time
  EXPECT_DOUBLE_EQ(cost.seconds(1, 2), 0.0);
  EXPECT_DOUBLE_EQ(cost.seconds(2, 2), 0.0);
}

// Four slots' plain step at 0.9 ms and one slot's at 0.4: a slot leaving the batch saves (0.9 - 0.4) / 3 of
// the step, 0.167 ms, against the 0.225 ms share it had: its tokens are worth 0.74 of a share.
TEST(CostModel, ATokenAheadIsWorthTheSlotsMarginalStep) {
  CostModel cost;
  EXPECT_DOUBLE_EQ(cost.token_value(4), 1.0) << "nothing timed";
  cost.observe(4, 4, 0.0009);
  EXPECT_DOUBLE_EQ(cost.token_value(4), 1.0) << "one slot's step not timed";
  cost.observe(1, 1, 0.0004);
  EXPECT_NEAR(cost.token_value(4), (0.0005 / 3) / (0.0009 / 4), 1e-12);
  EXPECT_DOUBLE_EQ(cost.token_value(1), 1.0);
  cost.observe(2, 2, 0.00041);  // a second slot nearly free: clamped to a quarter
  EXPECT_DOUBLE_EQ(cost.token_value(2), 0.25);
  LossBudget budget;
  budget.settle(3, 2.0, 0.5);  // one token for the step, two more worth half a step each
  EXPECT_DOUBLE_EQ(budget.balance(), 0.0);
  EXPECT_EQ(budget.tokens(), 3);
}

TEST(CostModel, TheSecondTimingOfASizeReplacesTheFirst) {
  CostModel cost;
  cost.observe(1, 1, 0.010);
  cost.observe(1, 4, 0.100);  // the first 4-token forward grew its scratch buffers
  EXPECT_DOUBLE_EQ(cost.relative_cost(1, 4), 10.0);
  cost.observe(1, 4, 0.015);
  EXPECT_DOUBLE_EQ(cost.seconds(1, 4), 0.015);
  EXPECT_EQ(cost.timings(1, 4), 2);
  ProposerCost proposer;
  proposer.observe(3, 0.090);
  proposer.observe(3, 0.030);
  EXPECT_DOUBLE_EQ(proposer.seconds(3), 0.030);
}

// From the second timing on, the median of the last five: one slow call (the core taken by another process)
// moves nothing, a lasting change of speed is followed within three calls.
TEST(CostModel, TheMedianOfTheLastFiveTimings) {
  CostModel cost;
  const std::vector<double> timings = {0.900, 0.010, 0.012, 0.011, 0.200, 0.013, 0.030, 0.031, 0.032};
  // Medians by hand after each timing: the first alone; then the kept ones without it.
  const std::vector<double> medians = {0.900, 0.010, 0.011, 0.011, 0.0115, 0.012, 0.013, 0.030, 0.031};
  for (size_t i = 0; i < timings.size(); ++i) {
    cost.observe(1, 2, timings[i]);
    EXPECT_DOUBLE_EQ(cost.seconds(1, 2), medians[i]) << "after timing " << i;
  }
  EXPECT_EQ(cost.timings(1, 2), static_cast<int64_t>(timings.size()));
  EXPECT_EQ(cost.timings(1, 3), 0);
  EXPECT_EQ(cost.timings(2, 2), 0);
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
  for (int i = 0; i < 200; ++i) settled_round(policy, 10, 7);  // 7 accepted then a rejection: 7 of 8 evaluated
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
    settled_round(policy, 10, 7);
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
  // A proposer costing 0.3 of a step per token and an extra verify token 20 %: at the prior's acceptance of
  // 1/2, k = 1 gives (1 + a) / 1.5 = 1.0, which does not beat plain decoding by the 3 % margin, but the prior is
  // no evidence. The slot drafts until 16 of its draft tokens were verified; if they were right it goes on,
  // if wrong it falls back (the rounds settled as free, so that the loss budget does not stop it first).
  const CostModel cost = linear_cost(0.010, 0.002);
  ProposerCost proposer;
  for (int k = 1; k <= 8; ++k) proposer.observe(k, 0.003 * k);
  for (const bool right : {true, false}) {
    DraftPolicy policy(1, 8, true);
    int64_t verified = 0;
    while (verified < 16) {
      const int k = policy.next_length(cost, proposer, 1);
      ASSERT_GE(k, 1) << "fell back after " << verified << " verified draft tokens";
      settled_round(policy, k, right ? k : 0);
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
  for (int n = 4; n <= 40; ++n) cost.observe(4, n, 0.010 + 0.001 * n);
  EXPECT_NEAR(cost.relative_cost(4, 12), 22.0 / 14.0, 1e-9);
  DraftPolicy policy(1, 8, true);
  feed(policy, 100, 8, 8);
  const int k = policy.next_length(cost, ProposerCost{}, 4);
  EXPECT_GE(k, 1);
  EXPECT_LE(k, 8);
}

// Four slots whose step takes 1 ms: one extra token among them adds 0.3 ms, one for each of the four 0.45 ms.
// Drafting one token each, all four share the round: 1 + 0.45 steps each, a worst loss of 0.45 the budget's
// 0.8 bears. A slot drafting it alone bears the whole 0.3 ms, 1.2 of its quarter-steps: the engine's check
// after every slot has chosen finds that, and the slot decodes plainly.
TEST(DraftPolicy, ASlotDraftingWithFewerSlotsThanExpectedBearsMoreOfTheRound) {
  CostModel cost;
  cost.observe(4, 4, 0.001);
  cost.observe(4, 5, 0.0013);
  cost.observe(4, 8, 0.00145);
  DraftPolicy policy(1, 4, true);
  ASSERT_EQ(policy.next_length(cost, ProposerCost{}, 4, 4), 1);
  const DraftShape one{1, 0, {}};
  EXPECT_TRUE(policy.bears(one, cost, ProposerCost{}, 4, 4));
  EXPECT_FALSE(policy.bears(one, cost, ProposerCost{}, 4, 1));
  policy.decline();
  EXPECT_EQ(policy.decisions().plain_steps, 1);
  EXPECT_EQ(policy.decisions().budget_plain, 1);
  EXPECT_EQ(policy.budget().tokens(), 1);
  EXPECT_TRUE(DraftPolicy(1, 4, false).bears(one, cost, ProposerCost{}, 4, 1)) << "fixed drafts: no budget";
}

TEST(RankAcceptance, PriorEvidenceDepthsAndDecay) {
  RankAcceptance ranks;
  EXPECT_DOUBLE_EQ(ranks.estimate(1, 2), 0.3);  // nothing seen: the prior
  ranks.observe(1, 2, true);
  ranks.observe(1, 2, true);
  ranks.observe(1, 1, false);  // rank 1 is the chain's token: the draft-length estimate's, not this one's
  EXPECT_EQ(ranks.trials(), 2);
  const double pooled = (2 + 0.3 * 2) / (2 + 2.0);
  EXPECT_NEAR(ranks.estimate(1, 2), (2 + 4 * pooled) / (2 + 4.0), 1e-12);
  EXPECT_NEAR(ranks.estimate(2, 2), pooled, 1e-12) << "a depth with no evidence of its own leans on all depths'";
  EXPECT_DOUBLE_EQ(ranks.estimate(1, 3), 0.3);
  ranks.observe(9, 40, false);  // past the last depth and rank: counted with them
  EXPECT_NEAR(ranks.estimate(RankAcceptance::kDepths, RankAcceptance::kMaxRank), 0.6 / 3.0 * 4 / 5.0, 1e-12);
  ranks.decay(0.5);
  EXPECT_NEAR(ranks.estimate(1, 2), (1 + 4 * ((1 + 0.6) / 3.0)) / (1 + 4.0), 1e-12);
}

// record_tree walks the accepted path: at each node, the children before the taken one missed and the taken one
// hit (ranks from 2 on), and where the path ends, every child missed.
TEST(DraftPolicy, RecordTreeCountsRanksAlongThePath) {
  // Root children: 0 (the chain's token) and 3; node 0's: 1 and 2; node 3's: 4.
  const std::vector<int32_t> parents = {-1, 0, 0, -1, 3};
  DraftPolicy policy(1, 8, true);
  policy.record_tree(parents, std::vector<int32_t>{0, 2});  // depth 2: rank 1 missed, rank 2 taken
  EXPECT_EQ(policy.rank_acceptance().trials(), 1);
  EXPECT_GT(policy.rank_acceptance().estimate(2, 2), 0.3);
  DraftPolicy ended(1, 8, true);
  ended.record_tree(parents, std::vector<int32_t>{});  // nothing taken at the root: rank 2 (node 3) missed
  EXPECT_EQ(ended.rank_acceptance().trials(), 1);
  EXPECT_LT(ended.rank_acceptance().estimate(1, 2), 0.3);
  DraftPolicy off_chain(1, 8, true);
  off_chain.record_tree(parents, std::vector<int32_t>{3});  // rank 2 taken at depth 1, then node 4 missed (rank 1)
  EXPECT_EQ(off_chain.rank_acceptance().trials(), 1);
  EXPECT_GT(off_chain.rank_acceptance().estimate(1, 2), 0.3);
}

// The greedy allocation of alternatives against every shape enumerated: with topk 2 each depth has one
// alternative, worth α^(d-1) (1 - α) q(d, 2) tokens, so the best shape is found by trying all subsets.
TEST(DraftPolicy, TreeShapeIsTheBestOfAllShapes) {
  for (const double per_token : {0.0002, 0.001, 0.003}) {
    for (const bool runners_up_hit : {true, false}) {
      const CostModel cost = linear_cost(0.010, per_token);
      DraftPolicy policy(1, 4, true);
      for (int i = 0; i < 200; ++i) {
        settled_round(policy, 10, 1);  // α = 1/2
        // A tree of the chain's token and one alternative at depth 1; 80 % (or none) of the alternatives are
        // taken where the chain's token was not.
        const bool hit = runners_up_hit && i % 5 != 0;
        policy.record_tree(std::vector<int32_t>{-1, -1}, hit ? std::vector<int32_t>{1} : std::vector<int32_t>{});
      }
      const double alpha = policy.acceptance();
      const RankAcceptance& ranks = policy.rank_acceptance();
      double best_gain = 0.0;
      DraftShape best;
      for (int k = 1; k <= 4; ++k) {
        for (int mask = 0; mask < (1 << k); ++mask) {
          double tokens = (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
          std::vector<int> alternatives(static_cast<size_t>(k), 0);
          int extra = 0;
          for (int d = 0; d < k; ++d) {
            if ((mask >> d & 1) == 0) continue;
            tokens += std::pow(alpha, d) * (1.0 - alpha) * ranks.estimate(d + 1, 2);
            alternatives[d] = 1;
            ++extra;
          }
          if (k + extra > 6) continue;  // the node budget
          const double gain = tokens / cost.relative_cost(1, k + 1 + extra);
          if (gain > best_gain + 1e-12) {
            best_gain = gain;
            while (!alternatives.empty() && alternatives.back() == 0) alternatives.pop_back();
            best = {k, extra > 0 ? k + extra : 0, alternatives};
          }
        }
      }
      const DraftShape shape = policy.next_shape(cost, ProposerCost{}, 1, 6, 2);
      SCOPED_TRACE(testing::Message() << "per-token cost " << per_token << ", alternatives taken: " << runners_up_hit);
      EXPECT_EQ(shape.length, best.length);
      EXPECT_EQ(shape.nodes, best.nodes);
      EXPECT_EQ(shape.alternatives, best.alternatives);
      if (!runners_up_hit) {
        EXPECT_EQ(shape.nodes, 0) << "alternatives that are never taken: a chain";
      }
    }
  }
}

// Where a proposer's branches continue (n-gram tries, the oracle), a node below an alternative is worth the
// alternative's value times α, so a cheap verify buys such nodes too: the budget exceeds the chain and the
// alternatives. MTP's and a draft model's alternatives are leaves: the budget is exactly those.
TEST(DraftPolicy, ContinuingBranchesBuyNodesBelowTheirAlternatives) {
  const CostModel cost = linear_cost(0.010, 0.0002);
  DraftPolicy policy(2, 2, true);
  for (int i = 0; i < 200; ++i) {
    settled_round(policy, 10, 4);  // α = 0.8
    policy.record_tree(std::vector<int32_t>{-1, -1}, i % 5 != 0 ? std::vector<int32_t>{1} : std::vector<int32_t>{});
  }
  const auto listed = [](const DraftShape& shape) {
    int total = shape.length;
    for (int n : shape.alternatives) total += n;
    return total;
  };
  const DraftShape leaves = policy.next_shape(cost, ProposerCost{}, 1, 5, 2, false);
  EXPECT_EQ(leaves.length, 2);
  EXPECT_EQ(leaves.alternatives, (std::vector<int>{1, 1}));
  EXPECT_EQ(leaves.nodes, listed(leaves));
  const DraftShape branches = policy.next_shape(cost, ProposerCost{}, 1, 5, 2, true);
  EXPECT_EQ(branches.alternatives, (std::vector<int>{1, 1}));
  EXPECT_EQ(branches.nodes, 5) << "the depth-1 alternative's own child";
  DraftShape cut = branches;
  cut.fit(1, 5);  // a one-token chain: the depth-2 alternative goes
  EXPECT_EQ(cut.alternatives, (std::vector<int>{1}));
  EXPECT_EQ(cut.nodes, 3);
}

// Every verified token costs a whole step: even a draft the target always took would emit k + 1 tokens for at
// least k + 1 steps, so no chain or tree is ever drafted, however right the estimates say drafts are.
TEST(DraftPolicy, ARoundThatCannotPayIsNeverTaken) {
  const CostModel cost = linear_cost(0.004, 0.004);
  DraftPolicy policy(1, 8, true);
  for (int i = 0; i < 40; ++i) {
    settled_round(policy, 8, 8);
    policy.record_tree(std::vector<int32_t>{-1, -1}, std::vector<int32_t>{1});  // alternatives always right
  }
  for (int step = 0; step < 100; ++step) ASSERT_EQ(policy.next_shape(cost, ProposerCost{}, 1, 16, 4).length, 0);
  EXPECT_EQ(policy.decisions().plain_steps, 100);
  EXPECT_EQ(policy.decisions().fallbacks, 0) << "nothing was learnt that could switch speculation back on";
  // Verify rows at 0.6 of a step with a proposer costing 0.45 of a step per token: k = 1 emits at most 2
  // tokens for 1.6 + 0.45 = 2.05 steps, k = 2 at most 3 for 2.2 + 0.9 = 3.1, and so on.
  const CostModel rows = linear_cost(0.010, 0.006);
  ProposerCost proposer;
  for (int k = 1; k <= 8; ++k) proposer.observe(k, 0.0045 * k);
  DraftPolicy fresh(1, 8, true);
  for (int step = 0; step < 100; ++step) ASSERT_EQ(fresh.next_length(rows, proposer, 1), 0) << "step " << step;
}

// Alternatives the target never takes, so the best shape is a chain; the 8th round of 16 tries one more
// alternative anyway where a verify row is cheap enough that an alternative always taken would pay (20 % of
// rounds reach it, for a fiftieth of a step).
TEST(DraftPolicy, ExplorationTriesOneMoreAlternative) {
  const CostModel cost = linear_cost(0.010, 0.0002);
  DraftPolicy policy(1, 4, true);  // every size up to the chain and one alternative measured
  for (int i = 0; i < 7; ++i) {
    settled_round(policy, 8, 4);  // α = 0.8
    policy.record_tree(std::vector<int32_t>{-1, -1}, std::vector<int32_t>{});  // the alternative not taken
  }
  const DraftShape shape = policy.next_shape(cost, ProposerCost{}, 1, 16, 4);
  ASSERT_FALSE(shape.alternatives.empty());
  int total = shape.length;
  for (int n : shape.alternatives) total += n;
  EXPECT_EQ(shape.nodes, total);
  EXPECT_EQ(shape.alternatives[0], 1);
}

// The same text where a verify row costs 0.4 of a step (a small model on two cores): even an alternative the
// target always took would add 0.2 tokens per round for 0.4 step, so no round drafts one, the exploring
// round included. The hand sum for the round it would explore: the best chain's tokens per cost against the
// chain plus an alternative worth 1 - α.
TEST(DraftPolicy, ExplorationSkipsAlternativesThatCouldNotPay) {
  const CostModel cost = linear_cost(0.010, 0.004);
  DraftPolicy policy(1, 8, true);
  for (int round = 0; round < 48; ++round) {
    const DraftShape shape = policy.next_shape(cost, ProposerCost{}, 1, 16, 4);
    SCOPED_TRACE(testing::Message() << "round " << round);
    ASSERT_GE(shape.length, 1);
    EXPECT_TRUE(shape.alternatives.empty());
    EXPECT_EQ(shape.nodes, 0);
    const double alpha = policy.acceptance();
    if (round % 16 == 7 && round >= 16) {
      const int k = shape.length;
      const double chain_tokens = (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
      EXPECT_LT((chain_tokens + 1.0 - alpha) / cost.relative_cost(1, k + 2), chain_tokens / cost.relative_cost(1, k + 1));
    }
    settled_round(policy, shape.length, std::min(shape.length, 4));
    policy.record_tree(std::vector<int32_t>{-1, -1}, std::vector<int32_t>{});
  }
}

TEST(DraftPolicy, FixedTreesTakeTheWholeBudget) {
  DraftPolicy fixed(1, 8, false);
  const DraftShape shape = fixed.next_shape(linear_cost(0.004, 0.004), ProposerCost{}, 1, 12, 4);
  EXPECT_EQ(shape.length, 8);
  EXPECT_EQ(shape.nodes, 12);
  EXPECT_TRUE(shape.alternatives.empty()) << "the proposer shapes it";
  EXPECT_EQ(fixed.next_shape(linear_cost(0.004, 0.004), ProposerCost{}, 1, 0, 4).nodes, 0);
}

TEST(DraftShape, FitCutsTheDeepestAlternativesFirst) {
  DraftShape shape{4, 9, {2, 2, 1}};
  shape.fit(4, 7);
  EXPECT_EQ(shape.alternatives, (std::vector<int>{2, 1}));
  EXPECT_EQ(shape.nodes, 7);
  shape.fit(1, 7);  // one token of room: the first depth's alternatives stay
  EXPECT_EQ(shape.length, 1);
  EXPECT_EQ(shape.alternatives, (std::vector<int>{2}));
  EXPECT_EQ(shape.nodes, 3);
  shape.fit(1, 1);
  EXPECT_EQ(shape.nodes, 0) << "no room for alternatives: a chain";
  EXPECT_TRUE(shape.alternatives.empty());
  DraftShape proposers{8, 12, {}};
  proposers.fit(3, 10);
  EXPECT_EQ(proposers.length, 3);
  EXPECT_EQ(proposers.nodes, 10);
}

TEST(LossBudget, SettledRoundsAndTheAllowance) {
  LossBudget budget;
  EXPECT_TRUE(budget.allows(0.8));  // before any token: the allowance alone
  EXPECT_FALSE(budget.allows(0.81));
  budget.settle(1, 1.4);  // one token for 1.4 steps: 0.4 lost
  EXPECT_NEAR(budget.balance(), -0.4, 1e-12);
  EXPECT_TRUE(budget.allows(-0.4 + 0.8 + 0.008 - 1e-9));
  EXPECT_FALSE(budget.allows(-0.4 + 0.8 + 0.008 + 1e-9));
  for (int i = 0; i < 20; ++i) budget.add_plain_token();
  EXPECT_EQ(budget.tokens(), 21);
  EXPECT_TRUE(budget.allows(-0.4 + 0.8 + 0.008 * 21 - 1e-9));
  EXPECT_FALSE(budget.allows(-0.4 + 0.8 + 0.008 * 21 + 1e-9));
  budget.settle(4, 1.5);  // four tokens for 1.5 steps: 2.5 gained
  EXPECT_NEAR(budget.balance(), 2.1, 1e-12);
  EXPECT_TRUE(budget.allows(2.1 + 0.8 + 0.008 * 25 - 1e-9));
}

// A verify row costs 0.4 of a step and the target rejects every draft. By hand: the first decision drafts one
// token (drafts grow with the evidence, and k = 1 beats plain decoding at the prior's acceptance 1/2:
// (1 + 1/2) / 1.4 = 1.07) and loses 0.4 step. After r such rounds the account holds 0.8 - 0.4 r + 0.008 t,
// and the next round needs 0.4 of it: it comes at once after the first, then at t = 50, 100, 150, so a 48-token
// generation drafts twice. Speculation switches off once 16 draft tokens were verified (each later probe that
// fails switches it off again), and the loss never exceeds the allowance plus 0.8 % of the tokens decoded.
TEST(DraftPolicy, WrongDraftsStopWithinABoundedNumberOfRounds) {
  const CostModel cost = linear_cost(0.010, 0.004);
  DraftPolicy policy(1, 8, true);
  std::vector<int64_t> round_at;  // tokens decoded before each round
  int64_t tokens = 0;
  double lost = 0.0;
  while (tokens < 2048) {
    const int k = policy.next_length(cost, ProposerCost{}, 1);
    if (k > 0) {
      ASSERT_EQ(k, 1);
      round_at.push_back(tokens);
      policy.record(k, 0);
      policy.settle(1, cost.relative_cost(1, k + 1));
      lost += cost.relative_cost(1, k + 1) - 1.0;
    }
    ++tokens;
    ASSERT_LE(lost, LossBudget::kAllowance + LossBudget::kLossShare * static_cast<double>(tokens) + 1e-9)
        << "at token " << tokens;
  }
  ASSERT_GE(round_at.size(), 17u);
  EXPECT_EQ(round_at[0], 0);
  EXPECT_EQ(round_at[1], 1);
  EXPECT_EQ(round_at[2], 50);
  EXPECT_EQ(round_at[3], 100);
  EXPECT_EQ(round_at[4], 150);
  for (size_t r = 1; r < 16; ++r) EXPECT_LE(round_at[r] - round_at[r - 1], 50) << "round " << r;
  EXPECT_GE(round_at[16] - round_at[15], 32) << "switched off after 16 rounds: the next is a probe";
  const int64_t probes = static_cast<int64_t>(round_at.size()) - 16;
  EXPECT_EQ(policy.decisions().fallbacks, 1 + probes) << "each failed probe switches speculation off again";
  EXPECT_LE(probes, 6) << "probes 32, 64 .. 512 steps apart, or later where the budget waits";
}

struct Generation {
  double steps = 0.0;  // time in plain steps
  int64_t tokens = 0;
  int64_t rounds = 0;
};

// One slot generating n_tokens with drafts each right with probability `acceptance` (independently), on the
// given costs; a round costs its forward and proposer call as measured, and emits its accepted drafts and one
// token of the target's.
Generation simulate(double acceptance, int64_t n_tokens, const CostModel& cost, const ProposerCost& proposer,
                    uint32_t seed) {
  DraftPolicy policy(1, 4, true);
  std::mt19937 rng(seed);
  std::bernoulli_distribution right(acceptance);
  Generation generation;
  while (generation.tokens < n_tokens) {
    const int k = policy.next_length(cost, proposer, 1);
    if (k == 0) {
      generation.steps += 1.0;
      ++generation.tokens;
      continue;
    }
    int accepted = 0;
    while (accepted < k && right(rng)) ++accepted;
    const double round_steps = cost.relative_cost(1, k + 1) + proposer.seconds(k) / cost.seconds(1, 1);
    policy.record(k, accepted);
    policy.settle(accepted + 1, round_steps);
    generation.steps += round_steps;
    generation.tokens += accepted + 1;
    ++generation.rounds;
  }
  return generation;
}

// The costs of the 2-core machines here (verify rows 0.3-0.45 of a step; an n-gram lookup is free, MTP's block
// costs a fifth of a step per token, a draft model 0.3-0.4): at every acceptance the generation is at most
// 3 % slower than plain decoding, at 48 tokens and at 512; where drafts are mostly right it is faster.
TEST(DraftPolicy, NeverMoreThanThreePercentSlowerThanPlainDecoding) {
  for (const double row : {0.3, 0.45}) {
    for (const double proposer_per_token : {0.0, 0.2, 0.4}) {
      const CostModel cost = linear_cost(0.010, 0.010 * row);
      ProposerCost proposer;
      for (int k = 1; k <= 4; ++k) proposer.observe(k, 0.010 * proposer_per_token * k);
      for (const double acceptance : {0.0, 0.1, 0.3, 0.7, 0.9, 1.0}) {
        for (const int64_t n_tokens : {48, 512}) {
          for (uint32_t seed = 1; seed <= 20; ++seed) {
            const Generation g = simulate(acceptance, n_tokens, cost, proposer, seed);
            SCOPED_TRACE(testing::Message() << "verify row " << row << ", proposer " << proposer_per_token
                                            << ", acceptance " << acceptance << ", " << n_tokens << " tokens, seed "
                                            << seed);
            // Speed against plain decoding, which spends one step per token.
            const double speed = static_cast<double>(g.tokens) / g.steps;
            ASSERT_GE(speed, 0.97) << g.rounds << " rounds";
            if (acceptance >= 0.9 && proposer_per_token == 0.0 && n_tokens == 512) {
              ASSERT_GT(speed, 1.1);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rwd::spec
