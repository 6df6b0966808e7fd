// Trees from proposers that draft with a model. chain_with_runners_up keeps the chain whole and first and hangs
// the proposer's next most likely tokens at each depth (its runners-up) beside the chain's token there as
// leaves: a proposer that drafts a chain one forward per token (a draft model) has every depth's logits anyway,
// so such a tree costs it no more forwards than the chain. TreeGrowth grows a tree best first by the model's
// confidence, continuing below alternatives, for a proposer whose forwards are cheap enough to run on branches
// (the MTP block); the verify forward pays for the extra tokens either way.
#pragma once

#include <cstdint>
#include <queue>
#include <span>
#include <vector>

#include "spec/verify.h"

namespace rwd::spec {

// The ids of the n largest logits other than `skip`, largest first, ties to the lower id; NaN and -inf never
// count. For a row whose argmax is `skip`, these are its runners-up.
std::vector<int32_t> runners_up(std::span<const float> logits, int32_t skip, int n);

// chain with runners_up[d] (the alternatives at depth d + 1, most likely first) added as leaves, depth d taking
// at most wanted[d] of them, or, with wanted empty, the shallowest depths first (a depth is reached only when
// every chain token before it was right, so its alternatives matter less), while the budget of max_nodes tokens
// lasts; depth-first order.
std::vector<DraftToken> chain_with_runners_up(std::span<const DraftToken> chain,
                                              const std::vector<std::vector<int32_t>>& runners_up, int max_nodes,
                                              std::span<const int> wanted = {});

// A tree grown from the drafter's greedy chain, then best first by its confidence (EAGLE-2's rule): the chain
// to max_depth comes first and whole (a drafter may underrate its own chain), then the tree takes the
// highest-scoring nodes among the top-k children of nodes in it, a node's score being the sum of the drafter's
// log-probabilities along its path (it only falls as the path grows, so the best nodes always include their
// ancestors), up to max_nodes in all. The drafter runs a forward on a node to see its children, so growth asks
// for one node at a time, and only when one of its children could still make the tree: the node's expansion
// waits in the queue at the node's own score, which bounds its children's.
//
// With `wanted` (the policy's alternatives per depth) depth d + 1 takes at most wanted[d] of the chain node's
// other children (most likely first), and the rest of the budget goes best first to nodes below them.
class TreeGrowth {
 public:
  TreeGrowth(int max_depth, int max_nodes, int topk, std::span<const int> wanted = {});

  // The logits of a node's row (-1: the row before the tree, whose children are at depth 1), once each.
  void expand(int32_t node, std::span<const float> logits);
  // The next node whose children are wanted, or -1 once the tree is complete. Call after the root's expand.
  int32_t next_expansion();

  int64_t size() const { return static_cast<int64_t>(nodes_.size()); }
  int32_t token(int32_t node) const { return nodes_[node].token; }
  int32_t parent(int32_t node) const { return nodes_[node].parent; }
  int depth(int32_t node) const { return nodes_[node].depth; }
  // The tree in depth-first order, each node's children most likely first.
  std::vector<DraftToken> draft() const;

 private:
  struct Node {
    int32_t token;
    int32_t parent;  // -1: a child of the row before the tree
    int depth;
    int rank;        // among its parent's children, 0: most likely
    double score;
    bool on_chain;   // the greedy chain
  };
  struct Entry {
    bool chain_first;  // the chain's nodes and expansions go before everything else
    double score;
    int64_t order;     // ties: earlier first
    bool expansion;    // expand `node`; else add a candidate child of `node`
    int32_t node;
    int32_t token;
    int rank;
    bool operator<(const Entry& other) const;  // priority: the later, the lower
  };
  void push(Entry entry);
  // Of a node's children (-1: the row before the tree): their depth, and whether they hang off the chain.
  int child_depth(int32_t node) const { return node < 0 ? 1 : nodes_[node].depth + 1; }
  bool on_chain_or_root(int32_t node) const { return node < 0 || nodes_[node].on_chain; }

  int max_depth_;
  int max_nodes_;
  int topk_;
  std::vector<int> wanted_;
  std::vector<int> alternatives_taken_;
  std::vector<Node> nodes_;
  std::priority_queue<Entry> queue_;
  int64_t pushed_ = 0;
};

}  // namespace rwd::spec
