// links: rewind_model
// Rolling back committed tokens (DESIGN §5, the lagging checkpoint) on the generated hybrid models under the
// replay, snapshot and checkpoint policies with a rewind depth of 8. After prefill chunks, plain decoding and
// speculative rounds (partial acceptance, checkpoint re-runs, records still pending from a lazy commit),
// rolling back any d = 0..8 tokens must leave conv windows and recurrent states bit-identical to a fresh run
// that decoded only the kept tokens, and decoding on from there must produce its logits bit for bit. Refusals
// name the numbers at fault and leave every byte of the slot as it was; slots poisoned with 0x3e bytes (their
// lagging checkpoints and rings included) stay unread and unwritten.
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
constexpr int64_t kMaxTxn = 1 + kMaxDraft;
constexpr int64_t kDepth = 8;
constexpr int64_t kPrompt = 23;  // prefilled in one forward: longer than the ring
constexpr int64_t kMaxBatch = 64;

// A fresh run: the sequence decoded one token per forward by a state without transactions or rewinding.
struct Reference {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;    // [position] -> [n_vocab], from the forward of that position
  std::vector<std::vector<uint8_t>> states;  // [position] -> the recurrent state after it
};

// One slot's way through its reference sequence.
struct SlotProgress {
  int slot;
  const Reference* ref;
  int64_t n_state = 0;  // tokens the slot's state holds (committed)
  int64_t n_done = 0;   // tokens accepted; those past n_state are still to be run as plain tokens
};

// Where a round runs the slot's outstanding plain tokens (see test_rollback.cpp).
enum class PlainTokens { before_begin, after_begin, in_verify_batch };

struct RoundPlan {
  int64_t k;                   // drafts
  int64_t e;                   // index of the first wrong one (k + 1: all right)
  bool keep_one_less = false;  // keep e - 1 tokens and run the last accepted one plainly later
  PlainTokens plain = PlainTokens::before_begin;
};

class Rewind : public HybridModelTest {
 protected:
  void SetUp() override { load(kMaxBatch); }

  std::unique_ptr<state::ModelState> make_state(int n_slots, int64_t depth) const {
    return std::make_unique<state::ModelState>(model_->kv_specs(), model_->recurrent_specs(),
                                               state::StateOptions{n_slots, kCtx, policy(), kMaxTxn, depth});
  }

  Reference decode_plainly(std::vector<int32_t> tokens) {
    Reference ref;
    ref.tokens = std::move(tokens);
    state::ModelState plain(model_->kv_specs(), model_->recurrent_specs(), 1, kCtx);
    model::Batch batch;
    std::vector<float> logits;
    for (size_t i = 0; i < ref.tokens.size(); ++i) {
      batch.clear();
      batch.add(ref.tokens[i], static_cast<int32_t>(i), 0, true);
      const Status status = ctx_->forward(batch, plain, logits);
      EXPECT_TRUE(status.is_ok()) << status.message();
      ref.logits.push_back(logits);
      ref.states.push_back(as_bytes(plain.recurrent().slot_data(0), plain.recurrent().slot_floats()));
    }
    return ref;
  }

  void expect_row(const std::vector<float>& logits, int64_t row, const SlotProgress& progress, int64_t position,
                  const std::string& what) {
    ASSERT_LE((row + 1) * n_vocab_, static_cast<int64_t>(logits.size()));
    EXPECT_EQ(0, std::memcmp(logits.data() + row * n_vocab_, progress.ref->logits[position].data(),
                             n_vocab_ * sizeof(float)))
        << what << ": slot " << progress.slot << " position " << position << " differs from the fresh run";
  }

  // Runs the slots' outstanding plain tokens in one forward, in chunks of at most `chunk` tokens per slot and
  // forward, checking their logits.
  void run_plain(state::ModelState& state, const std::vector<SlotProgress*>& slots, int64_t chunk = kMaxBatch) {
    for (;;) {
      model::Batch batch;
      std::vector<std::pair<SlotProgress*, int64_t>> runs;
      for (SlotProgress* progress : slots) {
        const int64_t n = std::min(chunk, progress->n_done - progress->n_state);
        for (int64_t p = progress->n_state; p < progress->n_state + n; ++p) {
          batch.add(progress->ref->tokens[p], static_cast<int32_t>(p), progress->slot, true);
        }
        runs.push_back({progress, n});
      }
      if (batch.size() == 0) return;
      std::vector<float> logits;
      const Status status = ctx_->forward(batch, state, logits);
      ASSERT_TRUE(status.is_ok()) << status.message();
      int64_t row = 0;
      for (auto& [progress, n] : runs) {
        for (int64_t p = progress->n_state; p < progress->n_state + n; ++p) {
          expect_row(logits, row++, *progress, p, "plain");
        }
        progress->n_state += n;
      }
    }
  }

