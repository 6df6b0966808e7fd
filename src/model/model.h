// Model: an opened GGUF model — its architecture (from the registry), hyper-parameters and weights bound
// to the mapped file. Immutable after load and shared by every slot; per-run state (KV rows, scratch,
// threads) lives in ForwardContext and the state module.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "compute/packed_weights.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "state/kv_cache.h"
#include "state/recurrent_cache.h"

namespace rwd::model {

struct ArchInfo;

class Model {
 public:
  // Opens, validates and binds. `on_progress(fraction)` is called while checking tensors (may be empty).
  static Result<std::unique_ptr<Model>> load(const std::string& path);
  static Result<std::unique_ptr<Model>> from_file(std::unique_ptr<gguf::GgufFile> file);

  const HParams& hparams() const { return hparams_; }
  const Weights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return *file_; }
  const ArchInfo& arch() const { return *arch_; }

  // KV row layout of each attention layer and state of each recurrent layer, in layer order, for sizing
  // the caches; kv_index / recurrent_index map a layer to its entry (-1 when it has none).
  std::vector<state::KvLayerSpec> kv_specs() const;
  std::vector<state::RecurrentSpec> recurrent_specs() const;
  int kv_index(int il) const { return kv_index_[il]; }
  int recurrent_index(int il) const { return recurrent_index_[il]; }
  // Bytes of weights read by one decode step (every matrix once, embeddings one row).
  size_t weight_bytes_per_token() const;
  size_t n_params() const;

 private:
  Model() = default;
  friend class WeightBinder;
  std::unique_ptr<gguf::GgufFile> file_;
  const ArchInfo* arch_ = nullptr;
  HParams hparams_;
  Weights weights_;
  std::vector<int> kv_index_;
  std::vector<int> recurrent_index_;
  // Float copies of small vectors stored in another dtype (norm weights in f16 files).
  std::vector<std::vector<float>> converted_;

  // The CPU kernels' re-laid copies of the weights (compute/packed_weights.h).
  compute::PackedWeights packed_;
};

}  // namespace rwd::model
