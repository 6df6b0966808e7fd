// links: rewind_spec
// The proposers that branch, against properties checked here: an n-gram tree's every path is a continuation of
// an earlier occurrence of the sequence's suffix, its first path starts with the chain lookup's draft, every such
// continuation (of the longest suffix, most recent first) is in it while the budget allows, and it keeps its
// budget, depth, branching and depth-first order with distinct siblings. The oracle's tree holds the true
// continuation's nodes exactly where its rank model puts them, and its shape follows the confidences; a draft
// model's tree is its chain with the runners-up beside it, and a tree grown best first (MTP) holds the nodes a
// search over every path of the drafter, written here in float64, ranks highest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "sampling/logprobs.h"
#include "spec/draft_tree.h"
#include "spec/ngram.h"
#include "spec/oracle.h"
#include "spec/verify.h"

namespace rwd::spec {
namespace {

// A draft tree's paths from the root, one per node (the tokens of the node and its ancestors).
std::vector<std::vector<int32_t>> paths_of(const std::vector<DraftToken>& tree) {
  std::vector<std::vector<int32_t>> paths;
  for (size_t i = 0; i < tree.size(); ++i) {
    std::vector<int32_t> path;
    for (int32_t n = static_cast<int32_t>(i); n >= 0; n = draft_parent(tree, n)) path.insert(path.begin(), tree[n].id);
    paths.push_back(path);
  }
  return paths;
}

// Depth-first order (each node's parent on the path of the node before it), parents before children, siblings
// distinct, at most `topk` children each.
void expect_well_formed(const std::vector<DraftToken>& tree, int topk) {
  std::vector<int32_t> stack;
  std::map<int32_t, std::set<int32_t>> children;
  for (size_t i = 0; i < tree.size(); ++i) {
    const int32_t parent = draft_parent(tree, i);
    ASSERT_LT(parent, static_cast<int32_t>(i));
    while (!stack.empty() && stack.back() != parent) stack.pop_back();
    ASSERT_TRUE(parent == -1 || !stack.empty()) << "node " << i << " is out of depth-first order";
    stack.push_back(static_cast<int32_t>(i));
    ASSERT_TRUE(children[parent].insert(tree[i].id).second) << "node " << i << " repeats a sibling's token";
    EXPECT_LE(static_cast<int>(children[parent].size()), topk);
  }
}

TEST(NgramTree, PathsAreEarlierContinuationsAndTheFirstIsTheChain) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    // Few distinct ids, so suffixes recur with different continuations.
    std::vector<int32_t> tokens(20 + rng() % 80);
    for (int32_t& id : tokens) id = static_cast<int32_t>(rng() % 5);
    const int max_draft = 1 + static_cast<int>(rng() % 6);
    const int max_nodes = max_draft + static_cast<int>(rng() % 12);
    const int topk = 1 + static_cast<int>(rng() % 4);
    const int ngram_min = 1 + static_cast<int>(rng() % 2);
    const int ngram_max = ngram_min + static_cast<int>(rng() % 3);
    const std::vector<DraftToken> tree =
        NgramProposer::lookup_tree(tokens, ngram_min, ngram_max, max_draft, max_nodes, topk);
    ASSERT_NO_FATAL_FAILURE(expect_well_formed(tree, topk));
    EXPECT_LE(static_cast<int>(tree.size()), max_nodes);
    const std::vector<std::vector<int32_t>> paths = paths_of(tree);
    // Every path follows some earlier occurrence of a suffix of length in [ngram_min, ngram_max].
    const auto len = static_cast<int64_t>(tokens.size());
    for (const std::vector<int32_t>& path : paths) {
      EXPECT_LE(static_cast<int>(path.size()), max_draft);
      bool found = false;
      for (int64_t n = ngram_min; n <= ngram_max && n < len && !found; ++n) {
        for (int64_t i = 0; i + n < len && !found; ++i) {
          if (!std::equal(tokens.end() - n, tokens.end(), tokens.begin() + i)) continue;
          const int64_t from = i + n;
          found = from + static_cast<int64_t>(path.size()) <= len &&
                  std::equal(path.begin(), path.end(), tokens.begin() + from);
        }
      }
      EXPECT_TRUE(found) << "trial " << trial << ": a path follows no earlier occurrence of the suffix";
    }
    // The chain's draft starts the first path, whole (an older continuation that shares it may extend it where
    // the newest ran into the end of the sequence).
    const std::vector<int32_t> chain = NgramProposer::lookup(tokens, ngram_min, ngram_max, max_draft);
    std::vector<int32_t> first_path;
    for (size_t i = 0; i < tree.size() && draft_parent(tree, i) == static_cast<int32_t>(i) - 1; ++i) {
      first_path.push_back(tree[i].id);
    }
    ASSERT_GE(first_path.size(), chain.size()) << "trial " << trial;
    EXPECT_TRUE(std::equal(chain.begin(), chain.end(), first_path.begin())) << "trial " << trial;
  }
}

