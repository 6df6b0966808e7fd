#include "spec/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rwd::spec {
namespace {

// Forget old rounds at this rate, so a slot whose text changes character (prompt echo, then free text)
// re-estimates within ~20 rounds.
constexpr double kDecay = 0.95;
// Speculation must beat plain decoding by this margin to be kept: verify-cost measurements are noisy.
constexpr double kMinGain = 1.03;
// Plain steps before a slot that fell back tries a draft again; each probe that finds speculation still losing
// doubles the wait, up to the cap, because a probe is not free (a draft model first reads every token decoded
// without it, about a tenth of a step each) and a text that did not pay twice seldom starts to.
constexpr int kProbeAfter = 32;
constexpr int kMaxProbeAfter = 512;
// Every this many rounds a slot drafts one token longer than its best length, so that a length whose cost
// was measured once, badly, is measured again instead of being ruled out for good.
constexpr int64_t kExploreEvery = 16;
// The same for trees, half a period apart: one more alternative at the first depth than the best shape has, so
// that ranks the estimates rule out are measured again (a text whose alternatives start paying is noticed),
// but only where that alternative would pay if the target always took it: where a verify row costs a large
// part of a step (a small model on a few cores) it never can, and those rounds cost about 3 % of the time on
// the trained hybrid.
constexpr int64_t kExploreTreeAt = kExploreEvery / 2 - 1;
// Before a rank has been seen: q = kRankPrior, worth kRankPriorWeight trials (a runner-up is often the right
// token where the chain's was wrong; optimistic enough that trees are tried and measured, quickly overruled).
// A depth's own estimate leans on all depths' by kDepthShrink trials.
constexpr double kRankPrior = 0.3;
constexpr double kRankPriorWeight = 2.0;
constexpr double kDepthShrink = 4.0;
// Draft tokens a slot must have had verified before the policy may switch speculation off: the prior says
// nothing about this text, and with an expensive proposer (a draft model) it alone would switch speculation off
// at once, on texts where drafts are nearly always right too.
constexpr int64_t kMinEvidence = 16;

// Measured when that size was seen; else interpolated between measured sizes; past the largest measured,
// extended by half its per-unit time per extra unit (optimistic, so the policy tries the size and measures it);
// below the smallest, scaled down in proportion. 0 until a size was measured. Once some size was timed twice,
// a size timed once counts as not measured: a first call carries one-time work (MTP's first two-token draft
// took 0.9 of a target step against 0.3 later), and a size the policy rules out on it would never be timed
// again.
template <size_t N>
double interpolated(const std::array<RecentSeconds, N>& seconds, int length) {
  length = std::clamp(length, 1, static_cast<int>(N) - 1);
  const bool any_twice =
      std::any_of(seconds.begin(), seconds.end(), [](const RecentSeconds& s) { return s.count() >= 2; });
  const int64_t min_count = any_twice ? 2 : 1;
  const auto measured = [&](int k) { return seconds[k].count() >= min_count; };
  if (measured(length)) return seconds[length].median();
  int below = 0;
  int above = 0;
  for (int k = length - 1; k >= 1 && below == 0; --k) below = measured(k) ? k : 0;
  for (int k = length + 1; k < static_cast<int>(N) && above == 0; ++k) above = measured(k) ? k : 0;
  if (below > 0 && above > 0) {
    const double f = static_cast<double>(length - below) / static_cast<double>(above - below);
    return (1.0 - f) * seconds[below].median() + f * seconds[above].median();
  }
  if (below > 0) return seconds[below].median() * (1.0 + 0.5 * static_cast<double>(length - below) / below);
  if (above > 0) return seconds[above].median() * static_cast<double>(length) / static_cast<double>(above);
  return 0.0;
}

}  // namespace

