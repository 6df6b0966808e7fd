#include "state/recurrent_cache.h"

#include <algorithm>

#include "base/check.h"

namespace rwd::state {

RecurrentCache::RecurrentCache(std::vector<RecurrentSpec> layers, int n_slots, int n_planes)
    : layers_(std::move(layers)),
      n_slots_(n_slots),
      n_planes_(n_planes),
      current_plane_(static_cast<size_t>(std::max(n_slots, 0)), 0) {
  REWIND_CHECK(n_slots > 0, "RecurrentCache needs at least one slot, got {}", n_slots);
  REWIND_CHECK(n_planes > 0, "RecurrentCache needs at least one plane per slot, got {}", n_planes);
  for (const RecurrentSpec& spec : layers_) {
    conv_offset_.push_back(slot_floats_);
    slot_floats_ += spec.conv_floats();
    ssm_offset_.push_back(slot_floats_);
    slot_floats_ += spec.ssm_floats();
  }
  data_.assign(static_cast<size_t>(slot_floats_ * n_slots_ * n_planes_), 0.0f);
}

float* RecurrentCache::conv_window(int il, int slot) {
  REWIND_CHECK(il >= 0 && il < n_layers() && slot >= 0 && slot < n_slots_, "recurrent layer {} slot {} out of range",
               il, slot);
  return slot_data(slot) + conv_offset_[il];
}

float* RecurrentCache::ssm_state(int il, int slot) {
  REWIND_CHECK(il >= 0 && il < n_layers() && slot >= 0 && slot < n_slots_, "recurrent layer {} slot {} out of range",
               il, slot);
  return slot_data(slot) + ssm_offset_[il];
}

float* RecurrentCache::slot_data(int slot) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_, "slot {} out of range", slot);
  return plane_data(slot, current_plane_[slot]);
}

float* RecurrentCache::plane_data(int slot, int plane) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && plane >= 0 && plane < n_planes_, "slot {} plane {} out of range",
               slot, plane);
  return data_.data() + (static_cast<int64_t>(slot) * n_planes_ + plane) * slot_floats_;
}

void RecurrentCache::set_current_plane(int slot, int plane) {
  REWIND_CHECK(slot >= 0 && slot < n_slots_ && plane >= 0 && plane < n_planes_, "slot {} plane {} out of range",
               slot, plane);
  current_plane_[slot] = plane;
}

void RecurrentCache::reset(int slot) {
  std::fill_n(slot_data(slot), slot_floats_, 0.0f);
}

size_t RecurrentCache::conv_bytes_per_slot() const {
  int64_t n = 0;
  for (const RecurrentSpec& spec : layers_) n += spec.conv_floats();
  return static_cast<size_t>(n) * sizeof(float);
}

size_t RecurrentCache::ssm_bytes_per_slot() const {
  int64_t n = 0;
  for (const RecurrentSpec& spec : layers_) n += spec.ssm_floats();
  return static_cast<size_t>(n) * sizeof(float);
}

}  // namespace rwd::state
