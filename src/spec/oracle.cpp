#include "spec/oracle.h"

#include <algorithm>
#include <utility>

namespace rwd::spec {
namespace {

// splitmix64: a well-mixed hash of (seed, position) without carrying generator state between rounds.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double unit(uint64_t hash) { return static_cast<double>(hash >> 11) * 0x1.0p-53; }

}  // namespace

int32_t OracleProposer::candidate(std::span<const int32_t> oracle, int64_t at, int rank, uint64_t salt,
                                  bool* is_truth) const {
  const int32_t truth = oracle[at];
  // The true token's rank: the first of the draws below that is not an error (the chain's test is draw 0).
  const uint64_t first_draw = mix(seed_ ^ mix(static_cast<uint64_t>(at)));
  uint64_t hash = first_draw;
  int truth_rank = 0;
  while (truth_rank < rank && unit(hash) < error_rate_) {
    ++truth_rank;
    hash = mix(hash + 0x632be59bd9b4e019ULL);
  }
  *is_truth = truth_rank == rank && !(unit(hash) < error_rate_);
  if (*is_truth || n_vocab_ <= 1) return truth;
  // A wrong candidate, never the truth: the chain's wrong token at rank 0, others by (rank, salt).
  const uint64_t wrong = rank == 0 ? mix(first_draw) : mix(first_draw ^ mix(salt * 64 + static_cast<uint64_t>(rank)));
  return static_cast<int32_t>((truth + 1 + static_cast<int64_t>(wrong % static_cast<uint64_t>(n_vocab_ - 1))) %
                              n_vocab_);
}

std::vector<DraftToken> OracleProposer::propose_tree(const ProposeRequest& request) const {
  struct Node {
    int32_t token;
    int32_t parent;  // node index, -1: the newest token
    int depth;       // 1: a child of the newest token
    bool on_path;    // every token from the root to it is true
    double confidence;
    std::vector<int32_t> children;
  };
  const int64_t next = static_cast<int64_t>(request.tokens.size()) - request.n_prompt;
  const auto in_oracle = [&](int depth) {
    const int64_t at = next + depth - 1;
    return at >= 0 && at < static_cast<int64_t>(request.oracle.size());
  };
  std::vector<Node> nodes;
  std::vector<int32_t> roots;
  // Candidates not yet taken: (confidence, parent, rank), the best first.
  struct Candidate {
    double confidence;
    int32_t parent;
    int rank;
  };
  std::vector<Candidate> open;
  const auto push_children = [&](int32_t parent) {
    const int depth = parent < 0 ? 1 : nodes[parent].depth + 1;
    if (depth > request.max_draft || !in_oracle(depth)) return;
    const double base = parent < 0 ? 1.0 : nodes[parent].confidence;
    double rank_confidence = 1.0 - error_rate_;
    for (int rank = 0; rank < request.tree_topk; ++rank) {
      open.push_back({base * rank_confidence, parent, rank});
      rank_confidence *= error_rate_;
    }
  };
  push_children(-1);
  while (static_cast<int>(nodes.size()) < request.max_nodes && !open.empty()) {
    // Highest confidence first; ties to the shallower, earlier-ranked candidate.
    const auto best = std::max_element(open.begin(), open.end(), [&](const Candidate& a, const Candidate& b) {
      if (a.confidence != b.confidence) return a.confidence < b.confidence;
      return a.rank > b.rank;
    });
    const Candidate chosen = *best;
    open.erase(best);
    if (!(chosen.confidence > 0.0) && !nodes.empty()) break;
    const bool parent_on_path = chosen.parent < 0 || nodes[chosen.parent].on_path;
    const int depth = chosen.parent < 0 ? 1 : nodes[chosen.parent].depth + 1;
    bool is_truth = false;
    int32_t token = candidate(request.oracle, next + depth - 1, chosen.rank, static_cast<uint64_t>(chosen.parent + 1),
                              &is_truth);
    std::vector<int32_t>& siblings = chosen.parent < 0 ? roots : nodes[chosen.parent].children;
    // Siblings are distinct tokens; a wrong one that repeats another (or the truth) moves on to the next id.
    const int32_t truth = request.oracle[next + depth - 1];
    const auto taken = [&](int32_t id) {
      return (!is_truth && id == truth) ||
             std::any_of(siblings.begin(), siblings.end(), [&](int32_t s) { return nodes[s].token == id; });
    };
    for (int64_t tries = 0; !is_truth && taken(token) && tries < n_vocab_; ++tries) {
      token = static_cast<int32_t>((token + 1) % n_vocab_);
    }
    if (taken(token)) continue;  // a vocabulary smaller than the branches
    const auto index = static_cast<int32_t>(nodes.size());
    nodes.push_back({token, chosen.parent, depth, parent_on_path && is_truth, chosen.confidence, {}});
    (chosen.parent < 0 ? roots : nodes[chosen.parent].children).push_back(index);
    push_children(index);
  }
  // Depth first, children by rank.
  std::vector<DraftToken> draft;
  std::vector<std::pair<int32_t, int32_t>> stack;  // (node, its parent's draft index)
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.push_back({*it, -1});
  while (!stack.empty()) {
    const auto [node, parent] = stack.back();
    stack.pop_back();
    const auto index = static_cast<int32_t>(draft.size());
    draft.push_back({nodes[node].token, {}, parent});
    const std::vector<int32_t>& children = nodes[node].children;
    for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back({*it, index});
  }
  return draft;
}

Status OracleProposer::propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposeRequest& request = requests[r];
    if (request.max_nodes > 0) {
      drafts[r] = propose_tree(request);
      continue;
    }
    const int64_t next = static_cast<int64_t>(request.tokens.size()) - request.n_prompt;  // continuation index
    for (int64_t i = 0; i < request.max_draft; ++i) {
      const int64_t at = next + i;
      if (at < 0 || at >= static_cast<int64_t>(request.oracle.size())) break;
      int32_t id = request.oracle[at];
      const uint64_t hash = mix(seed_ ^ mix(static_cast<uint64_t>(at)));
      if (static_cast<double>(hash >> 11) * 0x1.0p-53 < error_rate_ && n_vocab_ > 1) {
        id = static_cast<int32_t>((id + 1 + static_cast<int64_t>(mix(hash) % static_cast<uint64_t>(n_vocab_ - 1))) %
                                  n_vocab_);
      }
      drafts[r].push_back({id, {}});
    }
  }
  return Status::ok();
}

}  // namespace rwd::spec
