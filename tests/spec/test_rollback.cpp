// links: rewind_model
// Speculation transactions (DESIGN §5) at the forward level, for the generated hybrid models under the replay,
// snapshot and checkpoint policies, against an independent reference: the same sequence decoded one token per
// forward by a state without transactions. Accepted logits rows and final recurrent states must be bit-identical
// to it at every rejection depth, with several forwards per transaction, with four slots verifying in one batch,
// and beside slots poisoned with 0x3e bytes (which must stay unread and unwritten); refused operations must name
// the numbers at fault and leave the state as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/thread_pool.h"
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
constexpr int64_t kMaxDraft = 8;
constexpr int64_t kMaxTxn = 1 + kMaxDraft;  // a verify batch: the last accepted token and the drafts
constexpr int64_t kPrompt = 23;             // prefilled plainly; the first verify batch starts here
constexpr int64_t kMaxBatch = 160;

std::vector<uint8_t> recurrent_bytes(state::ModelState& state, int slot) {
  return as_bytes(state.recurrent().slot_data(slot), state.recurrent().slot_floats());
}

// Plain decoding of a sequence without transactions.
struct Reference {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;    // [position] -> [n_vocab], from the forward of that position
  std::vector<std::vector<uint8_t>> states;  // [position] -> the recurrent state after it (from the prompt's last)
};

// One slot's way through its reference sequence.
struct SlotProgress {
  int slot;
  const Reference* ref;
  int64_t n_state = 0;  // tokens the slot's state holds
  int64_t n_done = 0;   // tokens accepted; those past n_state are still to be run as plain tokens
};

// One slot's part of a verify round: drafts d_1..d_k, the first wrong one at index e (k + 1: all right), so
// e - 1 drafts are accepted and 1 + (e - 1) tokens kept.
struct RoundPlan {
  int64_t k;
  int64_t e;
  bool keep_one_less = false;  // keep e - 1 tokens and run the last accepted one plainly later
};

// Where a round runs the slots' plain tokens (a checkpoint re-run, a kept token left out of a commit): in a
// forward before the transactions open, in one after they open (positions before their first), or in front of
// the transaction's tokens in the verify batch. The backup of the checkpoint policy must include them.
enum class PlainTokens { before_begin, after_begin, in_verify_batch };

PlainTokens plain_tokens_of_round(int round) { return static_cast<PlainTokens>(round % 3); }

class Rollback : public HybridModelTest {
 protected:
  void SetUp() override { load(kMaxBatch); }

  std::unique_ptr<state::ModelState> make_state(int n_slots) const {
    return std::make_unique<state::ModelState>(model_->kv_specs(), model_->recurrent_specs(),
                                               state::StateOptions{n_slots, kCtx, policy(), kMaxTxn, 0});
  }

  // The prompt in one batch (bit-identical to one token at a time: test_hybrid_invariance), then one token per
  // forward.
  Reference decode_plainly(std::vector<int32_t> tokens) {
    Reference ref;
    ref.tokens = std::move(tokens);
    const int64_t n = static_cast<int64_t>(ref.tokens.size());
    state::ModelState plain(model_->kv_specs(), model_->recurrent_specs(), 1, kCtx);
    model::Batch batch;
    std::vector<float> logits;
    for (int64_t begin = 0, end = kPrompt; begin < n; begin = end, end = begin + 1) {
      batch.clear();
      for (int64_t i = begin; i < end; ++i) batch.add(ref.tokens[i], static_cast<int32_t>(i), 0, true);
      const Status status = ctx_->forward(batch, plain, logits);
      EXPECT_TRUE(status.is_ok()) << status.message();
      for (int64_t i = begin; i < end; ++i) {
        ref.logits.emplace_back(logits.begin() + (i - begin) * n_vocab_, logits.begin() + (i - begin + 1) * n_vocab_);
      }
      ref.states.resize(static_cast<size_t>(end));
      ref.states.back() = recurrent_bytes(plain, 0);
    }
    return ref;
  }


