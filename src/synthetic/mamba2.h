// The Mamba2 pieces the generators of the Mamba2 families share (synthetic/mamba2.cpp, synthetic/nemotron_h.cpp):
// the shape of a preset, the five ssm.* keys, one layer's mixer tensors and the output head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "synthetic/parts.h"

namespace rwd::synthetic {

struct Mamba2Shape {
  int64_t n_embd, n_layer, n_vocab;
  int64_t d_inner, n_head, d_state, n_group, d_conv;
  // granitehybrid and falcon-h1
  int64_t n_head_attn = 0, n_head_kv = 0, n_ff = 0;
  std::vector<int> attention_layers = {};
  // granitehybrid with experts (0: dense FFN): n_ff wide each, and a shared expert of n_ff_shexp
  int64_t n_expert = 0, n_expert_used = 0, n_ff_shexp = 0;
};

void write_ssm_keys(const std::string& arch, const Mamba2Shape& s, gguf::GgufWriter& writer);
// Layer il's ssm_in, ssm_conv1d (+ bias), ssm_dt bias, ssm_a, ssm_d, ssm_norm (unless !with_norm) and ssm_out.
void write_mamba2_mixer(TensorMaker& maker, const Mamba2Shape& s, int il, bool with_norm = true);
// output_norm and an untied output whose non-printable rows are zero.
void write_head(TensorMaker& maker, const Mamba2Shape& s);

}  // namespace rwd::synthetic
