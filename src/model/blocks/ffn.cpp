#include "model/blocks/ffn.h"

#include "model/blocks/buffers.h"

namespace rwd::model::blocks {

void ffn(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int64_t n_tokens = ctx.n_tokens();
  compute::Backend& backend = ctx.backend();
  const compute::ConstRows input{x, n_tokens, hp.n_embd};
  const compute::Rows output{out, n_tokens, hp.n_embd};
  const compute::Rows up{ctx.buffer(kBufferFfnUp, n_tokens * hp.n_ff), n_tokens, hp.n_ff};
  if (hp.ffn_activation == FfnActivation::relu_sqr) {
    backend.matmul(lw.ffn_up, input, up);
    backend.relu_sqr(up);
    backend.matmul(lw.ffn_down, up, output);
    return;
  }
  const compute::Rows gate{ctx.buffer(kBufferFfnGate, n_tokens * hp.n_ff), n_tokens, hp.n_ff};
  backend.matmul_shared_input({{&lw.ffn_gate, gate.data}, {&lw.ffn_up, up.data}}, input);
  if (hp.ffn_activation == FfnActivation::gelu_tanh) {
    backend.geglu(gate, up, gate);
  } else {
    backend.swiglu(gate, up, gate);
  }
  backend.matmul(lw.ffn_down, gate, output);
}

}  // namespace rwd::model::blocks
