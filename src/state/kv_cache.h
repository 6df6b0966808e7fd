// KvCache: the K and V rows of every attention layer for every slot, float32, one row per position.
// Rollback of an attention layer is truncation (set the slot's length); rows past a slot's length are
// never read. It owns no recurrent state (that is the recurrent cache, with its records) and no policy.
#pragma once

#include <cstdint>
#include <vector>

#include "base/check.h"

namespace rwd::state {

struct KvLayerSpec {
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
};

class KvCache {
 public:
  // One spec per attention layer (indexed 0..n_attention_layers-1 by the model); n_ctx positions per slot.
  KvCache(std::vector<KvLayerSpec> layers, int n_slots, int64_t n_ctx);

  int n_slots() const { return n_slots_; }
  int64_t n_ctx() const { return n_ctx_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }

  // Row of position `pos` of a slot in attention layer `il`: [n_head_kv, head_dim].
  float* k_row(int il, int slot, int64_t pos) { return k_data(il, slot) + pos * k_row_floats(il); }
  float* v_row(int il, int slot, int64_t pos) { return v_data(il, slot) + pos * v_row_floats(il); }
  // All rows of a slot, [n_ctx, n_head_kv, head_dim] (read only positions < length).
  float* k_data(int il, int slot);
  float* v_data(int il, int slot);
  int64_t k_row_floats(int il) const { return layers_[il].n_head_kv * layers_[il].head_dim_k; }
  int64_t v_row_floats(int il) const { return layers_[il].n_head_kv * layers_[il].head_dim_v; }

  // Bytes of K and V for one slot over all layers at full context.
  size_t bytes_per_slot() const;

  // Prompt reuse across slots: a slot's rows of positions [0, n_tokens) in every layer, as one block (per
  // layer, its K rows then its V rows), and the first n_tokens rows of such a block, saved with n_saved rows,
  // back into a slot.
  size_t prefix_floats(int64_t n_tokens) const;
  void save_prefix(int slot, int64_t n_tokens, float* block) const;
  void restore_prefix(int slot, const float* block, int64_t n_saved, int64_t n_tokens);

 private:
  std::vector<KvLayerSpec> layers_;
  int n_slots_;
  int64_t n_ctx_;
  // Per layer, per slot: [n_ctx, row] for K, then for V. Allocated once at construction.
  std::vector<std::vector<float>> k_;
  std::vector<std::vector<float>> v_;
};

}  // namespace rwd::state