  void expect_row(const std::vector<float>& logits, int64_t row, const SlotProgress& progress, int64_t position,
                  const std::string& what) {
    ASSERT_LE((row + 1) * n_vocab_, static_cast<int64_t>(logits.size()));
    EXPECT_EQ(0, std::memcmp(logits.data() + row * n_vocab_, progress.ref->logits[position].data(),
                             n_vocab_ * sizeof(float)))
        << what << ": slot " << progress.slot << " position " << position
        << " differs from plain decoding without transactions";
  }

  void add_plain_rows(model::Batch& batch, const SlotProgress& progress) {
    for (int64_t p = progress.n_state; p < progress.n_done; ++p) {
      batch.add(progress.ref->tokens[p], static_cast<int32_t>(p), progress.slot, true);
    }
  }

  // Runs the slots' outstanding plain tokens (prompt, or tokens a checkpoint rollback asks to re-run) in one
  // batch, checking their logits.
  void run_plain(state::ModelState& state, const std::vector<SlotProgress*>& slots) {
    model::Batch batch;
    for (const SlotProgress* progress : slots) add_plain_rows(batch, *progress);
    if (batch.size() == 0) return;
    std::vector<float> logits;
    const Status status = ctx_->forward(batch, state, logits);
    ASSERT_TRUE(status.is_ok()) << status.message();
    int64_t row = 0;
    for (SlotProgress* progress : slots) {
      for (int64_t p = progress->n_state; p < progress->n_done; ++p) expect_row(logits, row++, *progress, p, "plain");
      progress->n_state = progress->n_done;
    }
  }

  // One verify round for all `slots` in one forward (in the given order): each opens a transaction at its
  // accepted length and verifies [last accepted, d_1..d_k]; its plain tokens go in front of the transaction's
  // where `plain` says.
  void verify_round(state::ModelState& state, const std::vector<SlotProgress*>& slots,
                    const std::vector<RoundPlan>& plans, PlainTokens plain) {
    if (plain == PlainTokens::before_begin) {
      ASSERT_NO_FATAL_FAILURE(run_plain(state, slots));
    }
    std::vector<state::Transaction> txns;
    model::Batch batch;
    for (size_t i = 0; i < slots.size(); ++i) {
      const SlotProgress& progress = *slots[i];
      auto txn = state.begin(progress.slot, static_cast<int32_t>(progress.n_done));
      ASSERT_TRUE(txn.is_ok()) << txn.status().message();
      txns.push_back(std::move(txn).value());
    }
    if (plain == PlainTokens::after_begin) {
      ASSERT_NO_FATAL_FAILURE(run_plain(state, slots));
    }
    for (size_t i = 0; i < slots.size(); ++i) {
      const SlotProgress& progress = *slots[i];
      add_plain_rows(batch, progress);
      for (int64_t d = 0; d <= plans[i].k; ++d) {
        const int64_t position = progress.n_done + d;
        const int32_t token = progress.ref->tokens[position];
        batch.add(d == plans[i].e ? other_token(token) : token, static_cast<int32_t>(position), progress.slot, true);
      }
    }
    std::vector<float> logits;
    const Status status = ctx_->forward(batch, state, logits);
    ASSERT_TRUE(status.is_ok()) << status.message();
    int64_t row = 0;
    for (size_t i = 0; i < slots.size(); ++i) {
      SlotProgress& progress = *slots[i];
      const RoundPlan& plan = plans[i];
      const std::string what = "verify k=" + std::to_string(plan.k) + " e=" + std::to_string(plan.e);
      for (int64_t p = progress.n_state; p < progress.n_done; ++p) {
        expect_row(logits, row++, progress, p, what + " plain");
      }
      for (int64_t d = 0; d <= plan.k; ++d, ++row) {
        if (d < plan.e) expect_row(logits, row, progress, progress.n_done + d, what);
      }
      const int64_t n_run = plan.k + 1;
      const int64_t n_keep = plan.keep_one_less && plan.e >= 2 ? plan.e - 1 : plan.e;
      EXPECT_EQ(txns[i].n_tokens(), n_run);
      auto committed = txns[i].commit(n_keep);
      ASSERT_TRUE(committed.is_ok()) << committed.status().message();
      EXPECT_EQ(committed->n_kept, n_keep);
      const bool restored = policy() == RollbackPolicy::checkpoint && n_keep < n_run;
      EXPECT_EQ(committed->n_rerun, restored ? n_keep : 0) << what;
      progress.n_state = restored ? progress.n_done : progress.n_done + n_keep;
      progress.n_done += plan.e;
    }
  }

