#include "model/blocks/mixer.h"

#include "model/blocks/attention.h"
#include "model/blocks/buffers.h"
#include "model/blocks/ffn.h"
#include "model/blocks/gated_attention.h"
#include "model/blocks/gated_delta_net.h"
#include "model/blocks/kimi_delta_attention.h"
#include "model/blocks/mamba2.h"
#include "model/blocks/mla.h"
#include "model/blocks/moe.h"
#include "model/blocks/short_conv.h"

namespace rwd::model::blocks {

void mixer(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  switch (model.hparams().layers[il].kind) {
    case LayerKind::attention: attention(model, ctx, il, x, out); return;
    case LayerKind::gated_attention: gated_attention(model, ctx, il, x, out); return;
    case LayerKind::gated_delta: gated_delta_net(model, ctx, il, x, out); return;
    case LayerKind::short_conv: short_conv(model, ctx, il, x, out); return;
    case LayerKind::mamba2: mamba2(model, ctx, il, x, out); return;
    case LayerKind::kimi_delta: kimi_delta_attention(model, ctx, il, x, out); return;
    case LayerKind::mla: mla(model, ctx, il, x, out); return;
    case LayerKind::ffn: feed_forward(model, ctx, il, x, out); return;
    case LayerKind::attention_mamba2: {
      const int64_t n_embd = model.hparams().n_embd;
      float* ssm_out = ctx.buffer(kBufferFfnOut, ctx.n_tokens() * n_embd);
      attention(model, ctx, il, x, out);
      mamba2(model, ctx, il, x, ssm_out);
      ctx.backend().add({out, ctx.n_tokens(), n_embd}, compute::ConstRows{ssm_out, ctx.n_tokens(), n_embd});
      return;
    }
  }
}

void feed_forward(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  if (hp.n_expert > 0 && il >= hp.n_layer_dense_lead) {
    moe(model, ctx, il, x, out);
  } else {
    ffn(model, ctx, il, x, out);
  }
}

}  // namespace rwd::model::blocks
