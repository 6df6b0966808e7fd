// links: rewind_model
// Token trees verified in one forward (tree speculation), for every registry architecture under the replay and
// snapshot policies, against an independent reference: each node's path decoded one token per forward by a
// state without transactions. Every node's logits must be bit-identical to its path's last logits, and after
// committing one path (its KV rows moved into place, its records kept), the next tokens' logits and the
// recurrent state must be bit-identical to plain decoding of the prompt and that path. Refusals (a tree outside
// a transaction, out of depth-first order, under a policy that runs chains only, a path that is not one) must
// name the fault and leave the slot's state as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/sanitizer_sample.h"
#include "model/arch_info.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "spec/rollback_test_util.h"
#include "state/model_state.h"

namespace rwd {
namespace {

using state::RollbackPolicy;
using namespace spec_test;

constexpr int64_t kCtx = 256;
constexpr int64_t kMaxTxn = 12;
constexpr int64_t kPrompt = 19;
constexpr int64_t kMaxBatch = 64;

// A token tree in depth-first order: node 0 the root, parent[i] < i for the others (-1 for the root).
struct Tree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;

  // The nodes from the root to `node`.
  std::vector<int32_t> path_to(int32_t node) const {
    std::vector<int32_t> path;
    for (int32_t n = node; n >= 0; n = parents[n]) path.push_back(n);
    std::reverse(path.begin(), path.end());
    return path;
  }
};

// A random tree of n nodes (random parents, then laid out depth first with children in creation order) with
// printable tokens; the root's token is `root_token`.
Tree random_tree(int64_t n, int32_t root_token, std::mt19937& rng) {
  std::vector<std::vector<int32_t>> children(static_cast<size_t>(n));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  tokens[0] = root_token;
  for (int32_t i = 1; i < n; ++i) {
    // Favour deep trees: the parent is one of the last three nodes made.
    const int32_t lowest = std::max(0, i - 3);
    children[std::uniform_int_distribution<int32_t>(lowest, i - 1)(rng)].push_back(i);
    tokens[i] = std::uniform_int_distribution<int32_t>(32, 126)(rng);
  }
  Tree tree;
  std::function<void(int32_t, int32_t)> visit = [&](int32_t node, int32_t parent_row) {
    const auto row = static_cast<int32_t>(tree.tokens.size());
    tree.tokens.push_back(tokens[node]);
    tree.parents.push_back(parent_row);
    for (int32_t child : children[node]) visit(child, row);
  };
  visit(0, -1);
  return tree;
}

class TreeVerify : public HybridModelTest {
 protected:
  void SetUp() override { load(kMaxBatch); }

  std::unique_ptr<state::ModelState> make_state(int n_slots) const {
    return std::make_unique<state::ModelState>(model_->kv_specs(), model_->recurrent_specs(),
                                               state::StateOptions{n_slots, kCtx, policy(), kMaxTxn, 0});
  }

  // Plain decoding of `tokens` (the prompt in one batch, then one token per forward) without transactions:
  // the logits of every token from the prompt's last on, and the recurrent state after the last.
  void decode_plainly(const std::vector<int32_t>& tokens, std::vector<std::vector<float>>& logits_by_position,
                      std::vector<uint8_t>& final_state) {
    state::ModelState plain(model_->kv_specs(), model_->recurrent_specs(), 1, kCtx);
    model::Batch batch;
    std::vector<float> logits;
    logits_by_position.assign(tokens.size(), {});
    const auto n = static_cast<int64_t>(tokens.size());
    for (int64_t begin = 0, end = kPrompt; begin < n; begin = end, end = begin + 1) {
      batch.clear();
      for (int64_t i = begin; i < end; ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, i == end - 1);
      const Status status = ctx_->forward(batch, plain, logits);
      ASSERT_TRUE(status.is_ok()) << status.message();
      logits_by_position[end - 1] = logits;
    }
    plain.flush(0);
    final_state = as_bytes(plain.recurrent().slot_data(0), plain.recurrent().slot_floats());
  }

