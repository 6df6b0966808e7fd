#include "spec/draft_tree.h"

#include <algorithm>
#include <cmath>

#include "sampling/logprobs.h"

namespace rwd::spec {

std::vector<int32_t> runners_up(std::span<const float> logits, int32_t skip, int n) {
  // The best n so far, best first: one pass, an insertion per newcomer (n is a handful).
  std::vector<int32_t> best;
  for (size_t i = 0; i < logits.size() && n > 0; ++i) {
    const float value = logits[i];
    if (static_cast<int32_t>(i) == skip || std::isnan(value) || value == -INFINITY) continue;
    if (static_cast<int>(best.size()) == n && !(value > logits[best.back()])) continue;
    auto at = best.end();
    while (at != best.begin() && value > logits[*(at - 1)]) --at;  // equal values keep the lower id first
    best.insert(at, static_cast<int32_t>(i));
    if (static_cast<int>(best.size()) > n) best.pop_back();
  }
  return best;
}

std::vector<DraftToken> chain_with_runners_up(std::span<const DraftToken> chain,
                                              const std::vector<std::vector<int32_t>>& runners_up, int max_nodes,
                                              std::span<const int> wanted) {
  const auto depth_count = static_cast<int64_t>(chain.size());
  std::vector<int64_t> kept(static_cast<size_t>(depth_count), 0);
  int64_t budget = max_nodes - depth_count;
  for (int64_t d = 0; d < depth_count && d < static_cast<int64_t>(runners_up.size()) && budget > 0; ++d) {
    int64_t n = static_cast<int64_t>(runners_up[d].size());
    if (!wanted.empty()) n = std::min<int64_t>(n, d < static_cast<int64_t>(wanted.size()) ? wanted[d] : 0);
    kept[d] = std::min<int64_t>(budget, n);
    budget -= kept[d];
  }
  // Depth first: the chain, then the deepest alternatives (children of the chain's next-to-last token) up to the
  // first depth's (children of the newest token).
  std::vector<DraftToken> tree;
  for (int64_t d = 0; d < depth_count; ++d) tree.push_back({chain[d].id, chain[d].probs, static_cast<int32_t>(d) - 1});
  for (int64_t d = depth_count - 1; d >= 0; --d) {
    for (int64_t i = 0; i < kept[d]; ++i) tree.push_back({runners_up[d][i], {}, static_cast<int32_t>(d) - 1});
  }
  return tree;
}

TreeGrowth::TreeGrowth(int max_depth, int max_nodes, int topk, std::span<const int> wanted)
    : max_depth_(max_depth),
      max_nodes_(max_nodes),
      topk_(std::max(topk, 1)),
      wanted_(wanted.begin(), wanted.end()),
      alternatives_taken_(wanted.size(), 0) {}

bool TreeGrowth::Entry::operator<(const Entry& other) const {
  if (chain_first != other.chain_first) return !chain_first;
  if (score != other.score) return score < other.score;
  return order > other.order;
}

void TreeGrowth::push(Entry entry) {
  entry.order = pushed_++;
  queue_.push(entry);
}

void TreeGrowth::expand(int32_t node, std::span<const float> logits) {
  if (child_depth(node) > max_depth_) return;
  const double base = node < 0 ? 0.0 : nodes_[node].score;
  const bool chain_parent = on_chain_or_root(node);
  const std::vector<sampling::TokenLogprob> top = sampling::top_k_logprobs(logits, topk_);
  for (size_t rank = 0; rank < top.size(); ++rank) {
    if (!std::isfinite(top[rank].logprob)) continue;
    push({chain_parent && rank == 0, base + top[rank].logprob, 0, false, node, top[rank].id, static_cast<int>(rank)});
  }
}

int32_t TreeGrowth::next_expansion() {
  while (!queue_.empty() && size() < max_nodes_) {
    const Entry entry = queue_.top();
    queue_.pop();
    if (entry.expansion) return entry.node;
    const int depth = child_depth(entry.node);
    const bool chain_parent = on_chain_or_root(entry.node);
    if (chain_parent && entry.rank > 0 && !wanted_.empty()) {
      const size_t d = static_cast<size_t>(depth - 1);
      if (d >= wanted_.size() || alternatives_taken_[d] >= wanted_[d]) continue;
      ++alternatives_taken_[d];
    }
    const auto added = static_cast<int32_t>(nodes_.size());
    nodes_.push_back({entry.token, entry.node, depth, entry.rank, entry.score, chain_parent && entry.rank == 0});
    if (depth < max_depth_) push({entry.chain_first, entry.score, 0, true, added, 0, 0});
  }
  return -1;
}

std::vector<DraftToken> TreeGrowth::draft() const {
  std::vector<std::vector<int32_t>> children(nodes_.size() + 1);  // [0]: the row before the tree's
  for (size_t i = 0; i < nodes_.size(); ++i) children[static_cast<size_t>(nodes_[i].parent + 1)].push_back(static_cast<int32_t>(i));
  for (auto& list : children) {
    std::sort(list.begin(), list.end(), [&](int32_t a, int32_t b) { return nodes_[a].rank < nodes_[b].rank; });
  }
  std::vector<DraftToken> tree;
  tree.reserve(nodes_.size());
  std::vector<int32_t> index_in_tree(nodes_.size(), -1);
  // Depth first with an explicit stack: children pushed in reverse so the most likely comes out first.
  std::vector<int32_t> stack(children[0].rbegin(), children[0].rend());
  while (!stack.empty()) {
    const int32_t node = stack.back();
    stack.pop_back();
    index_in_tree[node] = static_cast<int32_t>(tree.size());
    const int32_t parent = nodes_[node].parent;
    tree.push_back({nodes_[node].token, {}, parent < 0 ? -1 : index_in_tree[parent]});
    const auto& below = children[static_cast<size_t>(node + 1)];
    stack.insert(stack.end(), below.rbegin(), below.rend());
  }
  return tree;
}

}  // namespace rwd::spec
