#include "model/model.h"

#include "base/log.h"
#include "gguf/keys.h"
#include "model/arch_info.h"
#include "model/weight_binder.h"

namespace rwd::model {

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  REWIND_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::open(path));
  return from_file(std::move(file));
}

Result<std::unique_ptr<Model>> Model::from_file(std::unique_ptr<gguf::GgufFile> file) {
  std::unique_ptr<Model> model(new Model());
  REWIND_ASSIGN_OR_RETURN(std::string arch_name, file->get_string(gguf::kGeneralArchitecture));
  const ArchInfo* arch = find_arch(arch_name);
  if (arch == nullptr) {
    std::string known;
    for (std::string_view name : arch_names()) known += (known.empty() ? "" : ", ") + std::string(name);
    return Status::errorf("{}: architecture '{}' is not supported (supported: {})", file->path(), arch_name, known);
  }
  model->arch_ = arch;
  model->hparams_.arch = arch_name;
  model->hparams_.name = file->get_string_or(gguf::kGeneralName, "").value();
  Status status = arch->load_hparams(*file, model->hparams_);
  if (!status) return status.with_context(file->path());
  WeightBinder binder(*model, *file);
  REWIND_RETURN_IF_ERROR(arch->bind_weights(binder, model->hparams_, model->weights_));
  // A head tied to the embeddings is bound as token_embd, which stays in the file's layout for its row reads;
  // the head gets a packed copy of its own. Packing read every row of the file's copy: its pages go back too,
  // and the rows of the tokens a prompt embeds come back from the file as they are read.
  Weights& w = model->weights_;
  bool tied_head_packed = w.output.data == w.token_embd.data && model->packed_.pack(w.output);
  for (NextnWeights& nextn : model->weights_.nextn) {
    if (nextn.shared_head_head.data == w.token_embd.data && model->packed_.pack(nextn.shared_head_head)) {
      tied_head_packed = true;
    }
  }
  if (tied_head_packed) file->release(w.token_embd);
  const auto slices = [](const tensor::Tensor& stacked) {
    std::vector<tensor::Tensor> out;
    if (!stacked.valid()) return out;
    for (int64_t i = 0; i < stacked.ne[2]; ++i) out.push_back(tensor::matrix_slice(stacked, i));
    return out;
  };
  for (LayerWeights& lw : w.layers) {
    lw.ffn_gate_experts = slices(lw.ffn_gate_exps);
    lw.ffn_up_experts = slices(lw.ffn_up_exps);
    lw.ffn_down_experts = slices(lw.ffn_down_exps);
    lw.attn_k_b_heads = slices(lw.attn_k_b);
    lw.attn_v_b_heads = slices(lw.attn_v_b);
  }
  model->file_ = std::move(file);
  int n_kv = 0;
  int n_recurrent = 0;
  for (const LayerParams& layer : model->hparams_.layers) {
    model->kv_index_.push_back(uses_kv(layer.kind) ? n_kv++ : -1);
    model->recurrent_index_.push_back(uses_recurrent_state(layer.kind) ? n_recurrent++ : -1);
  }
  return model;
}

std::vector<state::KvLayerSpec> Model::kv_specs() const {
  std::vector<state::KvLayerSpec> specs;
  for (const LayerParams& layer : hparams_.layers) {
    if (layer.kind == LayerKind::mla) {
      // One latent row per position; the value is its first kv_lora floats, read from the K rows.
      specs.push_back({1, hparams_.mla_kv_lora_rank + hparams_.n_rot, 0});
    } else if (uses_kv(layer.kind)) {
      specs.push_back({hparams_.n_head_kv, hparams_.head_dim, hparams_.head_dim});
    }
  }
  return specs;
}

