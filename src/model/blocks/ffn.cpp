#include "model/blocks/ffn.h"

#include "kernels/cpu/glu.h"
#include "kernels/cpu/matmul.h"
#include "model/blocks/buffers.h"

namespace rwd::model::blocks {

// As ggml_relu then ggml_sqr: one rounding, in the square.
void relu_sqr(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    x[i] = r * r;
  }
}

void ffn(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int64_t n_tokens = ctx.n_tokens();
  if (hp.ffn_activation == FfnActivation::relu_sqr) {
    float* up = ctx.buffer(kBufferFfnUp, n_tokens * hp.n_ff);  // [n_tokens, n_ff]
    kernels::cpu::matmul(lw.ffn_up, x, n_tokens, up, ctx.matmul_scratch(), ctx.pool());
    relu_sqr(up, n_tokens * hp.n_ff);
    kernels::cpu::matmul(lw.ffn_down, up, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
    return;
  }
  float* gate = ctx.buffer(kBufferFfnGate, n_tokens * hp.n_ff);  // [n_tokens, n_ff]
  float* up = ctx.buffer(kBufferFfnUp, n_tokens * hp.n_ff);      // [n_tokens, n_ff]
  kernels::cpu::matmul_shared_input({{&lw.ffn_gate, gate}, {&lw.ffn_up, up}}, x, n_tokens, ctx.matmul_scratch(), ctx.pool());
  if (hp.ffn_activation == FfnActivation::gelu_tanh) {
    kernels::cpu::geglu(gate, up, gate, n_tokens * hp.n_ff);
  } else {
    kernels::cpu::swiglu(gate, up, gate, n_tokens * hp.n_ff);
  }
  kernels::cpu::matmul(lw.ffn_down, gate, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
}

void add_residual(float* residual, const float* delta, int64_t n) {
  for (int64_t i = 0; i < n; ++i) residual[i] += delta[i];
}

}  // namespace rwd::model::blocks
