// KvCache: the K and V rows of every attention layer for every slot, one row per position, stored as f32, f16
// or q8_0 (--cache-type-k/-v): rows are converted once when written and read back by the attention kernels as
// the values they store. Rollback of an attention layer is truncation (set the slot's length); rows past a
// slot's length are never read. Rows are allocated as positions are first written, growing each (layer, slot)
// geometrically up to n_ctx, so a large --ctx-size costs memory only as slots fill it. It owns no recurrent
// state (that is the recurrent cache, with its records) and no policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/check.h"
#include "base/status.h"
#include "ops/attention.h"
#include "tensor/dtype.h"

namespace rwd::state {

struct KvLayerSpec {
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
};

class KvCache {
 public:
  // Whether every layer's heads can be stored as these types (q8_0 stores whole 32-value blocks per head).
  static Status check_types(const std::vector<KvLayerSpec>& layers, tensor::DType k_type, tensor::DType v_type);

  // One spec per attention layer (indexed 0..n_attention_layers-1 by the model); n_ctx positions per slot;
  // the types must pass check_types.
  KvCache(std::vector<KvLayerSpec> layers, int n_slots, int64_t n_ctx, tensor::DType k_type = tensor::DType::f32,
          tensor::DType v_type = tensor::DType::f32);

  int n_slots() const { return n_slots_; }
  int64_t n_ctx() const { return n_ctx_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  tensor::DType k_type() const { return k_type_; }
  tensor::DType v_type() const { return v_type_; }

  // Grows the rows of layers [first_layer, end_layer) of a slot to hold positions [0, n_positions)
  // (geometrically, as writes would): a forward reserves its batch's rows in the layers it writes before any
  // block runs, so no write moves the rows while kernels read them and the allocation, when the slot's context
  // has grown past what it held, comes before the step's work.
  void reserve(int slot, int64_t n_positions, int first_layer, int end_layer);
  // Stores position `pos` of a slot in attention layer `il`: `row` is [n_head_kv, head_dim] floats, converted to
  // the cache type. A row not reserved is allocated here (with the rows before it), which may move the layer's
  // rows: outside a forward, take k_rows()/v_rows() after writing.
  void write_k(int il, int slot, int64_t pos, const float* row);
  void write_v(int il, int slot, int64_t pos, const float* row);
  // Where a forward stores a slot's K or V rows of layer il (compute::Backend::store_kv): the rows reserved so
  // far (reserve() before the forward, so that storing never moves them).
  ops::KvStore k_store(int il, int slot) { return store_of(k_, il, slot, k_type_, k_row_bytes(il)); }
  ops::KvStore v_store(int il, int slot) { return store_of(v_, il, slot, v_type_, v_row_bytes(il)); }
  // Copies row `from` of a slot over an earlier row `to` in every layer that has row `from`, K and V (a tree's
  // kept path moving into place).
  void copy_row(int slot, int64_t from, int64_t to);
  // All rows of a slot as the attention kernels read them: every position written so far is there (read only
  // positions < length). MLA layers have no V rows (their values are read from the K rows).
  ops::KvRows k_rows(int il, int slot) const { return {k_[index(il, slot)].data(), k_type_, k_row_bytes(il)}; }
  ops::KvRows v_rows(int il, int slot) const { return {v_[index(il, slot)].data(), v_type_, v_row_bytes(il)}; }
  int64_t k_row_floats(int il) const { return layers_[il].n_head_kv * layers_[il].head_dim_k; }
  int64_t v_row_floats(int il) const { return layers_[il].n_head_kv * layers_[il].head_dim_v; }
  size_t k_row_bytes(int il) const { return tensor::row_bytes(k_type_, k_row_floats(il)); }
  size_t v_row_bytes(int il) const { return tensor::row_bytes(v_type_, v_row_floats(il)); }
  // The bytes allocated now for a layer and slot (rows_allocated * row bytes), for inspection.
  uint8_t* k_bytes(int il, int slot) { return k_[index(il, slot)].data(); }
  uint8_t* v_bytes(int il, int slot) { return v_[index(il, slot)].data(); }
  size_t k_bytes_allocated(int il, int slot) const { return k_[index(il, slot)].size(); }
  size_t v_bytes_allocated(int il, int slot) const { return v_[index(il, slot)].size(); }

  // Bytes of K and V for one slot over all layers at full context: the most a slot can take.
  size_t bytes_per_slot() const;
  // Bytes allocated now, over all slots.
  size_t allocated_bytes() const;

  // Prompt reuse across slots: a slot's rows of positions [0, n_tokens) in every layer, as one block of bytes
  // (per layer, its K rows then its V rows, in the cache types), and the first n_tokens rows of such a block,
  // saved with n_saved rows, back into a slot.
  size_t prefix_bytes(int64_t n_tokens) const;
  void save_prefix(int slot, int64_t n_tokens, uint8_t* block) const;
  void restore_prefix(int slot, const uint8_t* block, int64_t n_saved, int64_t n_tokens);

 private:
  size_t index(int il, int slot) const {
    REWIND_CHECK(il >= 0 && il < n_layers() && slot >= 0 && slot < n_slots_, "kv layer {} slot {} out of range",
                 il, slot);
    return static_cast<size_t>(il) * n_slots_ + slot;
  }
  // The rows of (il, slot) in `rows`, grown to hold position pos.
  uint8_t* grown(std::vector<std::vector<uint8_t>>& rows, int il, int slot, int64_t pos, size_t row_bytes);
  ops::KvStore store_of(std::vector<std::vector<uint8_t>>& rows, int il, int slot, tensor::DType type,
                        size_t row_bytes) {
    std::vector<uint8_t>& layer_rows = rows[index(il, slot)];
    const auto n_rows = row_bytes == 0 ? 0 : static_cast<int64_t>(layer_rows.size() / row_bytes);
    return {layer_rows.data(), type, row_bytes, n_rows};
  }

  std::vector<KvLayerSpec> layers_;
  int n_slots_;
  int64_t n_ctx_;
  tensor::DType k_type_;
  tensor::DType v_type_;
  // Per layer, per slot: [rows allocated, row bytes] for K, then for V.
  std::vector<std::vector<uint8_t>> k_;
  std::vector<std::vector<uint8_t>> v_;
};

}  // namespace rwd::state
