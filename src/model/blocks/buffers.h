// Indices of the ForwardContext scratch buffers each block uses, in one place so two blocks that are live
// at the same time never share one.
#pragma once

namespace rwd::model::blocks {

enum BufferIndex : int {
  kBufferNormed = 0,    // normed residual, input of a mixer or FFN
  kBufferMixerOut = 1,  // output of attention / recurrent mixer, before the residual add
  kBufferQ = 2,
  kBufferK = 3,
  kBufferV = 4,
  kBufferAttnOut = 5,
  kBufferFfnGate = 6,
  kBufferFfnUp = 7,
  kBufferFfnOut = 8,
  kBufferMixed = 9,       // attention output before the output projection (gated attention)
  kBufferConvIn = 10,     // recurrent mixers: projected channels before the convolution
  kBufferConvOut = 11,
  kBufferGate = 12,       // recurrent mixers: z, the output gate
  kBufferHeadParams = 13, // per-head scalars (beta, decay logits)
  kBufferHeadParams2 = 14,
  kBufferRecurrentOut = 15,
  kBufferRecordU = 16,      // recurrent_io: plain tokens' delta-rule records for the rewind ring
  kBufferRecordDecay = 17,
  kBufferTreeWindow = 18,   // recurrent_io: the conv window one node of a token tree sees
};

}  // namespace rwd::model::blocks
