#include "state/kv_cache.h"

#include <algorithm>

namespace rwd::state {

KvCache::KvCache(std::vector<KvLayerSpec> layers, int n_slots, int64_t n_ctx)
    : layers_(std::move(layers)), n_slots_(n_slots), n_ctx_(n_ctx) {
  REWIND_CHECK(n_slots > 0 && n_ctx > 0, "KvCache needs slots and context, got {} slots, {} positions", n_slots,
               n_ctx);
  k_.resize(layers_.size() * n_slots_);
  v_.resize(layers_.size() * n_slots_);
  for (size_t il = 0; il < layers_.size(); ++il) {
    for (int slot = 0; slot < n_slots_; ++slot) {
      k_[il * n_slots_ + slot].assign(static_cast<size_t>(n_ctx_ * k_row_floats(static_cast<int>(il))), 0.0f);
      v_[il * n_slots_ + slot].assign(static_cast<size_t>(n_ctx_ * v_row_floats(static_cast<int>(il))), 0.0f);
    }
  }
}

float* KvCache::k_data(int il, int slot) {
  REWIND_CHECK(il >= 0 && il < n_layers() && slot >= 0 && slot < n_slots_, "kv layer {} slot {} out of range", il,
               slot);
  return k_[static_cast<size_t>(il) * n_slots_ + slot].data();
}

float* KvCache::v_data(int il, int slot) {
  REWIND_CHECK(il >= 0 && il < n_layers() && slot >= 0 && slot < n_slots_, "kv layer {} slot {} out of range", il,
               slot);
  return v_[static_cast<size_t>(il) * n_slots_ + slot].data();
}

size_t KvCache::bytes_per_slot() const {
  size_t n_floats = 0;
  for (int il = 0; il < n_layers(); ++il) n_floats += static_cast<size_t>(n_ctx_ * (k_row_floats(il) + v_row_floats(il)));
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
  for (int il = 0; il < n_layers(); ++il) {
    const size_t index = static_cast<size_t>(il) * n_slots_ + slot;
    block = std::copy_n(k_[index].data(), n_tokens * k_row_floats(il), block);
    block = std::copy_n(v_[index].data(), n_tokens * v_row_floats(il), block);
  }
}

void KvCache::restore_prefix(int slot, const float* block, int64_t n_saved, int64_t n_tokens) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && n_tokens >= 0 && n_tokens <= n_saved && n_saved <= n_ctx_,
               "kv prefix of {} of {} saved tokens into slot {} out of range", n_tokens, n_saved, slot);
  for (int il = 0; il < n_layers(); ++il) {
    const size_t index = static_cast<size_t>(il) * n_slots_ + slot;
    std::copy_n(block, n_tokens * k_row_floats(il), k_[index].data());
    block += n_saved * k_row_floats(il);
    std::copy_n(block, n_tokens * v_row_floats(il), v_[index].data());
    block += n_saved * v_row_floats(il);
  }
}

}  // namespace rwd::state
