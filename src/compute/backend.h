// The compute seam (DESIGN §4): every op a forward, a rollback or a commit runs, behind one interface, so the
// model, state and runtime code never name a device's kernels. The CPU backend (cpu_backend.h) forwards each op
// to today's fused kernels (kernels/cpu) unchanged; a GPU backend implements the same ops over its own buffers.
//
// Operands are views of the backend's memory (compute/rows.h), model weights (tensor::Tensor for matrices, the
// float vectors of norms, biases and convolutions as the model holds them), and the parameter types of ops/.
//
// Exactness contract, every op: each output row is reduced in the same order whatever the number of rows,
// slots, sequences, tree nodes or threads, so a token's bits never depend on what it was batched with (DESIGN
// §3). Elementwise ops round each value once, as the expression written beside them. An op's own contract, where
// it says more, is given beside it; the fused ops' full contracts are their types' headers in ops/.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "compute/rows.h"
#include "ops/attention.h"
#include "ops/gated_delta.h"
#include "ops/moe.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "tensor/tensor.h"

namespace rwd::compute {

// One weight of matmul_shared_input: y = x · weightᵀ, [x rows, weight rows], contiguous.
struct MatmulOutput {
  const tensor::Tensor* weight;
  float* y;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu avx512vnni, 2 threads": the device and the kernel set it dispatched.
  virtual std::string name() const = 0;

  // --- Matrix products: y = x · Wᵀ for W stored [n_out, n_in] in any supported dtype. y is contiguous and does
  // not alias x. Row r of y is bit-identical whatever x.n_rows is.
  virtual void matmul(const tensor::Tensor& weight, ConstRows x, Rows y) = 0;
  // Several weights over the same x (q, k and v; gate and up), each result that of its own matmul bit for bit.
  virtual void matmul_shared_input(std::initializer_list<MatmulOutput> outputs, ConstRows x) = 0;

  // --- Norms, rows of `width` values each; x and y may alias.
  // y = x / sqrt(mean(x²) + eps) * weight (weight null: no scale).
  virtual void rms_norm(ConstRows x, const float* weight, Rows y, float eps) = 0;
  // y = x / max(||x||_2, eps).
  virtual void l2_norm(ConstRows x, Rows y, float eps) = 0;
  // y = rms_norm(x) * weight * act(z), weight shared by all rows.
  virtual void gated_rms_norm(ConstRows x, ConstRows z, const float* weight, Rows y, float eps,
                              ops::GateActivation activation) = 0;

  // --- Rotary embedding in place over x ([n_tokens, n_head * head_dim], contiguous), token t at positions[t].
  virtual void rope(Rows x, std::span<const int32_t> positions, const ops::RopeParams& params) = 0;

  // --- Gated linear units and activations, elementwise. out may alias gate or x.
  virtual void swiglu(ConstRows gate, ConstRows up, Rows out) = 0;  // SiLU(gate) * up
  virtual void geglu(ConstRows gate, ConstRows up, Rows out) = 0;   // GELU-tanh(gate) * up
  virtual void silu(ConstRows x, Rows out) = 0;
  virtual void relu_sqr(Rows x) = 0;                                 // max(x, 0)², one rounding
  virtual void sigmoid(Rows x) = 0;                                  // 1 / (1 + exp(-x))
  virtual void sigmoid_mul(Rows x, ConstRows gate) = 0;              // x * (1 / (1 + exp(-gate)))

  // --- Rows in and out: token embeddings (row tokens[t] of the table as floats, times `scale`), gathers.
  virtual void embed(const tensor::Tensor& table, std::span<const int32_t> tokens, float scale, Rows out) = 0;
  // dst row r = src row rows[r].
  virtual void gather_rows(ConstRows src, std::span<const int64_t> rows, Rows dst) = 0;