  // One verify round on one slot: a transaction at its accepted length verifies [last accepted, d_1..d_k].
  void verify_round(state::ModelState& state, SlotProgress& progress, const RoundPlan& plan) {
    if (plan.plain == PlainTokens::before_begin) {
      ASSERT_NO_FATAL_FAILURE(run_plain(state, {&progress}));
    }
    auto begun = state.begin(progress.slot, static_cast<int32_t>(progress.n_done));
    ASSERT_TRUE(begun.is_ok()) << begun.status().message();
    state::Transaction txn = std::move(begun).value();
    if (plan.plain == PlainTokens::after_begin) {
      ASSERT_NO_FATAL_FAILURE(run_plain(state, {&progress}));
    }
    model::Batch batch;
    for (int64_t p = progress.n_state; p < progress.n_done; ++p) {
      batch.add(progress.ref->tokens[p], static_cast<int32_t>(p), progress.slot, true);
    }
    for (int64_t d = 0; d <= plan.k; ++d) {
      const int64_t position = progress.n_done + d;
      const int32_t token = progress.ref->tokens[position];
      batch.add(d == plan.e ? other_token(token) : token, static_cast<int32_t>(position), progress.slot, true);
    }
    std::vector<float> logits;
    const Status status = ctx_->forward(batch, state, logits);
    ASSERT_TRUE(status.is_ok()) << status.message();
    const std::string what = "verify k=" + std::to_string(plan.k) + " e=" + std::to_string(plan.e);
    int64_t row = 0;
    for (int64_t p = progress.n_state; p < progress.n_done; ++p) expect_row(logits, row++, progress, p, what);
    for (int64_t d = 0; d <= plan.k; ++d, ++row) {
      if (d < plan.e) expect_row(logits, row, progress, progress.n_done + d, what);
    }
    const int64_t n_keep = plan.keep_one_less && plan.e >= 2 ? plan.e - 1 : plan.e;
    auto committed = txn.commit(n_keep);
    ASSERT_TRUE(committed.is_ok()) << committed.status().message();
    const bool restored = policy() == RollbackPolicy::checkpoint && n_keep < plan.k + 1;
    EXPECT_EQ(committed->n_rerun, restored ? n_keep : 0) << what;
    progress.n_state = restored ? progress.n_done : progress.n_done + n_keep;
    progress.n_done += plan.e;
  }

  // Speculative rounds of every kind, chosen by `salt`: every third one accepts all of its drafts (the
  // checkpoint policy then keeps the transaction's own records instead of re-running).
  void speculate(state::ModelState& state, SlotProgress& progress, int n_rounds, int salt) {
    for (int round = 0; round < n_rounds; ++round) {
      const int r = round + salt;
      const int64_t k = 1 + (r * 3) % kMaxDraft;
      const int64_t e = r % 3 == 1 ? k + 1 : 1 + (r * 5) % (k + 1);
      const RoundPlan plan{k, e, r % 4 == 3, static_cast<PlainTokens>(r % 3)};
      ASSERT_NO_FATAL_FAILURE(verify_round(state, progress, plan)) << "round " << round << " salt " << salt;
    }
  }

  // The slot's conv windows and recurrent states (pending records flushed first) equal the fresh run's after
  // its n_state tokens, layer by layer.
  void expect_fresh_state(state::ModelState& state, const SlotProgress& progress, const std::string& what) {
    ASSERT_GT(progress.n_state, 0);
    state.flush(progress.slot);
    state::RecurrentCache& rec = state.recurrent();
    const std::vector<uint8_t>& expected = progress.ref->states[progress.n_state - 1];
    const auto part = [&](int64_t offset, int64_t n_floats) {
      return std::vector<uint8_t>(expected.begin() + offset * sizeof(float),
                                  expected.begin() + (offset + n_floats) * sizeof(float));
    };
    for (int rl = 0; rl < rec.n_layers(); ++rl) {
      const state::RecurrentSpec& spec = rec.spec(rl);
      EXPECT_TRUE(same_bytes(as_bytes(rec.conv_window(rl, progress.slot), spec.conv_floats()),
                             part(rec.conv_offset(rl), spec.conv_floats())))
          << what << ": slot " << progress.slot << " conv window of recurrent layer " << rl << " after "
          << progress.n_state << " tokens";
      EXPECT_TRUE(same_bytes(as_bytes(rec.ssm_state(rl, progress.slot), spec.ssm_floats()),
                             part(rec.ssm_offset(rl), spec.ssm_floats())))
          << what << ": slot " << progress.slot << " recurrent state of layer " << rl << " after " << progress.n_state
          << " tokens";
    }
  }