TEST(NgramTree, AmpleBudgetHoldsEveryContinuationOfTheLongestSuffix) {
  // "a b X ..." recurs with three continuations; the suffix "a b" matches all three.
  const std::vector<int32_t> tokens = {1, 2, 7, 8, 9, 5, 1, 2, 7, 3, 4, 6, 1, 2, 6, 6, 0, 1, 2};
  const std::vector<DraftToken> tree = NgramProposer::lookup_tree(tokens, 2, 2, 3, 32, 4);
  ASSERT_NO_FATAL_FAILURE(expect_well_formed(tree, 4));
  const std::vector<std::vector<int32_t>> paths = paths_of(tree);
  const std::set<std::vector<int32_t>> path_set(paths.begin(), paths.end());
  for (const std::vector<int32_t>& continuation :
       {std::vector<int32_t>{6, 6, 0}, std::vector<int32_t>{7, 3, 4}, std::vector<int32_t>{7, 8, 9}}) {
    EXPECT_TRUE(path_set.count(continuation)) << "missing continuation " << continuation[0] << " "
                                              << continuation[1] << " " << continuation[2];
  }
  // The most recent occurrence's continuation first; the shared prefix 7 is one node.
  EXPECT_EQ(paths[2], (std::vector<int32_t>{6, 6, 0}));
  EXPECT_EQ(tree.size(), 8u);  // 6 6 0, 7 3 4, and 8 9 under the shared 7
  // A budget of 4 keeps the chain and one more node.
  EXPECT_EQ(NgramProposer::lookup_tree(tokens, 2, 2, 3, 4, 4).size(), 4u);
  // One child per node: the chain.
  const std::vector<DraftToken> chain = NgramProposer::lookup_tree(tokens, 2, 2, 3, 32, 1);
  EXPECT_TRUE(is_chain(chain));
  EXPECT_EQ(chain.size(), 3u);
}

// The oracle's tree with the true continuation 10, 11, 12, ...: a node is true only when its rank is the truth's
// for its position and its parent is true, and the chain (topk 1) equals the chain proposer's draft.
TEST(OracleTree, TrueNodesFollowTheRankModelAndTheChainIsTheChainDraft) {
  std::vector<int32_t> oracle;
  for (int32_t i = 0; i < 40; ++i) oracle.push_back(10 + i);
  const std::vector<int32_t> prompt = {1, 2, 3};
  for (double error_rate : {0.0, 0.3, 0.6}) {
    OracleProposer proposer(error_rate, 7, 512);
    for (int generated = 0; generated < 20; ++generated) {
      std::vector<int32_t> tokens = prompt;
      tokens.insert(tokens.end(), oracle.begin(), oracle.begin() + generated);
      ProposeRequest request;
      request.tokens = tokens;
      request.n_prompt = static_cast<int64_t>(prompt.size());
      request.oracle = oracle;
      request.max_draft = 5;
      std::vector<std::vector<DraftToken>> chain;
      ASSERT_TRUE(proposer.propose({&request, 1}, chain).is_ok());
      request.max_nodes = 5;
      request.tree_topk = 1;
      const std::vector<DraftToken> spine = proposer.propose_tree(request);
      ASSERT_EQ(spine.size(), chain[0].size());
      for (size_t i = 0; i < spine.size(); ++i) EXPECT_EQ(spine[i].id, chain[0][i].id) << "depth " << i + 1;

      request.max_nodes = 12;
      request.tree_topk = 3;
      const std::vector<DraftToken> tree = proposer.propose_tree(request);
      ASSERT_NO_FATAL_FAILURE(expect_well_formed(tree, 3));
      EXPECT_LE(tree.size(), 12u);
      // A node is the true token exactly when its path is a prefix of the true continuation.
      const std::vector<std::vector<int32_t>> paths = paths_of(tree);
      int on_path = 0;
      for (const std::vector<int32_t>& path : paths) {
        EXPECT_LE(path.size(), 5u);
        on_path += std::equal(path.begin(), path.end(), oracle.begin() + generated) ? 1 : 0;
      }
      if (error_rate == 0.0) {
        EXPECT_EQ(on_path, 5) << "a perfect oracle's tree holds the true continuation to the full depth";
        EXPECT_TRUE(is_chain(tree)) << "with no doubt there is nothing to branch on";
      }
    }
  }
}

