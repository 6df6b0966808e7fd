// RecurrentCache: per slot and per recurrent layer, the convolution window and the recurrent state, float32,
// allocated from the layers' declared specs. This is the checkpoint of DESIGN §5; the record log and the
// rollback policies build on it. It never reads or writes another slot's rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rwd::state {

// What a recurrent layer keeps per sequence (STYLE habit 5: layers declare their state as data).
struct RecurrentSpec {
  int64_t conv_rows = 0;       // d_conv - 1 previous inputs
  int64_t conv_channels = 0;
  int64_t n_head = 0;          // recurrent state [n_head, head_v_dim, head_k_dim]
  int64_t head_v_dim = 0;
  int64_t head_k_dim = 0;

  int64_t conv_floats() const { return conv_rows * conv_channels; }
  int64_t ssm_floats() const { return n_head * head_v_dim * head_k_dim; }
};

class RecurrentCache {
 public:
  RecurrentCache(std::vector<RecurrentSpec> layers, int n_slots);

  int n_layers() const { return static_cast<int>(layers_.size()); }
  int n_slots() const { return n_slots_; }
  const RecurrentSpec& spec(int il) const { return layers_[il]; }

  float* conv_window(int il, int slot);  // [conv_rows, conv_channels]
  float* ssm_state(int il, int slot);    // [n_head, head_v_dim, head_k_dim]

  // Zeroes one slot's windows and states: the state before a sequence's first token.
  void reset(int slot);

  size_t conv_bytes_per_slot() const;
  size_t ssm_bytes_per_slot() const;

 private:
  std::vector<RecurrentSpec> layers_;
  int n_slots_;
  std::vector<int64_t> conv_offset_;  // per layer, floats into a slot's block
  std::vector<int64_t> ssm_offset_;
  int64_t slot_floats_ = 0;
  std::vector<float> data_;           // [n_slots, slot_floats_]
};

}  // namespace rwd::state