  // The end of a sequence: after its outstanding plain tokens and a flush, the recurrent state equals the
  // reference's; so do the logits and state of one more plain token.
  void finish(state::ModelState& state, SlotProgress& progress) {
    ASSERT_NO_FATAL_FAILURE(run_plain(state, {&progress}));
    state.flush(progress.slot);
    EXPECT_TRUE(same_bytes(recurrent_bytes(state, progress.slot), progress.ref->states[progress.n_done - 1]))
        << "slot " << progress.slot << ": recurrent state after " << progress.n_done << " tokens";
    ++progress.n_done;
    ASSERT_NO_FATAL_FAILURE(run_plain(state, {&progress}));
    state.flush(progress.slot);
    EXPECT_TRUE(same_bytes(recurrent_bytes(state, progress.slot), progress.ref->states[progress.n_done - 1]))
        << "slot " << progress.slot << ": recurrent state after " << progress.n_done << " tokens";
  }
};

// Every draft length 1..8 with every rejection depth 0..k; plain tokens (checkpoint re-runs, a kept token left
// out of a commit) run in each of the three places PlainTokens lists.
TEST_P(Rollback, ExactAtEveryRejectionDepth) {
  const Reference ref = decode_plainly(sequence(200, 1));
  auto state = make_state(1);
  SlotProgress progress{0, &ref, 0, kPrompt};
  int round = 0;
  for (int64_t k = 1; k <= kMaxDraft; ++k) {
    for (int64_t e = 1; e <= k + 1; ++e, ++round) {
      ASSERT_NO_FATAL_FAILURE(verify_round(*state, {&progress}, {{k, e, round % 4 == 3}}, plain_tokens_of_round(round)))
          << "round " << round << " k=" << k << " e=" << e;
    }
  }
  finish(*state, progress);
}

// The draft-model pattern: a transaction of m one-token forwards (each continuing the last), then commit(j)
// for every j = 0..m; the next plain forward's logits match the reference. Tokens from j on are wrong, so
// keeping any of them would show. With replay, also on a working copy (a draft model's state).
TEST_P(Rollback, SeveralForwardsInOneTransaction) {
  const Reference ref = decode_plainly(sequence(64, 2));
  for (bool working_copy : {false, true}) {
    if (working_copy && policy() != RollbackPolicy::replay) continue;
    SCOPED_TRACE(working_copy ? "working copy" : "no working copy");
    state::StateOptions options{1, kCtx, policy(), kMaxTxn, 0};
    options.txn_working_copy = working_copy;
    state::ModelState state(model_->kv_specs(), model_->recurrent_specs(), options);
    SlotProgress progress{0, &ref, 0, kPrompt};
    ASSERT_NO_FATAL_FAILURE(run_plain(state, {&progress}));
    const int64_t m = 5;
    std::vector<float> logits;
    for (int64_t j = 0; j <= m; ++j) {
      auto txn = state.begin(0, static_cast<int32_t>(progress.n_done));
      ASSERT_TRUE(txn.is_ok()) << txn.status().message();
      for (int64_t t = 0; t < m; ++t) {
        const int64_t position = progress.n_done + t;
        model::Batch batch;
        batch.add(t < j ? ref.tokens[position] : other_token(ref.tokens[position]), static_cast<int32_t>(position),
                  0, true);
        const Status status = ctx_->forward(batch, state, logits);
        ASSERT_TRUE(status.is_ok()) << status.message();
        if (t < j) expect_row(logits, 0, progress, position, "draft forward " + std::to_string(t));
      }
      EXPECT_EQ(txn->n_tokens(), m);
      auto committed = txn->commit(j);
      ASSERT_TRUE(committed.is_ok()) << committed.status().message();
      const bool restored = policy() == RollbackPolicy::checkpoint && j < m;
      EXPECT_EQ(committed->n_rerun, restored ? j : 0) << "j=" << j;
      progress.n_state = restored ? progress.n_done : progress.n_done + j;
      progress.n_done += j + 1;  // the kept tokens and the next one
      ASSERT_NO_FATAL_FAILURE(run_plain(state, {&progress})) << "after commit(" << j << ")";
    }
    finish(state, progress);
  }
}