  // Rolls back d committed tokens and checks the result against the fresh run of the kept ones.
  void rewind_and_check(state::ModelState& state, SlotProgress& progress, int64_t d, const std::string& what) {
    const int64_t kept = state.rewindable(progress.slot);
    const Status status = state.rewind(progress.slot, d);
    ASSERT_TRUE(status.is_ok()) << what << ": " << status.message();
    progress.n_state -= d;
    progress.n_done = progress.n_state;
    EXPECT_EQ(state.rewindable(progress.slot), kept - d) << what;
    ASSERT_NO_FATAL_FAILURE(expect_fresh_state(state, progress, what + ", rewound " + std::to_string(d)));
  }
};

// For every d = 0..R on its own state: a long prompt chunk, speculative rounds, then a rewind of d tokens (with
// even d after the outstanding re-runs, with odd d before them: tokens kept but not yet run are not committed),
// decoding on from the kept tokens (the first logits after the rewind included), more rounds and a second
// rewind of everything the ring holds.
TEST_P(Rewind, EveryDepthIsExact) {
  const Reference ref = decode_plainly(sequence(140, 1));
  for (int64_t d = 0; d <= kDepth; ++d) {
    const std::string what = "d=" + std::to_string(d);
    auto state = make_state(1, kDepth);
    SlotProgress progress{0, &ref, 0, kPrompt};
    ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
    EXPECT_EQ(state->rewindable(0), kDepth);
    ASSERT_NO_FATAL_FAILURE(speculate(*state, progress, 4 + static_cast<int>(d % 3), static_cast<int>(d)));
    if (d % 2 == 0) {
      ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
    }
    EXPECT_EQ(state->rewindable(0), std::min(kDepth, progress.n_state)) << what;
    ASSERT_NO_FATAL_FAILURE(rewind_and_check(*state, progress, d, what));

    progress.n_done += 2;
    ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}, 1));
    ASSERT_NO_FATAL_FAILURE(speculate(*state, progress, 3, static_cast<int>(d) + 5));
    ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
    ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, progress, what + ", decoding on"));
    ASSERT_NO_FATAL_FAILURE(rewind_and_check(*state, progress, state->rewindable(0), what + ", second rewind"));
    progress.n_done += 1;
    ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
    ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, progress, what + ", after the second rewind"));
  }
}

// Two slots prefill in shared forwards with chunks shorter and longer than the ring (records fold into the
// lagging checkpoint from the ring and from the chunk itself, and the ring wraps), then roll back d and R - d.
TEST_P(Rewind, LongPrefillChunksThenRewind) {
  const Reference ref0 = decode_plainly(sequence(64, 2));
  const Reference ref1 = decode_plainly(sequence(64, 3));
  for (int64_t d = 0; d <= kDepth; ++d) {
    const std::string what = "d=" + std::to_string(d);
    auto state = make_state(2, kDepth);
    SlotProgress first{0, &ref0, 0, 0};
    SlotProgress second{1, &ref1, 0, 0};
    for (const auto& [n0, n1] : {std::pair{5, 30}, std::pair{30, 5}, std::pair{1, 1}, std::pair{1, 3},
                                 std::pair{6, 11}}) {
      first.n_done += n0;
      second.n_done += n1;
      ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&first, &second}));
    }
    ASSERT_NO_FATAL_FAILURE(rewind_and_check(*state, first, d, what + " slot 0"));
    ASSERT_NO_FATAL_FAILURE(rewind_and_check(*state, second, kDepth - d, what + " slot 1"));
    ++first.n_done;
    second.n_done += 12;
    ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&first, &second}));
    ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, first, what + " slot 0, decoding on"));
    ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, second, what + " slot 1, decoding on"));
  }
}

