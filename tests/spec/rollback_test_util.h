// Shared by the rollback and rewind tests: the token sequences they decode, byte views of a slot's state, and
// the slot's every region (checkpoint, KV rows, record log, snapshots or backup, lagging checkpoint and ring)
// for the "unchanged" and poison checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "state/model_state.h"

namespace rwd::spec_test {

// Printable ASCII ids: the generated models have non-zero output rows only for those.
inline std::vector<int32_t> sequence(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(32 + (i * 31 + salt * 7 + 3) % 95);
  return ids;
}

// A printable token other than `token`: the wrong draft of a round.
inline int32_t other_token(int32_t token) { return 32 + (token - 32 + 41) % 95; }

inline std::vector<uint8_t> as_bytes(const float* data, int64_t n_floats) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(bytes, bytes + n_floats * sizeof(float));
}

inline ::testing::AssertionResult same_bytes(const std::vector<uint8_t>& found, const std::vector<uint8_t>& expected) {
  if (found.size() != expected.size()) {
    return ::testing::AssertionFailure() << found.size() << " bytes, expected " << expected.size();
  }
  const auto diff = std::mismatch(found.begin(), found.end(), expected.begin());
  if (diff.first == found.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "first difference at byte " << (diff.first - found.begin()) << " of "
                                       << found.size();
}

// Every region the state keeps for a slot: checkpoint, KV rows, the policy's log, snapshots or backup, and the
// rewind depth's lagging checkpoint and ring. fn(data, n_bytes) sees only non-empty regions.
template <typename Fn>
void for_each_slot_region(state::ModelState& state, int slot, Fn&& byte_fn) {
  const auto fn = [&](float* data, int64_t n_floats) {
    if (n_floats > 0) byte_fn(static_cast<void*>(data), static_cast<size_t>(n_floats) * sizeof(float));
  };
  state::RecurrentCache& rec = state.recurrent();
  fn(rec.slot_data(slot), rec.slot_floats());
  state::KvCache& kv = state.kv();
  for (int il = 0; il < kv.n_layers(); ++il) {
    // The rows allocated so far (they grow as positions are written): a write to an unused slot shows as growth.
    if (kv.k_bytes_allocated(il, slot) > 0) byte_fn(static_cast<void*>(kv.k_bytes(il, slot)), kv.k_bytes_allocated(il, slot));
    if (kv.v_bytes_allocated(il, slot) > 0) byte_fn(static_cast<void*>(kv.v_bytes(il, slot)), kv.v_bytes_allocated(il, slot));
  }
  const auto records = [&](const state::LayerRecords& log, const state::RecurrentSpec& spec, int64_t capacity) {
    fn(log.conv_in, capacity * spec.conv_channels);
    fn(log.k, capacity * spec.record_k_floats());
    fn(log.u, capacity * spec.record_u_floats());
    fn(log.decay, capacity * spec.record_decay_floats());
  };
  for (int rl = 0; rl < rec.n_layers(); ++rl) {
    if (state.record_capacity() > 0) records(state.records(rl, slot), rec.spec(rl), state.record_capacity());
    if (state.rewind_depth() > 0) records(state.ring_records(rl, slot), rec.spec(rl), state.rewind_depth());
  }
  for (int plane = 0; plane < rec.n_planes(); ++plane) {  // the snapshot policy's planes
    if (plane != rec.current_plane(slot)) fn(rec.plane_data(slot, plane), rec.slot_floats());
  }
  if (state.policy() == state::RollbackPolicy::checkpoint && state.max_txn_tokens() > 0 &&
      state.has_recurrent_layers()) {
    fn(state.backup(slot), rec.slot_floats());
  }
  if (state.rewind_depth() > 0) fn(state.lagging_checkpoint(slot), rec.slot_floats());
}

inline std::vector<uint8_t> slot_bytes(state::ModelState& state, int slot) {
  std::vector<uint8_t> bytes;
  for_each_slot_region(state, slot, [&](const void* data, size_t n_bytes) {
    const auto* region = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), region, region + n_bytes);
  });
  return bytes;
}

inline void poison_slot(state::ModelState& state, int slot) {
  for_each_slot_region(state, slot, [](void* data, size_t n_bytes) { std::memset(data, 0x3e, n_bytes); });
}

struct Param {
  const char* model;  // tests/data/<model>-tiny-f32.gguf
  state::RollbackPolicy policy;
};

inline void PrintTo(const Param& param, std::ostream* os) {
  *os << param.model << " " << state::rollback_policy_name(param.policy);
}

// One generated test model with a 2-thread pool and a forward context for batches of up to max_batch tokens.
class HybridModelTest : public ::testing::TestWithParam<Param> {
 protected:
  void load(int64_t max_batch) {
    auto model = model::Model::load(std::string(REWIND_TEST_DATA) + "/" + GetParam().model + "-tiny-f32.gguf");
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    model_ = std::move(model).value();
    pool_ = std::make_unique<ThreadPool>(2);
    ctx_ = std::make_unique<model::ForwardContext>(*model_, *pool_, max_batch);
    n_vocab_ = model_->hparams().n_vocab;
  }

  state::RollbackPolicy policy() const { return GetParam().policy; }

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<model::ForwardContext> ctx_;
  int64_t n_vocab_ = 0;
};

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace rwd::spec_test