  // --- Small elementwise ops over views of equal shape.
  virtual void copy(ConstRows src, Rows dst) = 0;
  virtual void add(Rows acc, ConstRows delta) = 0;                   // acc + delta
  virtual void mul(ConstRows a, ConstRows b, Rows out) = 0;          // a * b; out may alias a or b
  virtual void scale(Rows x, float factor) = 0;                      // x * factor
  virtual void softcap(Rows x, float cap) = 0;                       // cap * tanh(x / cap)
  virtual void add_bias(Rows x, const float* bias) = 0;              // x[r][c] + bias[c]
  // softplus(x[r][c] + bias[c]) into out (softplus(v) = v for v > 20, else log(1 + exp(v))).
  virtual void softplus_bias(ConstRows x, const float* bias, Rows out) = 0;
  // x[r][c] * factors[c / group] into out, which may alias x.
  virtual void mul_groups(ConstRows x, const float* factors, int64_t group, Rows out) = 0;
  // acc[r][c] + x[r][c] * factors[c / group] (the product rounded, then the sum).
  virtual void add_mul_groups(Rows acc, ConstRows x, const float* factors, int64_t group) = 0;

  // --- Mixture of experts. Row t's experts in routing order (descending biased score, ties to the lower id) into
  // experts[t * n_used ..], their weights beside them; the scores softmax (max subtracted, the sum in float64) or
  // sigmoid, renormalised (sum clamped to 2^-14) and scaled as params say.
  virtual void route_experts(ConstRows logits, const ops::RouterParams& params, int64_t n_used,
                             std::span<int32_t> experts, std::span<float> weights) = 0;
  // routed row t * n_used + j = the FFN of expert experts[t * n_used + j] over x row t; each expert runs once
  // over the rows routed to it.
  virtual void moe_experts(ConstRows x, std::span<const int32_t> experts, int64_t n_used,
                           const ops::ExpertWeights& weights, Rows routed) = 0;
  // out row t = sum_j weights[t * n_used + j] * routed row t * n_used + j, summed from 0 in routing order;
  // with accumulate, that sum + out row t (the shared expert's output) instead.
  virtual void moe_mix(ConstRows routed, std::span<const float> weights, int64_t n_used, Rows out,
                       bool accumulate) = 0;
  // rows[t] * sigmoid(gate · x[t]), the dot product in float64 (a shared expert's gate).
  virtual void sigmoid_dot_scale(Rows rows, ConstRows x, const float* gate) = 0;

  // --- KV store: src row i (one token's [n_head_kv, head_dim] floats) into row rows[i] of dst, converted to
  // dst.type as the tensor type's from_float does (f16 rounds to nearest even; q8_0 per block of 32).
  virtual void store_kv(ConstRows src, const ops::KvStore& dst, std::span<const int32_t> rows) = 0;

  // --- Attention: every sequence of a layer's step in one round; each (token, head) pair's bits are those of
  // attending on its own sequence (ops/attention.h).
  virtual void attention_sequences(std::span<const ops::AttentionCall> calls, const ops::AttentionParams& params) = 0;

  // --- The gated delta rule of several sequences (every slot of a step) in one round, bit-identical to making
  // the calls one after another (ops/gated_delta.h); calls on the same state must be adjacent.
  virtual void gated_delta_rules(std::span<const ops::GatedDeltaCall> calls, const ops::GatedDeltaParams& params) = 0;
  // decay[i] = exp(g[i]) exactly as the rule computes a token's decay: the only decays records may carry.
  virtual void gated_delta_decay(const float* g, float* decay, int64_t n) = 0;
  // State op: applies records to a state with the rule's arithmetic, as if their tokens had run.
  virtual void fold_delta_records(float* state, const ops::GatedDeltaRecords& records,
                                  const ops::GatedDeltaParams& params) = 0;

  // --- Causal depthwise conv of x's rows (one sequence, contiguous) with its carried window [d_conv - 1, width]:
  // out[t][c] = bias[c] + sum_i weight[c][i] * in[t + i][c], in = window rows then x rows, summed in the order
  // bias, tap 0, tap 1, ...; the window then holds the last d_conv - 1 inputs. bias may be null.
  virtual void causal_conv1d(ConstRows x, const float* weight, int64_t d_conv, const float* bias, float* window,
                             Rows out) = 0;
  // The conv of a token tree in depth-first order (token t follows parents[t], or the window at -1); the window
  // is only read, scratch holds one window.
  virtual void causal_conv1d_tree(ConstRows x, const int32_t* parents, const float* weight, int64_t d_conv,
                                  const float* bias, const float* window, float* scratch, Rows out) = 0;
  // State op: the window update alone, exactly as causal_conv1d leaves it (replaying logged conv inputs).
  virtual void advance_conv_window(ConstRows x, int64_t d_conv, float* window) = 0;
};

}  // namespace rwd::compute