// Each refusal names the numbers at fault and leaves every byte of the slot, and what it can roll back, as
// they were; the sequence then goes on exactly.
TEST_P(Rewind, RefusalsLeaveTheStateUnchanged) {
  const Reference ref = decode_plainly(sequence(64, 4));
  {
    auto off = make_state(1, 0);
    SlotProgress progress{0, &ref, 0, 6};
    ASSERT_NO_FATAL_FAILURE(run_plain(*off, {&progress}));
    const std::vector<uint8_t> bytes = slot_bytes(*off, 0);
    const Status status = off->rewind(0, 1);
    ASSERT_FALSE(status.is_ok());
    EXPECT_TRUE(contains(status.message(), "slot 0: cannot roll back committed tokens") &&
                contains(status.message(), "--rewind-depth 0"))
        << status.message();
    EXPECT_EQ(off->rewindable(0), 0);
    EXPECT_TRUE(same_bytes(slot_bytes(*off, 0), bytes));
  }

  auto state = make_state(2, kDepth);
  SlotProgress progress{0, &ref, 0, 5};
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  const auto expect_refused = [&](int slot, int64_t n, const std::vector<std::string>& parts) {
    const std::vector<uint8_t> bytes = slot_bytes(*state, 0);
    const int64_t kept = state->rewindable(0);
    const Status status = state->rewind(slot, n);
    ASSERT_FALSE(status.is_ok()) << "rewind(" << slot << ", " << n << ") was accepted";
    for (const std::string& part : parts) EXPECT_TRUE(contains(status.message(), part)) << status.message();
    EXPECT_TRUE(same_bytes(slot_bytes(*state, 0), bytes)) << "a refused rewind wrote to the slot";
    EXPECT_EQ(state->rewindable(0), kept);
  };
  expect_refused(0, 6, {"slot 0: cannot roll back 6 committed tokens, only the last 5 are kept (--rewind-depth 8)"});
  expect_refused(2, 1, {"slot 2 is outside [0, 2)"});
  progress.n_done = 30;
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}, 4));
  expect_refused(0, kDepth + 1,
                 {"slot 0: cannot roll back 9 committed tokens, only the last 8 are kept (--rewind-depth 8)"});
  expect_refused(0, 31, {"cannot roll back 31 committed tokens, only the last 8"});
  expect_refused(0, -1, {"slot 0: cannot roll back -1 committed tokens"});
  {
    // A transaction with pending records (replay) and tokens of its own run.
    ASSERT_NO_FATAL_FAILURE(verify_round(*state, progress, {3, 3, false, PlainTokens::before_begin}));
    auto txn = state->begin(0, static_cast<int32_t>(progress.n_done));
    ASSERT_TRUE(txn.is_ok()) << txn.status().message();
    expect_refused(0, 1, {"slot 0: cannot roll back committed tokens while a transaction is open"});
    model::Batch batch;
    for (int64_t p = progress.n_state; p < progress.n_done + 3; ++p) {
      batch.add(ref.tokens[p], static_cast<int32_t>(p), 0, true);
    }
    std::vector<float> logits;
    const Status status = ctx_->forward(batch, *state, logits);
    ASSERT_TRUE(status.is_ok()) << status.message();
    expect_refused(0, 1, {"while a transaction is open"});
    ASSERT_TRUE(txn->commit(3).is_ok());
    progress.n_state = progress.n_done = progress.n_done + 3;
  }
  ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, progress, "after the refusals"));
  ASSERT_NO_FATAL_FAILURE(rewind_and_check(*state, progress, kDepth, "after the refusals"));
  expect_refused(0, 1, {"cannot roll back 1 committed tokens, only the last 0 are kept"});
  progress.n_done += 2;
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, progress, "decoding on"));
}

// reset_slot starts a new sequence: nothing to roll back, and rolling back all of the new one's tokens is the
// zero state.
TEST_P(Rewind, ResetEmptiesTheRing) {
  const Reference ref = decode_plainly(sequence(32, 5));
  auto state = make_state(1, kDepth);
  SlotProgress progress{0, &ref, 0, 12};
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  state->reset_slot(0);
  EXPECT_EQ(state->rewindable(0), 0);
  progress = {0, &ref, 0, 3};
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  ASSERT_TRUE(state->rewind(0, 3).is_ok());
  const std::vector<float> zeros(static_cast<size_t>(state->recurrent().slot_floats()), 0.0f);
  EXPECT_TRUE(same_bytes(as_bytes(state->recurrent().slot_data(0), state->recurrent().slot_floats()),
                         as_bytes(zeros.data(), state->recurrent().slot_floats())));
  progress.n_state = 0;
  progress.n_done = 4;
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, progress, "after a reset and a full rewind"));
}

