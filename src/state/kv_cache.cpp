#include "state/kv_cache.h"

#include <algorithm>
#include <utility>

namespace rwd::state {
namespace {

// A layer's rows start at this many positions (or n_ctx) and double from there.
constexpr int64_t kMinRows = 256;

}  // namespace

Status KvCache::check_types(const std::vector<KvLayerSpec>& layers, tensor::DType k_type, tensor::DType v_type) {
  for (const auto& [name, type] : {std::pair{"k", k_type}, std::pair{"v", v_type}}) {
    if (!ops::is_kv_type(type)) {
      return Status::errorf("cache-type-{} {} is not a KV cache type (f32, f16, q8_0)", name, tensor::dtype_name(type));
    }
  }
  for (size_t il = 0; il < layers.size(); ++il) {
    const KvLayerSpec& layer = layers[il];
    for (const auto& [name, type, head_dim] : {std::tuple{"k", k_type, layer.head_dim_k},
                                               std::tuple{"v", v_type, layer.head_dim_v}}) {
      const int64_t block = tensor::dtype_traits(type).block_size;
      if (head_dim > 0 && head_dim % block != 0) {
        return Status::errorf("cache-type-{} {} stores heads as whole blocks of {} values, but attention layer {} has "
                              "heads of {} (use f16 or f32)",
                              name, tensor::dtype_name(type), block, il, head_dim);
      }
    }
  }
  return Status::ok();
}

KvCache::KvCache(std::vector<KvLayerSpec> layers, int n_slots, int64_t n_ctx, tensor::DType k_type,
                 tensor::DType v_type)
    : layers_(std::move(layers)), n_slots_(n_slots), n_ctx_(n_ctx), k_type_(k_type), v_type_(v_type) {
  REWIND_CHECK(n_slots > 0 && n_ctx > 0, "KvCache needs slots and context, got {} slots, {} positions", n_slots,
               n_ctx);
  const Status types = check_types(layers_, k_type, v_type);
  REWIND_CHECK(types.is_ok(), "{}", types.message());
  k_.resize(layers_.size() * n_slots_);
  v_.resize(layers_.size() * n_slots_);
}

uint8_t* KvCache::grown(std::vector<std::vector<uint8_t>>& rows, int il, int slot, int64_t pos, size_t row_bytes) {
  REWIND_CHECK(pos >= 0 && pos < n_ctx_, "kv position {} outside [0, {})", pos, n_ctx_);
  std::vector<uint8_t>& layer_rows = rows[index(il, slot)];
  if (row_bytes == 0) return layer_rows.data();  // MLA's value rows: its values are read from the K rows
  const auto n_rows = static_cast<int64_t>(layer_rows.size() / row_bytes);
  if (pos >= n_rows) {
    const int64_t wanted = std::min(n_ctx_, std::max({pos + 1, 2 * n_rows, kMinRows}));
    layer_rows.resize(static_cast<size_t>(wanted) * row_bytes, 0);
  }
  return layer_rows.data();
}

void KvCache::reserve(int slot, int64_t n_positions, int first_layer, int end_layer) {
  if (n_positions <= 0) return;
  for (int il = first_layer; il < end_layer; ++il) {
    grown(k_, il, slot, n_positions - 1, k_row_bytes(il));
    grown(v_, il, slot, n_positions - 1, v_row_bytes(il));
  }
}

void KvCache::write_k(int il, int slot, int64_t pos, const float* row) {
  const size_t row_bytes = k_row_bytes(il);
  tensor::dtype_traits(k_type_).from_float(row, grown(k_, il, slot, pos, row_bytes) + pos * row_bytes,
                                           k_row_floats(il));
}

void KvCache::write_v(int il, int slot, int64_t pos, const float* row) {
  const size_t row_bytes = v_row_bytes(il);
  tensor::dtype_traits(v_type_).from_float(row, grown(v_, il, slot, pos, row_bytes) + pos * row_bytes,
                                           v_row_floats(il));
}

void KvCache::copy_row(int slot, int64_t from, int64_t to) {
  for (int il = 0; il < n_layers(); ++il) {
    for (auto [rows, row_bytes] : {std::pair{&k_, k_row_bytes(il)}, std::pair{&v_, v_row_bytes(il)}}) {
      std::vector<uint8_t>& layer_rows = (*rows)[index(il, slot)];
      REWIND_CHECK(from >= 0 && to >= 0 && to <= from, "kv slot {}: a row moves from {} to {}", slot, from, to);
      // A layer the forward did not run (an MTP block's, while the trunk verifies) has no such rows.
      if (static_cast<size_t>(from + 1) * row_bytes > layer_rows.size()) continue;
      std::copy_n(layer_rows.data() + from * row_bytes, row_bytes, layer_rows.data() + to * row_bytes);
    }
  }
}

size_t KvCache::bytes_per_slot() const {
  size_t bytes = 0;
  for (int il = 0; il < n_layers(); ++il) bytes += static_cast<size_t>(n_ctx_) * (k_row_bytes(il) + v_row_bytes(il));
  return bytes;
}

size_t KvCache::allocated_bytes() const {
  size_t bytes = 0;
  for (const auto& rows : k_) bytes += rows.size();
  for (const auto& rows : v_) bytes += rows.size();
  return bytes;
}

size_t KvCache::prefix_bytes(int64_t n_tokens) const {
  size_t bytes = 0;
  for (int il = 0; il < n_layers(); ++il) bytes += static_cast<size_t>(n_tokens) * (k_row_bytes(il) + v_row_bytes(il));
  return bytes;
}

void KvCache::save_prefix(int slot, int64_t n_tokens, uint8_t* block) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && n_tokens >= 0 && n_tokens <= n_ctx_,
               "kv prefix of {} tokens of slot {} out of range", n_tokens, slot);
  // A layer may hold fewer rows than the slot's tokens: one written only by some forwards (an MTP block's rows
  // exist where drafting fed it). Its missing rows were never written, so any value stands for them.
  const auto copy_rows = [&](const std::vector<uint8_t>& rows, size_t row_bytes) {
    const size_t wanted = static_cast<size_t>(n_tokens) * row_bytes;
    const size_t held = std::min(wanted, rows.size());
    block = std::copy_n(rows.data(), held, block);
    block = std::fill_n(block, wanted - held, uint8_t{0});
  };
  for (int il = 0; il < n_layers(); ++il) {
    copy_rows(k_[index(il, slot)], k_row_bytes(il));
    copy_rows(v_[index(il, slot)], v_row_bytes(il));
  }
}

void KvCache::restore_prefix(int slot, const uint8_t* block, int64_t n_saved, int64_t n_tokens) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && n_tokens >= 0 && n_tokens <= n_saved && n_saved <= n_ctx_,
               "kv prefix of {} of {} saved tokens into slot {} out of range", n_tokens, n_saved, slot);
  for (int il = 0; il < n_layers(); ++il) {
    const size_t k_bytes = k_row_bytes(il);
    const size_t v_bytes = v_row_bytes(il);
    if (n_tokens > 0) {
      std::copy_n(block, n_tokens * k_bytes, grown(k_, il, slot, n_tokens - 1, k_bytes));
      std::copy_n(block + n_saved * k_bytes, n_tokens * v_bytes, grown(v_, il, slot, n_tokens - 1, v_bytes));
    }
    block += static_cast<size_t>(n_saved) * (k_bytes + v_bytes);
  }
}

}  // namespace rwd::state
