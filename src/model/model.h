// Model: an opened GGUF model — its architecture (from the registry), hyper-parameters and weights bound
// to the mapped file. Immutable after load and shared by every slot; per-run state (KV rows, scratch,
// threads) lives in ForwardContext and the state module.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "state/kv_cache.h"

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

  // KV row layout of each attention layer, for sizing the KV cache.
  std::vector<state::KvLayerSpec> kv_specs() const;
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
  // Float copies of small vectors stored in another dtype (norm weights in f16 files).
  std::vector<std::vector<float>> converted_;
};

}  // namespace rwd::model
