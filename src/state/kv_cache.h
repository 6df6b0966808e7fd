// KvCache: the K and V rows of every attention layer for every slot, float32, one row per position.
// Rollback of an attention layer is truncation (set the slot's length); rows past a slot's length are
// never read. Rows are allocated as positions are first written, growing each (layer, slot) geometrically up to
// n_ctx, so a large --ctx-size costs memory only as slots fill it. It owns no recurrent state (that is the
// recurrent cache, with its records) and no policy.
#pragma once

#include <cstddef>
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

  // Row of position `pos` of a slot in attention layer `il`, [n_head_kv, head_dim], to be written: allocated
  // (with the rows before it) on first use, which may move the layer's rows (take k_data after writing).
  float* k_row(int il, int slot, int64_t pos) { return grown(k_, il, slot, pos, k_row_floats(il)) + pos * k_row_floats(il); }
  float* v_row(int il, int slot, int64_t pos) { return grown(v_, il, slot, pos, v_row_floats(il)) + pos * v_row_floats(il); }
  // All rows of a slot, [rows allocated, n_head_kv, head_dim]: every position written so far is there (read
  // only positions < length).
  float* k_data(int il, int slot) { return k_[index(il, slot)].data(); }
  float* v_data(int il, int slot) { return v_[index(il, slot)].data(); }
  // Rows allocated now for a layer and slot (every position written so far is below this).
  int64_t k_rows_allocated(int il, int slot) const { return rows_allocated(k_, il, slot, k_row_floats(il)); }
  int64_t v_rows_allocated(int il, int slot) const { return rows_allocated(v_, il, slot, v_row_floats(il)); }
  int64_t k_row_floats(int il) const { return layers_[il].n_head_kv * layers_[il].head_dim_k; }
  int64_t v_row_floats(int il) const { return layers_[il].n_head_kv * layers_[il].head_dim_v; }

  // Bytes of K and V for one slot over all layers at full context: the most a slot can take.
  size_t bytes_per_slot() const;
  // Bytes allocated now, over all slots.
  size_t allocated_bytes() const;

  // Prompt reuse across slots: a slot's rows of positions [0, n_tokens) in every layer, as one block (per
  // layer, its K rows then its V rows), and the first n_tokens rows of such a block, saved with n_saved rows,
  // back into a slot.
  size_t prefix_floats(int64_t n_tokens) const;
  void save_prefix(int slot, int64_t n_tokens, float* block) const;
  void restore_prefix(int slot, const float* block, int64_t n_saved, int64_t n_tokens);

 private:
  size_t index(int il, int slot) const {
    REWIND_CHECK(il >= 0 && il < n_layers() && slot >= 0 && slot < n_slots_, "kv layer {} slot {} out of range",
                 il, slot);
    return static_cast<size_t>(il) * n_slots_ + slot;
  }
  int64_t rows_allocated(const std::vector<std::vector<float>>& rows, int il, int slot, int64_t row_floats) const {
    return row_floats == 0 ? 0 : static_cast<int64_t>(rows[index(il, slot)].size()) / row_floats;
  }
  // The rows of (il, slot) in `rows`, grown to hold position pos.
  float* grown(std::vector<std::vector<float>>& rows, int il, int slot, int64_t pos, int64_t row_floats);

  std::vector<KvLayerSpec> layers_;
  int n_slots_;
  int64_t n_ctx_;
  // Per layer, per slot: [rows allocated, row] for K, then for V.
  std::vector<std::vector<float>> k_;
  std::vector<std::vector<float>> v_;
};

}  // namespace rwd::state