// Speculation and rewinds on slot 1 while every other slot's state, lagging checkpoint and ring hold 0x3e
// bytes: those stay as they were, and slot 1 matches the fresh run, so they were not read either.
TEST_P(Rewind, OtherSlotsAreNeitherWrittenNorRead) {
  constexpr int kSlots = 4;
  const Reference ref = decode_plainly(sequence(140, 6));
  auto state = make_state(kSlots, kDepth);
  std::vector<std::vector<uint8_t>> before(kSlots);
  for (int s = 0; s < kSlots; ++s) {
    if (s == 1) continue;
    poison_slot(*state, s);
    before[s] = slot_bytes(*state, s);
  }
  SlotProgress progress{1, &ref, 0, kPrompt};
  ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  for (int cycle = 0; cycle < 4; ++cycle) {
    ASSERT_NO_FATAL_FAILURE(speculate(*state, progress, 3, cycle));
    ASSERT_NO_FATAL_FAILURE(rewind_and_check(*state, progress, 1 + cycle * 2, "cycle " + std::to_string(cycle)));
    progress.n_done += 1;
    ASSERT_NO_FATAL_FAILURE(run_plain(*state, {&progress}));
  }
  ASSERT_NO_FATAL_FAILURE(expect_fresh_state(*state, progress, "at the end"));
  for (int s = 0; s < kSlots; ++s) {
    if (s != 1) {
      EXPECT_TRUE(same_bytes(slot_bytes(*state, s), before[s])) << "slot " << s << " was written";
    }
  }
}

// The rewind bytes: per slot a lagging checkpoint and R records per layer, plus (snapshot, checkpoint) the
// transaction log they keep only for the ring; nothing at all without a rewind depth.
TEST_P(Rewind, BytesCountTheLaggingCheckpointAndRing) {
  constexpr int kSlots = 3;
  const state::StateBytes off = make_state(kSlots, 0)->bytes(2);
  const state::StateBytes on = make_state(kSlots, kDepth)->bytes(2);
  EXPECT_EQ(off.rewind, 0u);
  int64_t record_floats = 0;
  for (const state::RecurrentSpec& spec : model_->recurrent_specs()) record_floats += spec.record_floats();
  const int64_t slot_floats = make_state(1, 0)->recurrent().slot_floats();
  const int64_t log_entries = policy() == RollbackPolicy::replay ? 0 : kMaxTxn;
  EXPECT_EQ(on.rewind,
            static_cast<size_t>(kSlots * (slot_floats + (kDepth + log_entries) * record_floats)) * sizeof(float));
  EXPECT_EQ(on.total() - on.rewind, off.total());
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

INSTANTIATE_TEST_SUITE_P(Models, Rewind, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& param_info) {
                           std::string name = std::string(param_info.param.model) + "_" +
                                              std::string(state::rollback_policy_name(param_info.param.policy));
                           std::replace(name.begin(), name.end(), '-', '_');  // falcon-h1
                           return name;
                         });

// A model without recurrent layers: rewinding is only the caller's length; the state counts what may be
// rolled back and keeps no memory for it.
TEST(RewindAttentionOnly, CountsTokensAndKeepsNoMemory) {
  auto model = model::Model::load(std::string(REWIND_TEST_DATA) + "/qwen3-tiny-f32.gguf");
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(2);
  model::ForwardContext ctx(**model, pool, kMaxBatch);
  state::ModelState state((*model)->kv_specs(), (*model)->recurrent_specs(),
                          state::StateOptions{1, kCtx, RollbackPolicy::replay, kMaxTxn, kDepth});
  EXPECT_EQ(state.bytes(2).rewind, 0u);
  const std::vector<int32_t> tokens = sequence(20, 7);
  model::Batch batch;
  std::vector<float> logits;
  for (int i = 0; i < 12; ++i) batch.add(tokens[i], i, 0, i == 11);
  ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
  EXPECT_EQ(state.rewindable(0), kDepth);
  ASSERT_TRUE(state.rewind(0, 5).is_ok());
  EXPECT_EQ(state.rewindable(0), kDepth - 5);
  {
    auto txn = state.begin(0, 7);
    ASSERT_TRUE(txn.is_ok()) << txn.status().message();
    batch.clear();
    for (int i = 7; i < 10; ++i) batch.add(tokens[i], i, 0, true);
    ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
    ASSERT_TRUE(txn->commit(2).is_ok());
  }
  EXPECT_EQ(state.rewindable(0), kDepth - 5 + 2);
  const Status refused = state.rewind(0, kDepth);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_TRUE(contains(refused.message(), "only the last 5 are kept")) << refused.message();
}

}  // namespace
}  // namespace rwd