void RecentSeconds::add(double seconds) {
  ++count_;
  if (count_ == 2) {  // replaces the first
    window_[0] = seconds;
  } else {
    window_[static_cast<size_t>(next_)] = seconds;
    next_ = (next_ + 1) % kWindow;
    n_kept_ = std::min(n_kept_ + 1, kWindow);
  }
  std::array<double, kWindow> sorted = window_;
  // Slots not filled yet sort last.
  std::fill(sorted.begin() + n_kept_, sorted.end(), std::numeric_limits<double>::infinity());
  std::sort(sorted.begin(), sorted.end());
  const int middle = n_kept_ / 2;
  median_ = n_kept_ % 2 == 1 ? sorted[static_cast<size_t>(middle)]
                             : 0.5 * (sorted[static_cast<size_t>(middle - 1)] + sorted[static_cast<size_t>(middle)]);
}

void CostModel::observe(int64_t n_slots, int64_t n_tokens, double seconds) {
  if (n_slots < 1 || n_tokens < n_slots || n_tokens > kMaxTokens || !(seconds > 0.0)) return;
  if (static_cast<int64_t>(by_slots_.size()) <= n_slots) by_slots_.resize(static_cast<size_t>(n_slots) + 1);
  by_slots_[static_cast<size_t>(n_slots)][static_cast<size_t>(n_tokens)].add(seconds);
}

const CostModel::BySize* CostModel::row(int64_t n_slots) const {
  return n_slots >= 1 && n_slots < static_cast<int64_t>(by_slots_.size()) ? &by_slots_[static_cast<size_t>(n_slots)]
                                                                          : nullptr;
}

double CostModel::relative_cost(int64_t n_slots, int64_t n_tokens) const {
  n_slots = std::clamp<int64_t>(n_slots, 1, kMaxTokens);
  n_tokens = std::clamp<int64_t>(n_tokens, n_slots, kMaxTokens);
  const double optimistic_slope = 0.1 / static_cast<double>(n_slots);
  const BySize* seconds = row(n_slots);
  const auto measured = [&](int64_t n) { return seconds != nullptr && (*seconds)[n].count() > 0; };
  if (!measured(n_slots)) return 1.0 + optimistic_slope * static_cast<double>(n_tokens - n_slots);
  const double base = (*seconds)[n_slots].median();
  if (measured(n_tokens)) return (*seconds)[n_tokens].median() / base;
  // Between two measured sizes: interpolate. Past the largest: extend it optimistically, so the policy tries
  // the size once and measures it (t(n) is flat while memory-bound and steep once compute-bound; no fit of
  // a few points predicts where the bend is).
  int64_t below = 0;
  int64_t above = 0;
  for (int64_t n = n_tokens - 1; n >= n_slots && below == 0; --n) below = measured(n) ? n : 0;
  for (int64_t n = n_tokens + 1; n <= kMaxTokens && above == 0; ++n) above = measured(n) ? n : 0;
  if (below > 0 && above > 0) {
    const double f = static_cast<double>(n_tokens - below) / static_cast<double>(above - below);
    return ((1.0 - f) * (*seconds)[below].median() + f * (*seconds)[above].median()) / base;
  }
  if (below > 0) return (*seconds)[below].median() / base + optimistic_slope * static_cast<double>(n_tokens - below);
  return std::max(1.0, (*seconds)[above].median() / base);
}

double CostModel::seconds(int64_t n_slots, int64_t n_tokens) const {
  const BySize* seconds = row(n_slots);
  if (seconds == nullptr || n_tokens < 1 || n_tokens > kMaxTokens) return 0.0;
  return (*seconds)[n_tokens].median();
}

double CostModel::token_value(int64_t n_slots) const {
  const double one = seconds(1, 1);
  const double all = seconds(n_slots, n_slots);
  if (n_slots <= 1 || one <= 0.0 || all <= 0.0) return 1.0;
  const double marginal = (all - one) / static_cast<double>(n_slots - 1);
  return std::clamp(marginal / (all / static_cast<double>(n_slots)), 0.25, 1.0);
}

int64_t CostModel::timings(int64_t n_slots, int64_t n_tokens) const {
  const BySize* seconds = row(n_slots);
  if (seconds == nullptr || n_tokens < 1 || n_tokens > kMaxTokens) return 0;
  return (*seconds)[n_tokens].count();
}