// llama.cpp's scheme: one plane per token a transaction may run, the current state among them (8 full copies
// at draft depth 7), the kept token's plane made current without a copy. So a transaction that ran a token
// per plane cannot be rolled back entirely: commit(0) is refused, and dropping it leaves the slot refused
// until it is reset, while the other slots go on.
class SnapshotPlanes : public Rollback {};

TEST_P(SnapshotPlanes, AreLlamaCppsScheme) {
  const Reference ref = decode_plainly(sequence(64, 7));
  auto state = make_state(2);
  const size_t slot_bytes_one = static_cast<size_t>(state->recurrent().slot_floats()) * sizeof(float);
  EXPECT_EQ(state->recurrent().n_planes(), kMaxTxn);
  EXPECT_EQ(state->bytes(1).snapshots, 2 * (kMaxTxn - 1) * slot_bytes_one);
  SlotProgress progress{0, &ref, 0, kPrompt};
  SlotProgress other{1, &ref, 0, kPrompt};
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress, &other}));
  const size_t copied_before = state->total_counters().bytes_copied;
  ASSERT_NO_FATAL_FAILURE(verify_round(*state, {&progress}, {{kMaxDraft, 4}}, PlainTokens::before_begin));
  EXPECT_EQ(state->total_counters().bytes_copied - copied_before,
            static_cast<size_t>(kMaxTxn) * slot_bytes_one)
      << "a verify round writes one plane per token and copies nothing back";

  const auto full_transaction = [&](int64_t first) {
    auto txn = state->begin(0, static_cast<int32_t>(first));
    EXPECT_TRUE(txn.is_ok()) << txn.status().message();
    model::Batch batch;
    for (int64_t d = 0; d < kMaxTxn; ++d) batch.add(ref.tokens[first + d], static_cast<int32_t>(first + d), 0, true);
    std::vector<float> logits;
    const Status status = ctx_->forward(batch, *state, logits);
    EXPECT_TRUE(status.is_ok()) << status.message();
    return std::move(txn).value();
  };
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  {
    state::Transaction txn = full_transaction(progress.n_done);
    auto refused = txn.commit(0);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_TRUE(contains(refused.status().message(), "cannot roll back all 9 tokens")) << refused.status().message();
  }  // dropped: the state before it is gone
  std::vector<float> logits;
  model::Batch batch;
  batch.add(ref.tokens[progress.n_done], static_cast<int32_t>(progress.n_done), 0, true);
  Status status = ctx_->forward(batch, *state, logits);
  ASSERT_FALSE(status.is_ok());
  EXPECT_TRUE(contains(status.message(), "slot 0: its recurrent state was lost")) << status.message();
  EXPECT_FALSE(state->begin(0, static_cast<int32_t>(progress.n_done)).is_ok());

  ++other.n_done;
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&other}));
  finish(*state, other);

  state->reset_slot(0);
  SlotProgress fresh{0, &ref, 0, kPrompt};
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&fresh}));
  ASSERT_NO_FATAL_FAILURE(verify_round(*state, {&fresh}, {{kMaxDraft, kMaxDraft + 1}}, PlainTokens::after_begin));
  finish(*state, fresh);
}