std::vector<state::RecurrentSpec> Model::recurrent_specs() const {
  std::vector<state::RecurrentSpec> specs;
  const HParams& hp = hparams_;
  for (const LayerParams& layer : hp.layers) {
    if (layer.kind == LayerKind::gated_delta) {
      const int64_t channels = 2 * hp.ssm_n_head_k * hp.ssm_head_dim + hp.ssm_n_head_v * hp.ssm_head_dim;
      specs.push_back({hp.ssm_d_conv - 1, channels, hp.ssm_n_head_v, hp.ssm_head_dim, hp.ssm_head_dim,
                       hp.ssm_n_head_k, false, hp.ssm_key_head_mapping});
    } else if (layer.kind == LayerKind::short_conv) {
      specs.push_back({hp.n_shortconv_l_cache - 1, hp.n_embd, 0, 0, 0, 0, false, ops::KeyHeadMapping::modulo});
    } else if (layer.kind == LayerKind::mamba2 || layer.kind == LayerKind::attention_mamba2) {
      // The selective scan as a delta rule without correction: B the key (per group), dt * x the record's u.
      const int64_t d_inner = hp.ssm_n_head_v * hp.ssm_head_dim;
      const int64_t channels = d_inner + 2 * hp.ssm_n_head_k * hp.ssm_d_state;
      specs.push_back({hp.ssm_d_conv - 1, channels, hp.ssm_n_head_v, hp.ssm_head_dim, hp.ssm_d_state,
                       hp.ssm_n_head_k, false, ops::KeyHeadMapping::divide});
    } else if (layer.kind == LayerKind::kimi_delta) {
      const int64_t width = hp.ssm_n_head_v * hp.ssm_head_dim;
      specs.push_back({hp.ssm_d_conv - 1, 3 * width, hp.ssm_n_head_v, hp.ssm_head_dim, hp.ssm_head_dim, hp.ssm_n_head_v,
                       true, ops::KeyHeadMapping::modulo});
    }
  }
  return specs;
}

namespace {

size_t tensor_bytes(const tensor::Tensor& t) { return t.valid() ? t.n_bytes() : 0; }

}  // namespace

size_t Model::weight_bytes_per_token() const {
  size_t bytes = tensor_bytes(weights_.output) + tensor_bytes(weights_.output_norm);
  if (weights_.token_embd.valid()) bytes += weights_.token_embd.bytes_per_row();
  for (int64_t il = 0; il < hparams_.n_layer; ++il) {  // a decode step does not run the MTP blocks
    const LayerWeights& lw = weights_.layers[il];
    for (const tensor::Tensor* t : {&lw.attn_norm, &lw.attn_q, &lw.attn_k, &lw.attn_v, &lw.attn_output,
                                    &lw.attn_q_norm, &lw.attn_k_norm, &lw.attn_post_norm, &lw.ffn_norm,
                                    &lw.ffn_gate, &lw.ffn_up, &lw.ffn_down, &lw.ffn_post_norm, &lw.attn_qkv,
                                    &lw.attn_gate, &lw.ssm_conv1d, &lw.ssm_dt, &lw.ssm_a, &lw.ssm_beta,
                                    &lw.ssm_alpha, &lw.ssm_norm, &lw.ssm_out, &lw.ffn_gate_inp,
                                    &lw.ffn_gate_inp_shexp, &lw.ffn_gate_shexp, &lw.ffn_up_shexp, &lw.ffn_down_shexp,
                                    &lw.shortconv_conv, &lw.shortconv_in_proj, &lw.shortconv_out_proj, &lw.ssm_in,
                                    &lw.ssm_conv1d_bias, &lw.ssm_d, &lw.ssm_f_a, &lw.ssm_f_b, &lw.ssm_g_a, &lw.ssm_g_b,
                                    &lw.attn_kv_a_mqa, &lw.attn_kv_a_norm, &lw.attn_k_b, &lw.attn_v_b,
                                    &lw.ffn_exp_probs_b}) {
      bytes += tensor_bytes(*t);
    }
    // A token reads only the experts it is routed to.
    for (const tensor::Tensor* t : {&lw.ffn_gate_exps, &lw.ffn_up_exps, &lw.ffn_down_exps}) {
      if (t->valid()) bytes += tensor_bytes(*t) / static_cast<size_t>(hparams_.n_expert) * hparams_.n_expert_used;
    }
  }
  return bytes;
}

size_t Model::n_params() const {
  size_t n = 0;
  for (const gguf::TensorInfo& info : file_->tensors()) n += static_cast<size_t>(info.tensor.n_elements());
  return n;
}

}  // namespace rwd::model