void ProposerCost::observe(int length, double seconds) {
  if (length < 1 || length > kMaxLength || !(seconds > 0.0)) return;
  seconds_[length].add(seconds);
}

void ProposerCost::observe_catch_up(int64_t rows, double seconds) {
  if (rows < 1 || !(seconds > 0.0)) return;
  if (rows <= kMaxLength) {
    catch_up_[rows].add(seconds);
  } else {
    catch_up_[kMaxLength].add(seconds * kMaxLength / static_cast<double>(rows));
  }
}

void LossBudget::settle(int emitted, double cost_steps, double token_value) {
  balance_ += 1.0 + token_value * static_cast<double>(emitted - 1) - cost_steps;
  tokens_ += emitted;
}

bool LossBudget::allows(double worst_loss) const {
  return balance_ + kAllowance + kLossShare * static_cast<double>(tokens_) >= worst_loss;
}

double ProposerCost::seconds(int length) const { return interpolated(seconds_, length); }

double ProposerCost::catch_up_seconds(int64_t rows) const {
  if (rows <= kMaxLength) return interpolated(catch_up_, static_cast<int>(std::max<int64_t>(rows, 1)));
  return interpolated(catch_up_, kMaxLength) * static_cast<double>(rows) / kMaxLength;
}

void RankAcceptance::observe(int depth, int rank, bool taken) {
  if (rank < 2) return;
  depth = std::clamp(depth, 1, kDepths);
  rank = std::min(rank, kMaxRank);
  for (int d : {0, depth}) {
    tried_[d][rank] += 1.0;
    taken_[d][rank] += taken ? 1.0 : 0.0;
  }
  ++trials_;
}

void RankAcceptance::decay(double factor) {
  for (auto* table : {&taken_, &tried_}) {
    for (auto& row : *table) {
      for (double& value : row) value *= factor;
    }
  }
}

double RankAcceptance::estimate(int depth, int rank) const {
  depth = std::clamp(depth, 1, kDepths);
  rank = std::clamp(rank, 2, kMaxRank);
  const double pooled = (taken_[0][rank] + kRankPrior * kRankPriorWeight) / (tried_[0][rank] + kRankPriorWeight);
  return (taken_[depth][rank] + kDepthShrink * pooled) / (tried_[depth][rank] + kDepthShrink);
}

void DraftShape::fit(int max_length, int max_nodes) {
  const int cut_length = std::max(length - std::max(max_length, 0), 0);
  length -= cut_length;
  if (nodes == 0) {
    alternatives.clear();
    return;
  }
  if (alternatives.empty()) {  // the proposer shapes the tree within the budget
    nodes = std::min(std::max(nodes, length), max_nodes);
    return;
  }
  // Nodes past the listed alternatives are continuations below them: they keep their share of the budget.
  int dropped = cut_length;
  for (size_t d = static_cast<size_t>(length); d < alternatives.size(); ++d) dropped += alternatives[d];
  if (alternatives.size() > static_cast<size_t>(length)) alternatives.resize(static_cast<size_t>(length));
  nodes = std::min(nodes - dropped, max_nodes);
  int listed = length;
  for (int n : alternatives) listed += n;
  for (size_t d = alternatives.size(); d-- > 0 && listed > nodes;) {
    const int cut = std::min(alternatives[d], listed - nodes);
    alternatives[d] -= cut;
    listed -= cut;
  }
  while (!alternatives.empty() && alternatives.back() == 0) alternatives.pop_back();
  nodes = alternatives.empty() ? 0 : std::max(nodes, listed);
}

DraftPolicy::DraftPolicy(int draft_min, int draft_max, bool adaptive)
    : draft_min_(draft_min),
      draft_max_(draft_max),
      adaptive_(adaptive),
      // A prior worth two evaluations at 1/2: optimistic enough to try drafting, quickly overruled.
      accepted_weight_(1.0),
      evaluated_weight_(2.0),
      probe_after_(kProbeAfter) {
  decisions_.rounds_by_length.assign(static_cast<size_t>(draft_max + 1), 0);
}

