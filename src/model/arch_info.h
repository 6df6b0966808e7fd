// ArchInfo: what the registry knows of one architecture — how to read its hyper-parameters, bind its
// weights and run its forward. Each arch/<name>.cpp defines one; arch/list.h is the only list of them.
#pragma once

#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace rwd::model {

class WeightBinder;
class ForwardContext;
class Model;

struct ArchInfo {
  std::string_view name;  // general.architecture, exactly as llama.cpp writes it
  Status (*load_hparams)(const gguf::GgufFile& file, HParams& hparams);
  Status (*bind_weights)(WeightBinder& binder, const HParams& hparams, Weights& weights);
  // Runs the layers over ctx.batch() and leaves the final normed hidden rows in ctx.hidden().
  void (*forward_layers)(const Model& model, ForwardContext& ctx);
  // The next-token-prediction block (null when the architecture has none): ctx.hidden() holds the batch's
  // token embeddings, hidden_in the hidden states it conditions on; leaves the block's normed hidden rows.
  void (*forward_mtp)(const Model& model, ForwardContext& ctx, const float* hidden_in);
  // Has layers whose state speculation must roll back (convolution windows, SSM or delta-rule states), beside KV.
  bool recurrent = false;
};

const ArchInfo* find_arch(std::string_view name);
std::vector<std::string_view> arch_names();

}  // namespace rwd::model