// Chains with runners-up (MTP and draft-model trees): the chain first and whole, then the runners-up as leaves
// beside each chain token, the shallowest first while the budget lasts.
TEST(ChainTree, RunnersUpBesideTheChainShallowestFirst) {
  const std::vector<DraftToken> chain = {{10, {}}, {11, {}}, {12, {}}};
  const std::vector<std::vector<int32_t>> alternatives = {{20, 30}, {21, 31}, {22, 32}};
  const std::vector<DraftToken> tree = chain_with_runners_up(chain, alternatives, 6);
  ASSERT_NO_FATAL_FAILURE(expect_well_formed(tree, 3));
  const std::set<std::vector<int32_t>> paths = [&] {
    const auto all = paths_of(tree);
    return std::set<std::vector<int32_t>>(all.begin(), all.end());
  }();
  EXPECT_EQ(paths, (std::set<std::vector<int32_t>>{{10}, {10, 11}, {10, 11, 12}, {20}, {30}, {10, 21}}));
  EXPECT_EQ(chain_with_runners_up(chain, alternatives, 3).size(), 3u);
  EXPECT_TRUE(is_chain(chain_with_runners_up(chain, alternatives, 3)));
  EXPECT_EQ(chain_with_runners_up(chain, alternatives, 64).size(), 9u);
  // The policy's counts per depth: none at the first, one at the second and third; the budget still binds.
  const std::vector<int> wanted = {0, 1, 2};
  const auto chosen = paths_of(chain_with_runners_up(chain, alternatives, 64, wanted));
  EXPECT_EQ(std::set<std::vector<int32_t>>(chosen.begin(), chosen.end()),
            (std::set<std::vector<int32_t>>{{10}, {10, 11}, {10, 11, 12}, {10, 21}, {10, 11, 22}, {10, 11, 32}}));
  EXPECT_EQ(chain_with_runners_up(chain, alternatives, 4, wanted).size(), 4u);
}

// The runners-up of a row against a full sort written here: largest first, ties to the lower id, the argmax,
// NaN and -inf left out.
TEST(ChainTree, RunnersUpAreTheNextLargestLogits) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<float> logits(1 + rng() % 40);
    for (float& value : logits) value = static_cast<float>(static_cast<int>(rng() % 9) - 4);  // many ties
    if (trial % 5 == 0) logits[rng() % logits.size()] = NAN;
    if (trial % 7 == 0) logits[rng() % logits.size()] = -INFINITY;
    const int32_t skip = static_cast<int32_t>(rng() % logits.size());
    const int n = 1 + static_cast<int>(rng() % 5);
    std::vector<int32_t> expected;
    for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
      if (i != skip && !std::isnan(logits[i]) && logits[i] != -INFINITY) expected.push_back(i);
    }
    std::stable_sort(expected.begin(), expected.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    if (static_cast<int>(expected.size()) > n) expected.resize(n);
    EXPECT_EQ(runners_up(logits, skip, n), expected) << "trial " << trial;
  }
}

// A drafter whose logits at a node are a function of the node's path: a few ids, random values.
std::vector<float> path_logits(const std::vector<int32_t>& path, int vocab) {
  uint64_t seed = 1469598103934665603ull;
  for (int32_t id : path) seed = (seed ^ static_cast<uint64_t>(id + 1)) * 1099511628211ull;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& value : logits) value = normal(rng);
  return logits;
}

// Every node the drafter could offer (top-k children, up to max_depth), with its path's log-probability in
// float64, its rank among its siblings, whether it is on the greedy chain, and its first off-chain ancestor's
// depth and rank (the alternative it hangs below; 0 for chain nodes).
struct Candidate {
  std::vector<int32_t> path;
  double score;
  bool on_chain;
  int alternative_depth;
  int alternative_rank;
};

