#include "model/blocks/short_conv.h"

#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/matmul.h"
#include "model/blocks/buffers.h"
#include "model/blocks/recurrent_io.h"

namespace rwd::model::blocks {

void short_conv(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int rl = model.recurrent_index(il);
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_embd = hp.n_embd;

  float* bcx = ctx.buffer(kBufferConvIn, n_tokens * 3 * n_embd);  // [n_tokens, B | C | x]
  kernels::cpu::matmul(lw.shortconv_in_proj, x, n_tokens, bcx, ctx.matmul_scratch(), ctx.pool());
  float* bx = ctx.buffer(kBufferGate, n_tokens * n_embd);         // [n_tokens, n_embd]
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = bcx + t * 3 * n_embd;
    for (int64_t i = 0; i < n_embd; ++i) bx[t * n_embd + i] = row[i] * row[2 * n_embd + i];
  }
  float* conv = ctx.buffer(kBufferConvOut, n_tokens * n_embd);    // [n_tokens, n_embd]
  for (const RecurrentRun& run : ctx.recurrent_runs()) {
    run_conv(ctx, rl, run, bx + run.span.begin * n_embd, n_embd, lw.shortconv_conv.f32(), hp.n_shortconv_l_cache,
             nullptr, conv + run.span.begin * n_embd);
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* c = bcx + t * 3 * n_embd + n_embd;
    for (int64_t i = 0; i < n_embd; ++i) conv[t * n_embd + i] *= c[i];
  }
  kernels::cpu::matmul(lw.shortconv_out_proj, conv, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
}

}  // namespace rwd::model::blocks
