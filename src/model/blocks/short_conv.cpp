#include "model/blocks/short_conv.h"

#include "model/blocks/buffers.h"
#include "model/blocks/recurrent_io.h"

namespace rwd::model::blocks {

void short_conv(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int rl = model.recurrent_index(il);
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_embd = hp.n_embd;

  compute::Backend& backend = ctx.backend();
  const compute::Rows bcx{ctx.buffer(kBufferConvIn, n_tokens * 3 * n_embd), n_tokens, 3 * n_embd};  // B | C | x
  backend.matmul(lw.shortconv_in_proj, compute::ConstRows{x, n_tokens, n_embd}, bcx);
  const compute::Rows bx{ctx.buffer(kBufferGate, n_tokens * n_embd), n_tokens, n_embd};
  backend.mul(bcx.columns(0, n_embd), bcx.columns(2 * n_embd, n_embd), bx);
  const compute::Rows conv{ctx.buffer(kBufferConvOut, n_tokens * n_embd), n_tokens, n_embd};
  for (const RecurrentRun& run : ctx.recurrent_runs()) {
    run_conv(ctx, rl, run, bx.row(run.span.begin), n_embd, lw.shortconv_conv.f32(), hp.n_shortconv_l_cache, nullptr,
             conv.row(run.span.begin));
  }
  backend.mul(conv, bcx.columns(n_embd, n_embd), conv);
  backend.matmul(lw.shortconv_out_proj, conv, {out, n_tokens, n_embd});
}

}  // namespace rwd::model::blocks