void enumerate(std::vector<int32_t>& path, double score, bool on_chain, int alt_depth, int alt_rank, int vocab,
               int max_depth, int topk, std::vector<Candidate>& out) {
  if (static_cast<int>(path.size()) == max_depth) return;
  const std::vector<float> logits = path_logits(path, vocab);
  double max_logit = -INFINITY;
  for (float value : logits) max_logit = std::max<double>(max_logit, value);
  double sum = 0.0;
  for (float value : logits) sum += std::exp(static_cast<double>(value) - max_logit);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int rank = 0; rank < std::min(topk, vocab); ++rank) {
    const int32_t id = order[rank];
    const double child_score = score + static_cast<double>(logits[id]) - max_logit - std::log(sum);
    const bool child_on_chain = on_chain && rank == 0;
    const int depth = static_cast<int>(path.size()) + 1;
    const int child_alt_depth = on_chain && rank > 0 ? depth : alt_depth;
    const int child_alt_rank = on_chain && rank > 0 ? rank : alt_rank;
    path.push_back(id);
    out.push_back({path, child_score, child_on_chain, child_alt_depth, child_alt_rank});
    enumerate(path, child_score, child_on_chain, child_alt_depth, child_alt_rank, vocab, max_depth, topk, out);
    path.pop_back();
  }
}

// Grown best first, a tree keeps the greedy chain whole and then takes the highest-scoring nodes the drafter
// offers (under the policy's alternatives per depth, when given), asking the drafter only for nodes in the tree;
// the draft lists it depth first, siblings most likely first.
TEST(TreeGrowth, HoldsTheChainThenTheBestScoringNodes) {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 300; ++trial) {
    const int vocab = 3 + static_cast<int>(rng() % 6);
    const int max_depth = 1 + static_cast<int>(rng() % 5);
    const int topk = 2 + static_cast<int>(rng() % 3);
    const int max_nodes = 1 + static_cast<int>(rng() % 24);
    std::vector<int> wanted;
    if (trial % 2 == 1) {
      for (int d = 0; d < max_depth; ++d) wanted.push_back(static_cast<int>(rng() % 3));
    }
    SCOPED_TRACE(testing::Message() << "trial " << trial << ": vocab " << vocab << ", depth " << max_depth
                                    << ", topk " << topk << ", nodes " << max_nodes << ", policy "
                                    << (wanted.empty() ? "none" : "given"));
    TreeGrowth growth(max_depth, max_nodes, topk, wanted);
    growth.expand(-1, path_logits({}, vocab));
    const auto path_to = [&](int32_t node) {
      std::vector<int32_t> path;
      for (int32_t n = node; n >= 0; n = growth.parent(n)) path.insert(path.begin(), growth.token(n));
      return path;
    };
    std::set<int32_t> expanded;
    for (int32_t node; (node = growth.next_expansion()) >= 0;) {
      ASSERT_TRUE(expanded.insert(node).second) << "node " << node << " expanded twice";
      ASSERT_LT(growth.depth(node), max_depth);
      growth.expand(node, path_logits(path_to(node), vocab));
    }
    std::vector<Candidate> all;
    std::vector<int32_t> root;
    enumerate(root, 0.0, true, 0, 0, vocab, max_depth, topk, all);
    std::set<std::vector<int32_t>> expected;
    std::vector<const Candidate*> others;
    for (const Candidate& c : all) {
      if (c.on_chain) {
        if (static_cast<int>(expected.size()) < max_nodes) expected.insert(c.path);
      } else if (wanted.empty() || c.alternative_rank <= wanted[static_cast<size_t>(c.alternative_depth - 1)]) {
        others.push_back(&c);
      }
    }
    std::stable_sort(others.begin(), others.end(), [](const Candidate* a, const Candidate* b) { return a->score > b->score; });
    for (const Candidate* c : others) {
      if (static_cast<int>(expected.size()) == max_nodes) break;
      expected.insert(c->path);
    }
    const std::vector<DraftToken> draft = growth.draft();
    ASSERT_NO_FATAL_FAILURE(expect_well_formed(draft, topk));
    const auto paths = paths_of(draft);
    EXPECT_EQ(std::set<std::vector<int32_t>>(paths.begin(), paths.end()), expected);
    EXPECT_EQ(static_cast<int64_t>(draft.size()), growth.size());
    for (int32_t node : expanded) EXPECT_LT(node, growth.size());
    // Depth first with siblings most likely first: the first path is the greedy chain.
    for (size_t i = 0; i < draft.size() && draft_parent(draft, i) == static_cast<int32_t>(i) - 1; ++i) {
      EXPECT_EQ(paths[i].back(), sampling::argmax(path_logits(std::vector<int32_t>(paths[i].begin(), paths[i].end() - 1), vocab)));
    }
  }
}

}  // namespace
}  // namespace rwd::spec