// Transactions that run nothing, or are dropped, must not disturb what the previous commit kept (with replay:
// records still pending, applied lazily by the next forward).
TEST_P(Rollback, EmptyAndDroppedTransactionsKeepThePreviousCommit) {
  const Reference ref = decode_plainly(sequence(64, 3));
  auto state = make_state(1);
  SlotProgress progress{0, &ref, 0, kPrompt};
  ASSERT_NO_FATAL_FAILURE(verify_round(*state, {&progress}, {{3, 3}}, PlainTokens::before_begin));
  {
    auto empty = state->begin(0, static_cast<int32_t>(progress.n_done));
    ASSERT_TRUE(empty.is_ok()) << empty.status().message();
    auto committed = empty->commit(0);
    ASSERT_TRUE(committed.is_ok()) << committed.status().message();
    EXPECT_EQ(committed->n_rerun, 0);
  }
  {
    auto dropped = state->begin(0, static_cast<int32_t>(progress.n_done));
    ASSERT_TRUE(dropped.is_ok()) << dropped.status().message();
  }
  ASSERT_NO_FATAL_FAILURE(verify_round(*state, {&progress}, {{4, 2}}, PlainTokens::in_verify_batch));
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  {
    // A dropped transaction that ran tokens rolls all of them back (no re-run: nothing was kept).
    auto dropped = state->begin(0, static_cast<int32_t>(progress.n_done));
    ASSERT_TRUE(dropped.is_ok()) << dropped.status().message();
    model::Batch batch;
    for (int64_t d = 0; d < 3; ++d) {
      batch.add(other_token(ref.tokens[progress.n_done + d]), static_cast<int32_t>(progress.n_done + d), 0, true);
    }
    std::vector<float> logits;
    ASSERT_TRUE(ctx_->forward(batch, *state, logits).is_ok());
  }
  ASSERT_NO_FATAL_FAILURE(verify_round(*state, {&progress}, {{2, 3}}, PlainTokens::after_begin));
  finish(*state, progress);
}

// Four slots, each with its own sequence, prompt length, draft length and error index, verified in one batch
// in an order that changes every round; each ends bit-identical to its own single-slot reference.
TEST_P(Rollback, SlotsVerifyTogetherInOneBatch) {
  constexpr int kSlots = 4;
  std::vector<Reference> refs;
  for (int s = 0; s < kSlots; ++s) refs.push_back(decode_plainly(sequence(72, 10 + s)));
  auto state = make_state(kSlots);
  std::vector<SlotProgress> progress;
  for (int s = 0; s < kSlots; ++s) progress.push_back({s, &refs[s], 0, kPrompt + s});
  std::vector<SlotProgress*> all;
  for (SlotProgress& p : progress) all.push_back(&p);
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, all));
  for (int round = 0; round < 10; ++round) {
    std::vector<SlotProgress*> order;
    std::vector<RoundPlan> plans;
    for (int i = 0; i < kSlots; ++i) {
      const int s = (i + round) % kSlots;
      const int64_t k = 1 + (round + 3 * s) % kMaxDraft;
      order.push_back(&progress[s]);
      plans.push_back({k, 1 + (round * 5 + 2 * s) % (k + 1), (round + s) % 4 == 3});
    }
    ASSERT_NO_FATAL_FAILURE(verify_round(*state, order, plans, plain_tokens_of_round(round))) << "round " << round;
  }
  for (SlotProgress& p : progress) finish(*state, p);
}

// Speculation with rollbacks on slot 1 while every other slot's state (checkpoint, KV rows, records or
// snapshots) holds 0x3e bytes: those bytes stay as they were, and slot 1 matches the unpoisoned reference, so
// they were not read either.
TEST_P(Rollback, OtherSlotsAreNeitherWrittenNorRead) {
  constexpr int kSlots = 4;
  const Reference ref = decode_plainly(sequence(80, 4));
  auto state = make_state(kSlots);
  std::vector<std::vector<uint8_t>> before(kSlots);
  for (int s = 0; s < kSlots; ++s) {
    if (s == 1) continue;
    poison_slot(*state, s);
    before[s] = slot_bytes(*state, s);
  }
  SlotProgress progress{1, &ref, 0, kPrompt};
  for (int round = 0; round < 12; ++round) {
    const int64_t k = 1 + (round * 3) % kMaxDraft;
    ASSERT_NO_FATAL_FAILURE(verify_round(*state, {&progress}, {{k, 1 + (round * 7) % (k + 1), round % 4 == 3}},
                                         plain_tokens_of_round(round)))
        << "round " << round;
  }
  finish(*state, progress);
  for (int s = 0; s < kSlots; ++s) {
    if (s != 1) {
      EXPECT_TRUE(same_bytes(slot_bytes(*state, s), before[s])) << "slot " << s << " was written";
    }
  }
}

