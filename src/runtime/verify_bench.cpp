// measure_verify_cost of include/rewind/tools.h: drives the forward and the transactions directly, so the
// measured round is exactly a verify forward plus its commit, with no sampling or proposer in it.
#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "rewind/tools.h"
#include "state/model_state.h"

namespace rwd {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

int32_t token_at(int64_t position, int slot, int64_t n_vocab) {
  return static_cast<int32_t>((position * 7919 + slot * 104729 + 11) % n_vocab);
}

// The parents of a complete tree of k nodes below a root (-1), `branching` children each, filled breadth first
// and laid out depth first: parents[i] is the depth-first index of node i's parent.
std::vector<int32_t> complete_tree(int k, int branching) {
  std::vector<std::vector<int32_t>> children(static_cast<size_t>(k) + 1);  // breadth-first ids, 0 the root
  for (int id = 1; id <= k; ++id) children[static_cast<size_t>((id - 1) / branching)].push_back(id);
  std::vector<int32_t> parents;
  std::vector<std::pair<int32_t, int32_t>> stack;  // (breadth-first id, parent's depth-first index)
  for (auto it = children[0].rbegin(); it != children[0].rend(); ++it) stack.push_back({*it, -1});
  while (!stack.empty()) {
    const auto [id, parent] = stack.back();
    stack.pop_back();
    const auto index = static_cast<int32_t>(parents.size());
    parents.push_back(parent);
    for (auto it = children[id].rbegin(); it != children[id].rend(); ++it) stack.push_back({*it, index});
  }
  return parents;
}

}  // namespace