double DraftPolicy::acceptance() const { return accepted_weight_ / evaluated_weight_; }

int DraftPolicy::next_length(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots,
                             int64_t drafting_slots) {
  return next_shape(cost, proposer, batch_slots, 0, 1, false, drafting_slots).length;
}

double DraftPolicy::round_steps(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots,
                                int64_t drafting_slots, int n_tokens) const {
  // The engine measures a proposer call by the size of the draft it made, nodes for a tree (MTP runs its block
  // on the nodes it grows), so a shape's call is priced by its size too. What the round adds to a plain step of
  // all the slots, and the call, are shared by the slots drafting: per slot, in its plain steps.
  const double step_seconds = cost.seconds(batch_slots, batch_slots);
  const int64_t sharing = drafting_slots > 0 ? std::min(drafting_slots, batch_slots) : batch_slots;
  const double share = static_cast<double>(batch_slots) / static_cast<double>(sharing);
  const double proposer_cost = step_seconds > 0.0 ? proposer.seconds(n_tokens - 1) / step_seconds : 0.0;
  const double added = cost.relative_cost(batch_slots, batch_slots + sharing * (n_tokens - 1)) - 1.0;
  return 1.0 + (added + proposer_cost) * share;
}

double DraftPolicy::worst_loss(const DraftShape& shape, const CostModel& cost, const ProposerCost& proposer,
                               int64_t batch_slots, int64_t drafting_slots) const {
  // The proposer's catch-up on a round's kept tokens is measured with its call (ProposerCost::seconds); one
  // on a run of plain steps is what a round that resumes speculating pays on top.
  const double step_share = cost.seconds(batch_slots, batch_slots) / static_cast<double>(batch_slots);
  const int64_t owed = std::min(owed_rows_, proposer.max_catch_up_rows());
  // Until a catch-up that long was timed, priced as one proposer call of one token per row owed: a batched
  // catch-up costs less per row, but a first resume priced at nothing let a draft model read 500 tokens per
  // slot for a single round (four slots on open questions: 0.94x plain over 512 tokens).
  double resume_seconds = 0.0;
  if (owed > steady_owed_rows(draft_max_)) {
    resume_seconds = proposer.catch_up_seconds(owed);
    if (resume_seconds <= 0.0) resume_seconds = proposer.seconds(1) * static_cast<double>(owed);
  }
  const double resume_cost = step_share > 0.0 ? resume_seconds / step_share : 0.0;
  const int n_drafted = shape.nodes > 0 ? shape.nodes : shape.length;
  return round_steps(cost, proposer, batch_slots, drafting_slots, n_drafted + 1) + resume_cost - 1.0;
}

bool DraftPolicy::bears(const DraftShape& shape, const CostModel& cost, const ProposerCost& proposer,
                        int64_t batch_slots, int64_t drafting_slots) const {
  return !adaptive_ || budget_.allows(worst_loss(shape, cost, proposer, batch_slots, drafting_slots));
}

void DraftPolicy::decline() {
  ++decisions_.budget_plain;
  if (probing_) {  // the probe waits for the next step
    probing_ = false;
    off_ = true;
    plain_since_off_ = probe_after_;
  }
  decode_plainly();
}

DraftShape DraftPolicy::decode_plainly() {
  ++decisions_.plain_steps;
  on_plain_step();
  return {};
}

void DraftPolicy::on_plain_step() {
  ++owed_rows_;
  budget_.add_plain_token();
}

