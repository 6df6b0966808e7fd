// RecurrentCache: per slot and per recurrent layer, the convolution window and the recurrent state, float32,
// allocated from the layers' declared specs. This is the checkpoint of DESIGN §5; the record log and the
// rollback policies build on it. It never reads or writes another slot's rows. A slot may own several planes
// (full copies of its block): the snapshot policy writes each draft token's state to a plane of its own and
// keeps one by making it the current plane, as llama.cpp does; every accessor here reads the current plane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/gated_delta.h"

namespace rwd::state {

// What a recurrent layer keeps per sequence (STYLE habit 5: layers declare their state as data).
// The delta-rule fields also size the layer's per-token records (k per key head, u and decay per value head).
struct RecurrentSpec {
  int64_t conv_rows = 0;       // d_conv - 1 previous inputs
  int64_t conv_channels = 0;
  int64_t n_head = 0;          // recurrent state [n_head, head_v_dim, head_k_dim]; 0: a convolution only
  int64_t head_v_dim = 0;
  int64_t head_k_dim = 0;
  int64_t n_head_k = 0;        // key heads of the delta rule (n_head is a multiple)
  bool per_channel_decay = false;
  ops::KeyHeadMapping key_head_mapping = ops::KeyHeadMapping::modulo;

  int64_t conv_floats() const { return conv_rows * conv_channels; }
  int64_t ssm_floats() const { return n_head * head_v_dim * head_k_dim; }
  // One token's record: its conv input column, k, u and decay (DESIGN §5).
  int64_t record_k_floats() const { return n_head_k * head_k_dim; }
  int64_t record_u_floats() const { return n_head * head_v_dim; }
  int64_t record_decay_floats() const { return n_head * (per_channel_decay ? head_k_dim : 1); }
  int64_t record_floats() const {
    return conv_channels + record_k_floats() + record_u_floats() + record_decay_floats();
  }
  ops::GatedDeltaParams delta_params() const {
    ops::GatedDeltaParams params;
    params.n_head_k = n_head_k;
    params.n_head_v = n_head;
    params.head_k_dim = head_k_dim;
    params.head_v_dim = head_v_dim;
    params.per_channel_decay = per_channel_decay;
    params.mapping = key_head_mapping;
    return params;
  }
};

class RecurrentCache {
 public:
  RecurrentCache(std::vector<RecurrentSpec> layers, int n_slots, int n_planes = 1);

  int n_layers() const { return static_cast<int>(layers_.size()); }
  int n_slots() const { return n_slots_; }
  const RecurrentSpec& spec(int il) const { return layers_[il]; }

  float* conv_window(int il, int slot);  // [conv_rows, conv_channels]
  float* ssm_state(int il, int slot);    // [n_head, head_v_dim, head_k_dim]

  // Zeroes one slot's windows and states (its current plane): the state before a sequence's first token.
  void reset(int slot);
  // All of one slot's windows and states as one block (for full copies: snapshots, backups).
  float* slot_data(int slot);

  int n_planes() const { return n_planes_; }
  // Plane p of a slot, in slot_data's layout; which one is current changes nothing in it.
  float* plane_data(int slot, int plane);
  int current_plane(int slot) const { return current_plane_[slot]; }
  void set_current_plane(int slot, int plane);
  // Where layer il's window and state sit inside a slot's block (floats), for copies in the same layout.
  int64_t conv_offset(int il) const { return conv_offset_[il]; }
  int64_t ssm_offset(int il) const { return ssm_offset_[il]; }
  int64_t slot_floats() const { return slot_floats_; }

  size_t conv_bytes_per_slot() const;
  size_t ssm_bytes_per_slot() const;

 private:
  std::vector<RecurrentSpec> layers_;
  int n_slots_;
  int n_planes_;
  std::vector<int> current_plane_;   // per slot
  std::vector<int64_t> conv_offset_;  // per layer, floats into a slot's block
  std::vector<int64_t> ssm_offset_;
  int64_t slot_floats_ = 0;
  std::vector<float> data_;           // [n_slots, n_planes, slot_floats_]
};

}  // namespace rwd::state
