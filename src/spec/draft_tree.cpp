#include "spec/draft_tree.h"

#include <algorithm>
#include <cmath>

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

}  // namespace rwd::spec
