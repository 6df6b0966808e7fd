#include "state/kv_cache.h"

#include <algorithm>

namespace rwd::state {

namespace {

// A layer's rows start at this many positions (or n_ctx) and double from there.
constexpr int64_t kMinRows = 256;

}  // namespace

KvCache::KvCache(std::vector<KvLayerSpec> layers, int n_slots, int64_t n_ctx)
    : layers_(std::move(layers)), n_slots_(n_slots), n_ctx_(n_ctx) {
  REWIND_CHECK(n_slots > 0 && n_ctx > 0, "KvCache needs slots and context, got {} slots, {} positions", n_slots,
               n_ctx);
  k_.resize(layers_.size() * n_slots_);
  v_.resize(layers_.size() * n_slots_);
}

float* KvCache::grown(std::vector<std::vector<float>>& rows, int il, int slot, int64_t pos, int64_t row_floats) {
  REWIND_CHECK(pos >= 0 && pos < n_ctx_, "kv position {} outside [0, {})", pos, n_ctx_);
  std::vector<float>& layer_rows = rows[index(il, slot)];
  if (row_floats == 0) return layer_rows.data();  // MLA's value rows: its values are read from the K rows
  const auto n_rows = static_cast<int64_t>(layer_rows.size()) / row_floats;
  if (pos >= n_rows) {
    const int64_t wanted = std::min(n_ctx_, std::max({pos + 1, 2 * n_rows, kMinRows}));
    layer_rows.resize(static_cast<size_t>(wanted * row_floats), 0.0f);
  }
  return layer_rows.data();
}

size_t KvCache::bytes_per_slot() const {
  size_t n_floats = 0;
  for (int il = 0; il < n_layers(); ++il) n_floats += static_cast<size_t>(n_ctx_ * (k_row_floats(il) + v_row_floats(il)));
  return n_floats * sizeof(float);
}

size_t KvCache::allocated_bytes() const {
  size_t n_floats = 0;
  for (const auto& rows : k_) n_floats += rows.size();
  for (const auto& rows : v_) n_floats += rows.size();
  return n_floats * sizeof(float);
}

size_t KvCache::prefix_floats(int64_t n_tokens) const {
  size_t n_floats = 0;
  for (int il = 0; il < n_layers(); ++il) n_floats += static_cast<size_t>(n_tokens * (k_row_floats(il) + v_row_floats(il)));
  return n_floats;
}

void KvCache::save_prefix(int slot, int64_t n_tokens, float* block) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && n_tokens >= 0 && n_tokens <= n_ctx_,
               "kv prefix of {} tokens of slot {} out of range", n_tokens, slot);
  // A layer may hold fewer rows than the slot's tokens: one written only by some forwards (an MTP block's rows
  // exist where drafting fed it). Its missing rows were never written, so any value stands for them.
  const auto copy_rows = [&](const std::vector<float>& rows, int64_t row_floats) {
    const size_t wanted = static_cast<size_t>(n_tokens * row_floats);
    const size_t held = std::min(wanted, rows.size());
    block = std::copy_n(rows.data(), held, block);
    block = std::fill_n(block, wanted - held, 0.0f);
  };
  for (int il = 0; il < n_layers(); ++il) {
    copy_rows(k_[index(il, slot)], k_row_floats(il));
    copy_rows(v_[index(il, slot)], v_row_floats(il));
  }
}

void KvCache::restore_prefix(int slot, const float* block, int64_t n_saved, int64_t n_tokens) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && n_tokens >= 0 && n_tokens <= n_saved && n_saved <= n_ctx_,
               "kv prefix of {} of {} saved tokens into slot {} out of range", n_tokens, n_saved, slot);
  for (int il = 0; il < n_layers(); ++il) {
    if (n_tokens > 0) {
      std::copy_n(block, n_tokens * k_row_floats(il), grown(k_, il, slot, n_tokens - 1, k_row_floats(il)));
      std::copy_n(block + n_saved * k_row_floats(il), n_tokens * v_row_floats(il),
                  grown(v_, il, slot, n_tokens - 1, v_row_floats(il)));
    }
    block += n_saved * (k_row_floats(il) + v_row_floats(il));
  }
}

}  // namespace rwd::state