// Each refusal is an error that names the numbers at fault, and leaves the slot's bytes and its transaction as
// they were: the sequence then goes on to the reference's final state.
TEST_P(Rollback, RefusalsLeaveTheStateUnchanged) {
  {
    state::ModelState plain(model_->kv_specs(), model_->recurrent_specs(), 1, kCtx);
    auto txn = plain.begin(0, 0);
    ASSERT_FALSE(txn.is_ok());
    EXPECT_TRUE(contains(txn.status().message(), "max_txn_tokens is 0")) << txn.status().message();
    state::ModelState none(model_->kv_specs(), model_->recurrent_specs(),
                           state::StateOptions{1, kCtx, RollbackPolicy::none, kMaxTxn, 0});
    auto refused = none.begin(0, 0);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_TRUE(contains(refused.status().message(), "'none'")) << refused.status().message();
  }

  const Reference ref = decode_plainly(sequence(64, 5));
  auto state = make_state(2);
  SlotProgress progress{0, &ref, 0, kPrompt};
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  const int64_t at = progress.n_done;
  const auto batch_at = [&](int64_t first, int64_t n) {
    model::Batch batch;
    for (int64_t p = first; p < first + n; ++p) batch.add(ref.tokens[p], static_cast<int32_t>(p), 0, true);
    return batch;
  };
  std::vector<float> logits;
  std::optional<state::Transaction> txn;
  {
    auto begun = state->begin(0, static_cast<int32_t>(at));
    ASSERT_TRUE(begun.is_ok()) << begun.status().message();
    txn.emplace(std::move(begun).value());
  }
  std::vector<uint8_t> bytes = slot_bytes(*state, 0);

  auto outside = state->begin(2, 0);
  ASSERT_FALSE(outside.is_ok());
  EXPECT_TRUE(contains(outside.status().message(), "slot 2 is outside [0, 2)")) << outside.status().message();
  auto again = state->begin(0, static_cast<int32_t>(at));
  ASSERT_FALSE(again.is_ok());
  EXPECT_TRUE(contains(again.status().message(), "slot 0 already has an open transaction")) << again.status().message();

  Status status = ctx_->forward(batch_at(at, kMaxTxn + 1), *state, logits);
  ASSERT_FALSE(status.is_ok());
  EXPECT_TRUE(contains(status.message(), "10 more tokens") && contains(status.message(), "limit of 9") &&
              contains(status.message(), "(0 already run)"))
      << status.message();

  status = ctx_->forward(batch_at(at + 1, 2), *state, logits);
  ASSERT_FALSE(status.is_ok());
  EXPECT_TRUE(contains(status.message(), "continues at position " + std::to_string(at)) &&
              contains(status.message(), "brings position " + std::to_string(at + 1)))
      << status.message();
  EXPECT_TRUE(same_bytes(slot_bytes(*state, 0), bytes)) << "refused forwards wrote to the slot";
  EXPECT_EQ(txn->n_tokens(), 0);

  status = ctx_->forward(batch_at(at, 3), *state, logits);
  ASSERT_TRUE(status.is_ok()) << status.message();
  for (int64_t d = 0; d < 3; ++d) expect_row(logits, d, progress, at + d, "first forward of the transaction");
  bytes = slot_bytes(*state, 0);

  status = ctx_->forward(batch_at(at + 4, 1), *state, logits);
  ASSERT_FALSE(status.is_ok());
  EXPECT_TRUE(contains(status.message(), "continues at position " + std::to_string(at + 3)) &&
              contains(status.message(), "brings position " + std::to_string(at + 4)))
      << status.message();
  status = ctx_->forward(batch_at(at - 1, 1), *state, logits);
  ASSERT_FALSE(status.is_ok()) << "a plain token after the transaction ran tokens was accepted";
  EXPECT_TRUE(contains(status.message(), "slot 0: plain tokens after its transaction started")) << status.message();
  status = ctx_->forward(batch_at(at + 3, 7), *state, logits);
  ASSERT_FALSE(status.is_ok());
  EXPECT_TRUE(contains(status.message(), "7 more tokens") && contains(status.message(), "limit of 9") &&
              contains(status.message(), "(3 already run)"))
      << status.message();
  for (int64_t n_keep : {int64_t{4}, int64_t{-1}}) {
    auto committed = txn->commit(n_keep);
    ASSERT_FALSE(committed.is_ok());
    EXPECT_TRUE(contains(committed.status().message(), "cannot keep " + std::to_string(n_keep)) &&
                contains(committed.status().message(), "ran 3"))
        << committed.status().message();
  }
  EXPECT_TRUE(same_bytes(slot_bytes(*state, 0), bytes)) << "refused operations wrote to the slot";
  EXPECT_EQ(txn->n_tokens(), 3);

  auto committed = txn->commit(2);
  ASSERT_TRUE(committed.is_ok()) << committed.status().message();
  const bool restored = policy() == RollbackPolicy::checkpoint;
  EXPECT_EQ(committed->n_rerun, restored ? 2 : 0);
  progress.n_state = restored ? at : at + 2;
  progress.n_done = at + 2;
  bytes = slot_bytes(*state, 0);
  committed = txn->commit(1);
  ASSERT_FALSE(committed.is_ok());
  EXPECT_TRUE(contains(committed.status().message(), "slot 0: the transaction was already committed"))
      << committed.status().message();
  EXPECT_TRUE(same_bytes(slot_bytes(*state, 0), bytes)) << "a second commit wrote to the slot";

  // The committed handle must not act on the slot's next transaction, neither by commit nor when destroyed.
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  auto next = state->begin(0, static_cast<int32_t>(progress.n_done));
  ASSERT_TRUE(next.is_ok()) << next.status().message();
  status = ctx_->forward(batch_at(progress.n_done, 2), *state, logits);
  ASSERT_TRUE(status.is_ok()) << status.message();
  committed = txn->commit(0);
  EXPECT_FALSE(committed.is_ok()) << "a committed transaction's handle committed the slot's next transaction";
  txn.reset();
  ASSERT_TRUE(state->in_transaction(0)) << "a committed transaction's handle ended the slot's next one";
  EXPECT_EQ(next->n_tokens(), 2);
  committed = next->commit(2);
  ASSERT_TRUE(committed.is_ok()) << committed.status().message();
  EXPECT_EQ(committed->n_rerun, 0);
  progress.n_state = progress.n_done = progress.n_done + 2;
  finish(*state, progress);
}

