// ModelState: all per-slot state of one model — KV rows of the attention layers and the recurrent
// checkpoint of the recurrent layers — so a forward and the engine pass one object around.
#pragma once

#include <vector>

#include "state/kv_cache.h"
#include "state/recurrent_cache.h"

namespace rwd::state {

class ModelState {
 public:
  ModelState(std::vector<KvLayerSpec> kv_layers, std::vector<RecurrentSpec> recurrent_layers, int n_slots,
             int64_t n_ctx)
      : kv_(std::move(kv_layers), n_slots, n_ctx), recurrent_(std::move(recurrent_layers), n_slots) {}

  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }
  RecurrentCache& recurrent() { return recurrent_; }
  const RecurrentCache& recurrent() const { return recurrent_; }
  int n_slots() const { return kv_.n_slots(); }
  int64_t n_ctx() const { return kv_.n_ctx(); }

  // A new sequence in `slot`: recurrent state back to zero. KV rows need no reset, positions restart at 0.
  void reset_slot(int slot) { recurrent_.reset(slot); }

 private:
  KvCache kv_;
  RecurrentCache recurrent_;
};

}  // namespace rwd::state