  // The first kPrompt tokens of `prompt` in slots 0 .. n_slots - 1, one forward.
  void prefill(state::ModelState& state, const std::vector<int32_t>& prompt, int n_slots) {
    model::Batch batch;
    for (int slot = 0; slot < n_slots; ++slot) {
      for (int64_t i = 0; i < kPrompt; ++i) batch.add(prompt[i], static_cast<int32_t>(i), slot, false);
    }
    std::vector<float> logits;
    const Status status = ctx_->forward(batch, state, logits);
    ASSERT_TRUE(status.is_ok()) << status.message();
  }

  // The tree's rows for a slot whose accepted tokens end at `first` (the root at position first).
  static void add_tree(model::Batch& batch, const Tree& tree, int32_t first, int slot) {
    const auto base = static_cast<int32_t>(batch.size());
    for (size_t i = 0; i < tree.tokens.size(); ++i) {
      const int32_t parent = tree.parents[i];
      const int32_t position = parent < 0 ? first : batch.positions[base + parent] + 1;
      batch.add_node(tree.tokens[i], position, slot, true, parent < 0 ? -1 : base + parent);
    }
  }
};

// Rounds of [root + tree] verified in one forward, each node's logits against plain decoding of its path; one
// path per round is committed (the deepest node's, a middle one's, the root alone) and the next round's tree
// grows from it, so the lazily folded records and the moved KV rows of each commit are what the next round reads.
TEST_P(TreeVerify, EveryNodeEqualsPlainDecodingOfItsPath) {
  std::mt19937 rng(7);
  std::vector<int32_t> accepted = sequence(kPrompt + 1, 3);  // the prompt and the first sampled token
  auto state = make_state(1);
  ASSERT_NO_FATAL_FAILURE(prefill(*state, accepted, 1));
  model::Batch batch;
  std::vector<float> logits;
  for (int round = 0; round < 6; ++round) {
    const auto first = static_cast<int32_t>(accepted.size() - 1);  // the root: accepted, not yet run
    const Tree tree = random_tree(round % 2 == 0 ? kMaxTxn : 7, accepted.back(), rng);
    auto txn = state->begin(0, first);
    ASSERT_TRUE(txn.is_ok()) << txn.status().message();
    batch.clear();
    add_tree(batch, tree, first, 0);
    const Status status = ctx_->forward(batch, *state, logits);
    ASSERT_TRUE(status.is_ok()) << status.message();
    for (size_t node = 0; node < tree.tokens.size(); ++node) {
      std::vector<int32_t> tokens(accepted.begin(), accepted.end() - 1);
      for (int32_t n : tree.path_to(static_cast<int32_t>(node))) tokens.push_back(tree.tokens[n]);
      std::vector<std::vector<float>> expected;
      std::vector<uint8_t> expected_state;
      ASSERT_NO_FATAL_FAILURE(decode_plainly(tokens, expected, expected_state));
      EXPECT_EQ(0, std::memcmp(logits.data() + node * n_vocab_, expected.back().data(), n_vocab_ * sizeof(float)))
          << "round " << round << ": node " << node << " at depth " << tree.path_to(node).size() - 1
          << " differs from plain decoding of its path";
    }
    // Keep the path to the deepest node, to a middle node, or the root alone.
    int32_t kept_node = 0;
    if (round % 3 == 0) {
      for (size_t node = 0; node < tree.tokens.size(); ++node) {
        if (tree.path_to(static_cast<int32_t>(node)).size() > tree.path_to(kept_node).size()) {
          kept_node = static_cast<int32_t>(node);
        }
      }
    } else if (round % 3 == 1) {
      kept_node = static_cast<int32_t>(tree.tokens.size() / 2);
    }
    const std::vector<int32_t> path = tree.path_to(kept_node);
    auto committed = txn->commit_path(path);
    ASSERT_TRUE(committed.is_ok()) << committed.status().message();
    EXPECT_EQ(committed->n_kept, static_cast<int64_t>(path.size()));
    accepted.pop_back();
    for (int32_t n : path) accepted.push_back(tree.tokens[n]);
    accepted.push_back(other_token(accepted.back()));  // the round's sampled token, the next root
  }
  // One plain token after the last round's kept path, and the state it leaves.
  batch.clear();
  batch.add(accepted.back(), static_cast<int32_t>(accepted.size() - 1), 0, true);
  ASSERT_TRUE(ctx_->forward(batch, *state, logits).is_ok());
  state->flush(0);
  std::vector<std::vector<float>> expected;
  std::vector<uint8_t> expected_state;
  ASSERT_NO_FATAL_FAILURE(decode_plainly(accepted, expected, expected_state));
  EXPECT_EQ(0, std::memcmp(logits.data(), expected.back().data(), n_vocab_ * sizeof(float)))
      << "the token after the committed paths differs from plain decoding";
  EXPECT_TRUE(same_bytes(as_bytes(state->recurrent().slot_data(0), state->recurrent().slot_floats()),
                         expected_state))
      << "recurrent state after the committed paths";
}

// With a rewind depth, the kept paths' records enter the rewind ring: after rounds of trees, rewinding the last
// d committed tokens leaves the state of plain decoding without them, for every d the ring holds.
TEST_P(TreeVerify, KeptPathsCanBeRewound) {
  std::mt19937 rng(17);
  std::vector<int32_t> accepted = sequence(kPrompt + 1, 4);
  state::StateOptions options{1, kCtx, policy(), kMaxTxn, 24};
  model::Batch batch;
  std::vector<float> logits;
  for (int64_t d : {int64_t{1}, int64_t{5}, int64_t{12}}) {
    state::ModelState state(model_->kv_specs(), model_->recurrent_specs(), options);
    std::vector<int32_t> tokens = accepted;
    ASSERT_NO_FATAL_FAILURE(prefill(state, tokens, 1));
    for (int round = 0; round < 4; ++round) {
      const auto first = static_cast<int32_t>(tokens.size() - 1);
      const Tree tree = random_tree(kMaxTxn, tokens.back(), rng);
      auto txn = state.begin(0, first);
      ASSERT_TRUE(txn.is_ok()) << txn.status().message();
      batch.clear();
      add_tree(batch, tree, first, 0);
      ASSERT_TRUE(ctx_->forward(batch, state, logits).is_ok());
      int32_t deepest = 0;
      for (size_t node = 0; node < tree.tokens.size(); ++node) {
        if (tree.path_to(static_cast<int32_t>(node)).size() > tree.path_to(deepest).size()) {
          deepest = static_cast<int32_t>(node);
        }
      }
      const std::vector<int32_t> path = tree.path_to(deepest);
      ASSERT_TRUE(txn->commit_path(path).is_ok());
      tokens.pop_back();
      for (int32_t n : path) tokens.push_back(tree.tokens[n]);
      tokens.push_back(other_token(tokens.back()));
    }
    // tokens.back() is the next root, not run: the state holds the others.
    const auto n_state = static_cast<int64_t>(tokens.size()) - 1;
    ASSERT_GE(state.rewindable(0), d);
    ASSERT_TRUE(state.rewind(0, d).is_ok());
    std::vector<std::vector<float>> expected;
    std::vector<uint8_t> expected_state;
    ASSERT_NO_FATAL_FAILURE(
        decode_plainly(std::vector<int32_t>(tokens.begin(), tokens.begin() + (n_state - d)), expected, expected_state));
    EXPECT_TRUE(same_bytes(as_bytes(state.recurrent().slot_data(0), state.recurrent().slot_floats()), expected_state))
        << "the state after rewinding " << d << " tokens kept by trees";
  }
}

// A tree in one slot beside a chain verify in another, in one batch: neither disturbs the other.
TEST_P(TreeVerify, TreeAndChainSlotsShareABatch) {
  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = sequence(kPrompt + 1, 5);
  auto state = make_state(2);
  ASSERT_NO_FATAL_FAILURE(prefill(*state, prompt, 2));
  model::Batch batch;
  std::vector<float> logits;
  const auto first = static_cast<int32_t>(kPrompt);
  auto chain_txn = state->begin(0, first);
  auto tree_txn = state->begin(1, first);
  ASSERT_TRUE(chain_txn.is_ok() && tree_txn.is_ok());
  const std::vector<int32_t> chain = {prompt.back(), 40, 41, 42};
  const Tree tree = random_tree(9, prompt.back(), rng);
  batch.clear();
  for (size_t i = 0; i < chain.size(); ++i) batch.add(chain[i], first + static_cast<int32_t>(i), 0, true);
  add_tree(batch, tree, first, 1);
  ASSERT_TRUE(ctx_->forward(batch, *state, logits).is_ok());
  std::vector<int32_t> tokens(prompt.begin(), prompt.end() - 1);
  tokens.insert(tokens.end(), chain.begin(), chain.end());
  std::vector<std::vector<float>> expected;
  std::vector<uint8_t> expected_state;
  ASSERT_NO_FATAL_FAILURE(decode_plainly(tokens, expected, expected_state));
  EXPECT_EQ(0, std::memcmp(logits.data() + 3 * n_vocab_, expected.back().data(), n_vocab_ * sizeof(float)))
      << "the chain slot's last token";
  const auto leaf = static_cast<int32_t>(tree.tokens.size() - 1);
  tokens.assign(prompt.begin(), prompt.end() - 1);
  for (int32_t n : tree.path_to(leaf)) tokens.push_back(tree.tokens[n]);
  ASSERT_NO_FATAL_FAILURE(decode_plainly(tokens, expected, expected_state));
  EXPECT_EQ(0, std::memcmp(logits.data() + (chain.size() + leaf) * n_vocab_, expected.back().data(),
                           n_vocab_ * sizeof(float)))
      << "the tree slot's last node";
  ASSERT_TRUE(chain_txn->commit(4).is_ok());
  ASSERT_TRUE(tree_txn->commit_path(tree.path_to(leaf)).is_ok());
  state->flush(1);
  EXPECT_TRUE(same_bytes(as_bytes(state->recurrent().slot_data(1), state->recurrent().slot_floats()), expected_state))
      << "the tree slot's state after its kept path";
}

// Every policy, the checkpoint policy's refusal of trees on recurrent models included.
class TreeRefusals : public TreeVerify {};

TEST_P(TreeRefusals, NameTheFaultAndLeaveTheSlotUnchanged) {
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = sequence(kPrompt + 1, 9);
  auto state = make_state(1);
  ASSERT_NO_FATAL_FAILURE(prefill(*state, prompt, 1));
  std::vector<float> logits;
  const auto first = static_cast<int32_t>(kPrompt);
  const Tree tree = random_tree(6, prompt.back(), rng);
  model::Batch tree_batch;
  add_tree(tree_batch, tree, first, 0);
  const std::vector<uint8_t> before = slot_bytes(*state, 0);

  Status status = ctx_->forward(tree_batch, *state, logits);
  ASSERT_FALSE(status.is_ok()) << "a tree outside a transaction was run";
  EXPECT_TRUE(contains(status.message(), "branches outside a transaction")) << status.message();

  auto txn = state->begin(0, first);
  ASSERT_TRUE(txn.is_ok());
  // Root, then a child of the root, a grandchild, then a second child of that first child placed after a row
  // that is not on its path (its subtree had ended): rows 0 <- 1 <- 2, 0 <- 3, then 1 <- 4 is out of order.
  model::Batch disorder;
  disorder.add_node(prompt.back(), first, 0, true, -1);
  disorder.add_node(40, first + 1, 0, true, 0);
  disorder.add_node(41, first + 2, 0, true, 1);
  disorder.add_node(42, first + 1, 0, true, 0);
  disorder.add_node(43, first + 2, 0, true, 1);
  status = ctx_->forward(disorder, *state, logits);
  ASSERT_FALSE(status.is_ok()) << "a tree out of depth-first order was run";
  EXPECT_TRUE(contains(status.message(), "batch row 4 follows row 1") && contains(status.message(), "depth-first"))
      << status.message();
  model::Batch bad_position = tree_batch;
  bad_position.positions[2] += 1;
  status = ctx_->forward(bad_position, *state, logits);
  ASSERT_FALSE(status.is_ok()) << "a node not one position past its parent was run";
  EXPECT_TRUE(contains(status.message(), "batch row 2 does not follow")) << status.message();
  EXPECT_TRUE(same_bytes(slot_bytes(*state, 0), before)) << "refused forwards wrote to the slot";

  if (policy() == RollbackPolicy::checkpoint) {
    status = ctx_->forward(tree_batch, *state, logits);
    if (state->has_recurrent_layers()) {
      ASSERT_FALSE(status.is_ok()) << "the checkpoint policy ran a tree";
      EXPECT_TRUE(contains(status.message(), "not checkpoint")) << status.message();
      EXPECT_TRUE(same_bytes(slot_bytes(*state, 0), before)) << "a refused tree wrote to the slot";
    } else {
      EXPECT_TRUE(status.is_ok()) << status.message();
    }
    return;
  }
  status = ctx_->forward(tree_batch, *state, logits);
  ASSERT_TRUE(status.is_ok()) << status.message();
  model::Batch more;
  more.add(50, first + 4, 0, true);
  status = ctx_->forward(more, *state, logits);
  ASSERT_FALSE(status.is_ok()) << "a transaction took tokens after its tree";
  EXPECT_TRUE(contains(status.message(), "ran a token tree")) << status.message();

  const std::vector<uint8_t> after_tree = slot_bytes(*state, 0);
  // A node that is not the next one's parent, a path not starting at the root, a node past the tree.
  int32_t not_child = 1;
  while (not_child < 6 && tree.parents[not_child] != 0) ++not_child;
  int32_t grandchild = 1;
  while (grandchild < 6 && tree.parents[grandchild] <= 0) ++grandchild;
  ASSERT_LT(grandchild, 6) << "the random tree has depth 1";
  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{0, grandchild}, std::vector<int32_t>{not_child},
                                          std::vector<int32_t>{0, 6}}) {
    auto committed = txn->commit_path(bad);
    ASSERT_FALSE(committed.is_ok()) << "a path that is not one was kept";
    EXPECT_TRUE(contains(committed.status().message(), "path entry")) << committed.status().message();
  }
  EXPECT_TRUE(same_bytes(slot_bytes(*state, 0), after_tree)) << "refused commits wrote to the slot";
  ASSERT_TRUE(txn->commit_path(tree.path_to(grandchild)).is_ok());
}

// Each architecture under every policy; without `refused`, only under those that verify trees (the checkpoint
// policy refuses them on recurrent models).
std::vector<Param> params(bool refused) {
  std::vector<Param> all;
  int a = 0;
  for (std::string_view arch : model::arch_names()) {
    const bool recurrent = model::find_arch(arch)->recurrent;
    int p = 0;
    for (RollbackPolicy policy : {RollbackPolicy::replay, RollbackPolicy::snapshot, RollbackPolicy::checkpoint}) {
      if (!refused && recurrent && policy == RollbackPolicy::checkpoint) continue;
      const int policies = refused || !recurrent ? 3 : 2;
      if (test::in_sanitizer_sample({a, p++}, policies)) all.push_back({arch.data(), policy});  // names are literals
    }
    ++a;
  }
  return all;
}

std::string param_name(const ::testing::TestParamInfo<Param>& param_info) {
  std::string name =
      std::string(param_info.param.model) + "_" + std::string(state::rollback_policy_name(param_info.param.policy));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Models, TreeVerify, ::testing::ValuesIn(params(false)), param_name);
INSTANTIATE_TEST_SUITE_P(Models, TreeRefusals, ::testing::ValuesIn(params(true)), param_name);

}  // namespace
}  // namespace rwd