Result<std::vector<VerifyCost>> measure_verify_cost(const VerifyCostOptions& options) {
  if (options.n_slots < 1 || options.n_prompt < 1 || options.reps < 1 || options.draft_lengths.empty()) {
    return Status::error("verify cost: needs slots >= 1, prompt >= 1, reps >= 1 and at least one draft length");
  }
  const int max_draft = *std::max_element(options.draft_lengths.begin(), options.draft_lengths.end());
  if (*std::min_element(options.draft_lengths.begin(), options.draft_lengths.end()) < 1 || max_draft > 32) {
    return Status::error("verify cost: draft lengths must be in [1, 32]");
  }
  REWIND_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model, model::Model::load(options.model_path));
  const int64_t n_vocab = model->hparams().n_vocab;
  ThreadPool pool(options.n_threads);
  const int64_t n_shapes = options.tree_branching > 0 ? 2 : 1;
  const int64_t n_rounds = static_cast<int64_t>(options.draft_lengths.size()) * n_shapes * 2 * (options.reps + 1);
  const int64_t n_ctx = options.n_prompt + n_rounds + max_draft + 8;
  const int64_t max_batch = std::max<int64_t>(options.n_prompt, options.n_slots * (max_draft + 1));
  model::ForwardContext ctx(*model, pool, max_batch);
  std::vector<VerifyCost> results;
  for (const std::string& policy_name : options.policies) {
    REWIND_ASSIGN_OR_RETURN(state::RollbackPolicy policy, state::parse_rollback_policy(policy_name));
    state::ModelState state(model->kv_specs(), model->recurrent_specs(),
                            state::StateOptions{options.n_slots, n_ctx, policy, max_draft + 1});
    model::Batch batch;
    std::vector<float> logits;
    for (int slot = 0; slot < options.n_slots; ++slot) {
      batch.clear();
      for (int64_t pos = 0; pos < options.n_prompt; ++pos) {
        batch.add(token_at(pos, slot, n_vocab), static_cast<int32_t>(pos), slot, pos + 1 == options.n_prompt);
      }
      REWIND_RETURN_IF_ERROR(ctx.forward(batch, state, logits));
    }
    int64_t position = options.n_prompt;
    const auto plain_step = [&]() -> Result<double> {
      batch.clear();
      for (int slot = 0; slot < options.n_slots; ++slot) {
        batch.add(token_at(position, slot, n_vocab), static_cast<int32_t>(position), slot, true);
      }
      const auto start = Clock::now();
      REWIND_RETURN_IF_ERROR(ctx.forward(batch, state, logits));
      ++position;
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    // A chain of k (branching 0) or a tree; the commit keeps the first path (as much as the chain's k).
    const auto verify_round = [&](int k, int branching) -> Result<double> {
      batch.clear();
      const std::vector<int32_t> parents = branching > 0 ? complete_tree(k, branching) : std::vector<int32_t>{};
      std::vector<int32_t> kept_path{0};
      for (size_t i = 0; i < parents.size() && parents[i] == static_cast<int32_t>(i) - 1; ++i) {
        kept_path.push_back(static_cast<int32_t>(i) + 1);
      }
      for (int slot = 0; slot < options.n_slots; ++slot) {
        const auto root = static_cast<int32_t>(batch.size());
        batch.add(token_at(position, slot, n_vocab), static_cast<int32_t>(position), slot, true);
        for (int i = 0; i < k; ++i) {
          if (branching == 0) {
            batch.add(token_at(position + 1 + i, slot, n_vocab), static_cast<int32_t>(position + 1 + i), slot, true);
            continue;
          }
          const int32_t parent_row = parents[i] < 0 ? root : root + 1 + parents[i];
          batch.add_node(token_at(position + 1 + i, slot, n_vocab), batch.positions[parent_row] + 1, slot, true,
                         parent_row);
        }
      }
      const auto start = Clock::now();
      std::vector<std::optional<state::Transaction>> txns(static_cast<size_t>(options.n_slots));
      for (int slot = 0; slot < options.n_slots; ++slot) {
        REWIND_ASSIGN_OR_RETURN(state::Transaction txn, state.begin(slot, static_cast<int32_t>(position)));
        txns[slot].emplace(std::move(txn));
      }
      REWIND_RETURN_IF_ERROR(ctx.forward(batch, state, logits));
      for (auto& txn : txns) {
        REWIND_RETURN_IF_ERROR((branching > 0 ? txn->commit_path({0}) : txn->commit(1)).status());
      }
      ++position;
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    std::vector<std::pair<int, int>> shapes;  // (k, branching)
    for (int k : options.draft_lengths) {
      shapes.push_back({k, 0});
      const bool trees_refused = policy == state::RollbackPolicy::checkpoint && state.has_recurrent_layers();
      if (options.tree_branching > 0 && !trees_refused) shapes.push_back({k, options.tree_branching});
    }
    for (const auto& [k, branching] : shapes) {
      std::vector<double> plain, rounds;
      const state::RollbackCounters before = state.total_counters();
      for (int rep = 0; rep <= options.reps; ++rep) {  // rep 0 warms up
        REWIND_ASSIGN_OR_RETURN(double plain_seconds, plain_step());
        REWIND_ASSIGN_OR_RETURN(double round_seconds, verify_round(k, branching));
        if (rep == 0) continue;
        plain.push_back(plain_seconds);
        rounds.push_back(round_seconds);
      }
      const state::RollbackCounters after = state.total_counters();
      const state::StateBytes bytes = state.bytes(pool.n_threads());
      VerifyCost cost;
      cost.policy = policy_name;
      cost.draft_length = k;
      cost.tree_branching = branching;
      cost.plain_seconds = median(plain);
      cost.round_seconds = median(rounds);
      cost.bytes_written_per_round = (after.bytes_written - before.bytes_written) / (options.reps + 1);
      cost.bytes_copied_per_round = (after.bytes_copied - before.bytes_copied) / (options.reps + 1);
      cost.state_bytes = bytes.conv + bytes.recurrent + bytes.records + bytes.snapshots + bytes.checkpoint_copies +
                         bytes.scratch;
      results.push_back(cost);
    }
  }
  return results;
}

}  // namespace rwd