std::vector<Param> params() {
  std::vector<Param> all;
  int a = 0;
  for (std::string_view arch : model::arch_names()) {
    if (!model::find_arch(arch)->recurrent) continue;
    int p = 0;
    for (RollbackPolicy policy : {RollbackPolicy::replay, RollbackPolicy::snapshot, RollbackPolicy::checkpoint}) {
      if (test::in_sanitizer_sample({a, p++}, 3)) all.push_back({arch.data(), policy});  // names are literals
    }
    ++a;
  }
  return all;
}

std::string param_name(const ::testing::TestParamInfo<Param>& param_info) {
  std::string name =
      std::string(param_info.param.model) + "_" + std::string(state::rollback_policy_name(param_info.param.policy));
  std::replace(name.begin(), name.end(), '-', '_');  // falcon-h1
  return name;
}

std::vector<Param> snapshot_params() {
  std::vector<Param> snapshot;
  for (const Param& param : params()) {
    if (param.policy == RollbackPolicy::snapshot) snapshot.push_back(param);
  }
  return snapshot;
}

INSTANTIATE_TEST_SUITE_P(Models, Rollback, ::testing::ValuesIn(params()), param_name);
INSTANTIATE_TEST_SUITE_P(Models, SnapshotPlanes, ::testing::ValuesIn(snapshot_params()), param_name);

}  // namespace
}  // namespace rwd