DraftShape DraftPolicy::next_shape(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots,
                                   int max_nodes, int topk, bool branches_continue, int64_t drafting_slots) {
  const bool trees = max_nodes > 0 && topk > 1;
  if (!adaptive_) return {draft_max_, trees ? std::max(max_nodes, draft_max_) : 0, {}};
  const auto round_cost = [&](int n_tokens) {
    return round_steps(cost, proposer, batch_slots, drafting_slots, n_tokens);
  };
  const auto worst_loss = [&](const DraftShape& shape) {
    return this->worst_loss(shape, cost, proposer, batch_slots, drafting_slots);
  };
  if (off_) {
    if (++plain_since_off_ < probe_after_) return decode_plainly();
    // A probe: one short round, whatever the estimate says, so a text that became predictable is noticed; it
    // waits for the first step the loss budget can bear it.
    const DraftShape probe{draft_min_, 0, {}};
    if (!budget_.allows(worst_loss(probe))) {
      ++decisions_.budget_plain;
      return decode_plainly();
    }
    off_ = false;
    probing_ = true;
    plain_since_off_ = 0;
    return probe;
  }
  const double alpha = std::min(acceptance(), 0.999);
  // Tokens past a round's first are worth less where other slots share the step (CostModel::token_value).
  const double value = cost.token_value(batch_slots);
  const auto worth = [&](double tokens) { return 1.0 + value * (tokens - 1.0); };
  // A shape of depth k can emit at most k + 1 tokens: one that would not beat plain decoding even then is
  // never drafted, whatever the acceptance estimate.
  const auto could_pay = [&](int k, int n_tokens) { return worth(k + 1.0) / round_cost(n_tokens) > 1.0; };
  DraftShape best;
  double best_gain = 0.0;
  double best_tokens = 0.0;
  // Where the best shape's next alternative at the first depth would be reached: the chain's first token wrong
  // and the alternatives already there too.
  double best_first_reach = 0.0;
  // A slot's first rounds risk most: the acceptance estimate is the prior's, and a round lost early leaves
  // the loss budget little to try again with. So drafts grow with the evidence, one token longer per draft
  // token verified.
  const int longest = static_cast<int>(std::min<int64_t>(draft_max_, draft_min_ + evaluated_total_));
  for (int k = draft_min_; k <= longest; ++k) {
    double expected_tokens = (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
    double gain = worth(expected_tokens) / round_cost(k + 1);
    if (gain > best_gain && could_pay(k, k + 1)) {
      best_gain = gain;
      best_tokens = expected_tokens;
      best_first_reach = 1.0 - alpha;
      best = {k, 0, {}};
    }
    if (!trees) continue;
    // Nodes one at a time, each where it adds most: the next rank at depth d is reached when the path got to
    // depth d, the chain's token there was wrong and the ranks before it were too; where branches continue, the
    // next node of a branch when the branch's last node was right and its continuation is (α).
    std::vector<int> alternatives(static_cast<size_t>(k), 0);
    std::vector<double> reach(static_cast<size_t>(k));
    for (int d = 0; d < k; ++d) reach[d] = std::pow(alpha, d) * (1.0 - alpha);
    struct Branch {
      int next_depth;  // 0-based depth of the branch's next node
      double value;    // what that node adds
    };
    std::vector<Branch> branches;
    for (int extra = 1; k + extra <= max_nodes; ++extra) {
      int best_depth = -1;
      int best_branch = -1;
      double best_value = 0.0;
      double best_q = 0.0;
      for (int d = 0; d < k; ++d) {
        if (alternatives[d] >= topk - 1) continue;
        const double q = ranks_.estimate(d + 1, alternatives[d] + 2);
        if (reach[d] * q > best_value) {
          best_value = reach[d] * q;
          best_q = q;
          best_depth = d;
        }
      }
      for (size_t b = 0; b < branches.size(); ++b) {
        if (branches[b].value > best_value) {
          best_value = branches[b].value;
          best_branch = static_cast<int>(b);
        }
      }
      if (best_branch >= 0) {
        Branch& branch = branches[static_cast<size_t>(best_branch)];
        if (++branch.next_depth < k) {
          branch.value *= alpha;
        } else {
          branches.erase(branches.begin() + best_branch);
        }
      } else if (best_depth >= 0) {
        reach[best_depth] *= 1.0 - best_q;
        ++alternatives[best_depth];
        if (branches_continue && best_depth + 1 < k) branches.push_back({best_depth + 1, best_value * alpha});
      } else {
        break;
      }
      expected_tokens += best_value;
      gain = worth(expected_tokens) / round_cost(k + 1 + extra);
      if (gain > best_gain && could_pay(k, k + 1 + extra)) {
        best_gain = gain;
        best_tokens = expected_tokens;
        best_first_reach = reach[0];
        best = {k, k + extra, alternatives};
      }
    }
  }
  const bool probe_failed = probing_;
  probing_ = false;
  if (best.length == 0) return decode_plainly();  // no shape could pay: nothing to learn by drafting
  if (best_gain < kMinGain && evaluated_total_ >= kMinEvidence) {
    probe_after_ = probe_failed ? std::min(2 * probe_after_, kMaxProbeAfter) : kProbeAfter;
    off_ = true;
    plain_since_off_ = 0;
    ++decisions_.fallbacks;
    return decode_plainly();
  }
  DraftShape explored = best;
  const int64_t phase = decisions_.rounds % kExploreEvery;
  if (phase == kExploreEvery - 1 && explored.length < longest &&
      could_pay(explored.length + 1, (explored.nodes > 0 ? explored.nodes : explored.length) + 2)) {
    ++explored.length;
    if (explored.nodes > 0) ++explored.nodes;
  }
  const int total_nodes = explored.nodes > 0 ? explored.nodes : explored.length;
  const double explored_tokens = best_tokens + best_first_reach;
  const bool alternative_could_pay = worth(explored_tokens) / round_cost(total_nodes + 2) > best_gain;
  if (phase == kExploreTreeAt && trees && explored.length > 0 && total_nodes < max_nodes && alternative_could_pay) {
    explored.alternatives.resize(static_cast<size_t>(explored.length), 0);
    if (explored.alternatives[0] < topk - 1) {
      ++explored.alternatives[0];
      explored.nodes = total_nodes + 1;
    }
  }
  while (!explored.alternatives.empty() && explored.alternatives.back() == 0) explored.alternatives.pop_back();
  if (explored.alternatives.empty()) explored.nodes = 0;
  // The exploring shape when the budget bears it, else the best one, else the longest shorter chain it bears
  // that the estimates rate as well as the best or as paying, else a plain step.
  for (const DraftShape* shape : {&explored, &best}) {
    if (budget_.allows(worst_loss(*shape))) return *shape;
  }
  for (int k = best.length - 1; k >= draft_min_; --k) {
    const DraftShape chain{k, 0, {}};
    const double gain = worth((1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha)) / round_cost(k + 1);
    if (could_pay(k, k + 1) && gain >= std::min(best_gain, kMinGain) && budget_.allows(worst_loss(chain))) {
      return chain;
    }
  }
  ++decisions_.budget_plain;
  return decode_plainly();
}

void DraftPolicy::record(int drafted, int accepted) {
  if (drafted <= 0) return;
  ++decisions_.rounds;
  if (drafted < static_cast<int>(decisions_.rounds_by_length.size())) ++decisions_.rounds_by_length[drafted];
  const int evaluated = accepted + (accepted < drafted ? 1 : 0);
  evaluated_total_ += evaluated;
  accepted_weight_ = kDecay * accepted_weight_ + accepted;
  evaluated_weight_ = kDecay * evaluated_weight_ + evaluated;
}

void DraftPolicy::settle(int emitted, double cost_steps, double token_value) {
  budget_.settle(emitted, cost_steps, token_value);
  owed_rows_ = emitted;
}

void DraftPolicy::record_tree(std::span<const int32_t> parents, std::span<const int32_t> path) {
  ranks_.decay(kDecay);
  int32_t parent = -1;
  for (size_t step = 0;; ++step) {
    const int32_t taken = step < path.size() ? path[step] : -1;
    int rank = 0;
    for (size_t i = 0; i < parents.size(); ++i) {
      if (parents[i] != parent) continue;
      ++rank;
      const bool hit = static_cast<int32_t>(i) == taken;
      ranks_.observe(static_cast<int>(step) + 1, rank, hit);
      if (hit) break;
    }
    if (taken < 0) return;
    parent = taken;
  }
}

}  // namespace rwd::spec
