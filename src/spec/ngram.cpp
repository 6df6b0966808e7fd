#include "spec/ngram.h"

#include <algorithm>
#include <utility>

namespace rwd::spec {

std::vector<int32_t> NgramProposer::lookup(std::span<const int32_t> tokens, int ngram_min, int ngram_max,
                                           int max_draft) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const auto tail = tokens.subspan(static_cast<size_t>(len - n));
    // Latest match first: recent context predicts the continuation best. A match must leave at least one
    // token after it.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n;
      const int64_t count = std::min<int64_t>(max_draft, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

std::vector<DraftToken> NgramProposer::lookup_tree(std::span<const int32_t> tokens, int ngram_min, int ngram_max,
                                                   int max_draft, int max_nodes, int max_topk) {
  struct Node {
    int32_t token;
    std::vector<int32_t> children;
  };
  std::vector<Node> trie(1, Node{-1, {}});  // node 0: the slot's newest token
  const int64_t len = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> starts;  // where continuations begin, in insertion order
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const auto tail = tokens.subspan(static_cast<size_t>(len - n));
    for (int64_t i = len - n - 1; i >= 0 && static_cast<int64_t>(trie.size()) <= max_nodes; --i) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n;
      if (std::find(starts.begin(), starts.end(), from) != starts.end()) continue;
      starts.push_back(from);
      int32_t at = 0;
      for (int64_t d = 0; d < max_draft && from + d < len; ++d) {
        const int32_t token = tokens[from + d];
        int32_t next = -1;
        for (int32_t child : trie[at].children) {
          if (trie[child].token == token) next = child;
        }
        if (next < 0) {
          if (static_cast<int64_t>(trie.size()) > max_nodes ||
              static_cast<int>(trie[at].children.size()) >= max_topk) {
            break;
          }
          next = static_cast<int32_t>(trie.size());
          trie[at].children.push_back(next);
          trie.push_back(Node{token, {}});
        }
        at = next;
      }
    }
  }
  // Depth first, children in insertion order: the first continuation is the first path.
  std::vector<DraftToken> draft;
  std::vector<std::pair<int32_t, int32_t>> stack;  // (trie node, its parent's draft index)
  for (auto it = trie[0].children.rbegin(); it != trie[0].children.rend(); ++it) stack.push_back({*it, -1});
  while (!stack.empty()) {
    const auto [node, parent] = stack.back();
    stack.pop_back();
    const auto index = static_cast<int32_t>(draft.size());
    draft.push_back({trie[node].token, {}, parent});
    for (auto it = trie[node].children.rbegin(); it != trie[node].children.rend(); ++it) stack.push_back({*it, index});
  }
  return draft;
}

Status NgramProposer::propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposeRequest& request = requests[r];
    if (request.max_nodes > 0) {
      drafts[r] = lookup_tree(request.tokens, ngram_min_, ngram_max_, request.max_draft, request.max_nodes,
                              request.tree_topk);
      continue;
    }
    for (int32_t id : lookup(request.tokens, ngram_min_, ngram_max_, request.max_draft)) {
      drafts[r].push_back({id, {}});
    }
  }
  return Status::ok();
}

}  // namespace rwd::spec
