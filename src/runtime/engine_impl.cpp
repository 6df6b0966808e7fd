#include "runtime/engine_impl.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "base/log.h"
#include "compute/cpu_backend.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "spec/draft_model.h"
#include "spec/mtp.h"
#include "spec/ngram.h"
#include "spec/oracle.h"

namespace rwd {

Result<std::unique_ptr<Engine>> Engine::open(const EngineOptions& options) {
  return runtime::EngineImpl::create(options);
}

}  // namespace rwd

namespace rwd::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// The chat template: --chat-template's built-in, else the file's, else a fallback with a warning (Gemma's
// for Gemma files, which often ship without one; ChatML otherwise, as llama-server falls back). The warning
// goes to `warning`, for the first chat: a model used for plain completion has nothing to be warned about.
Result<tokenizer::ChatTemplate> choose_chat_template(const EngineOptions& options, const tokenizer::Tokenizer& vocab,
                                                     const std::string& architecture, std::string& warning) {
  tokenizer::ChatSpecialTokens tokens;
  if (vocab.bos_id() >= 0) tokens.bos = std::string(vocab.token_text(vocab.bos_id()));
  if (vocab.eos_id() >= 0) tokens.eos = std::string(vocab.token_text(vocab.eos_id()));
  tokens.tokenizer_adds_bos = vocab.add_bos_default();
  if (!options.chat_template.empty()) return tokenizer::ChatTemplate::from_name(options.chat_template, tokens);
  if (vocab.chat_template().empty()) {
    const char* fallback = architecture.rfind("gemma", 0) == 0 ? "gemma" : "chatml";
    warning = fmt::format("{}: no tokenizer.chat_template in the file; formatting chats as {} (choose with "
                          "--chat-template)",
                          options.model_path, fallback);
    return tokenizer::ChatTemplate::from_name(fallback, tokens);
  }
  auto chat = tokenizer::ChatTemplate::from_jinja(vocab.chat_template(), tokens);
  if (!chat) {
    return chat.status().with_context(options.model_path + ": tokenizer.chat_template (a built-in can be chosen with "
                                      "--chat-template chatml|gemma|llama3)");
  }
  return chat;
}

std::vector<tokenizer::ChatMessage> template_messages(const std::vector<ChatMessage>& messages) {
  std::vector<tokenizer::ChatMessage> converted;
  converted.reserve(messages.size());
  for (const ChatMessage& message : messages) {
    tokenizer::ChatMessage& added = converted.emplace_back();
    added.role = message.role;
    added.content = message.content;
  }
  return converted;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}


// Bounded so a long-running server does not grow without limit; the CLI reads its timings right away.
constexpr size_t kMaxFinishedTimings = 4096;

Status validate_spec(const SpecOptions& spec, const EngineOptions& options) {
  if (spec.mode != "none" && spec.mode != "ngram" && spec.mode != "draft" && spec.mode != "mtp" &&
      spec.mode != "oracle") {
    return Status::errorf("unknown speculation mode '{}' (expected none, ngram, draft, mtp or oracle)", spec.mode);
  }
  if (!(spec.oracle_error_rate >= 0.0 && spec.oracle_error_rate <= 1.0)) {
    return Status::errorf("oracle error rate must be in [0, 1], got {}", spec.oracle_error_rate);
  }
  REWIND_RETURN_IF_ERROR(state::parse_rollback_policy(spec.rollback).status());
  if (spec.mode == "none") return Status::ok();
  if (!(spec.assumed_verify_token >= 0.0 && spec.assumed_verify_token <= SpecOptions::kMaxAssumedCost)) {
    return Status::errorf("assumed_verify_token must be in [0, {}] plain steps (0: timed), got {}",
                          SpecOptions::kMaxAssumedCost, spec.assumed_verify_token);
  }
  if (!(spec.assumed_draft_token >= 0.0 && spec.assumed_draft_token <= SpecOptions::kMaxAssumedCost)) {
    return Status::errorf("assumed_draft_token must be in [0, {}] plain steps, got {}", SpecOptions::kMaxAssumedCost,
                          spec.assumed_draft_token);
  }
  if (spec.assumed_draft_token > 0.0 && spec.assumed_verify_token == 0.0) {
    return Status::errorf("assumed_draft_token {} needs assumed_verify_token: costs are assumed together or timed",
                          spec.assumed_draft_token);
  }
  if (spec.draft_max < 1 || spec.draft_max > 32) {
    return Status::errorf("draft-max must be in [1, 32], got {}", spec.draft_max);
  }
  if (spec.draft_min < 1 || spec.draft_min > spec.draft_max) {
    return Status::errorf("draft-min must be in [1, draft-max = {}], got {}", spec.draft_max, spec.draft_min);
  }
  if (spec.ngram_min < 1 || spec.ngram_max < spec.ngram_min || spec.ngram_max > SpecOptions::kMaxNgram) {
    return Status::errorf("n-gram sizes must satisfy 1 <= min <= max <= {}, got min {} max {}",
                          SpecOptions::kMaxNgram, spec.ngram_min, spec.ngram_max);
  }
  if (spec.mode == "draft" && spec.draft_model.empty()) {
    return Status::error("--spec draft needs a draft model (--draft-model FILE)");
  }
  if (spec.draft_vocab < SpecOptions::kDraftVocabAuto || (spec.draft_vocab > 0 && spec.mode != "draft")) {
    return Status::errorf("draft-vocab applies to --spec draft and must be >= 0 (0: all) or auto, got {} with "
                          "mode '{}'", spec.draft_vocab, spec.mode);
  }
  if (spec.mode != "draft" && !spec.draft_model.empty()) {
    return Status::errorf("a draft model was given but the speculation mode is '{}' (use --spec draft)", spec.mode);
  }
  if (spec.tree_nodes < 0 || spec.tree_nodes > SpecOptions::kMaxTreeNodes) {
    return Status::errorf("draft-tree-nodes must be in [0, {}] (0: chains), got {}", SpecOptions::kMaxTreeNodes,
                          spec.tree_nodes);
  }
  if (spec.tree_topk < 1 || spec.tree_topk > 16) {
    return Status::errorf("draft-tree-topk must be in [1, 16], got {}", spec.tree_topk);
  }
  const int verify_tokens = 1 + std::max(spec.draft_max, spec.tree_nodes);
  if (options.n_batch < options.n_slots * verify_tokens) {
    return Status::errorf("batch size {} cannot hold a verify batch of {} tokens for each of {} slots", options.n_batch,
                          verify_tokens, options.n_slots);
  }
  return Status::ok();
}

// --cache-type-k/-v: the names llama.cpp uses for the types attention can read KV rows in.
Result<tensor::DType> parse_kv_type(const char* which, const std::string& name) {
  for (const tensor::DType type : {tensor::DType::f32, tensor::DType::f16, tensor::DType::q8_0}) {
    if (name == tensor::dtype_name(type)) return type;
  }
  return Status::errorf("cache-type-{} must be f32, f16 or q8_0, got '{}'", which, name);
}

}  // namespace

sampling::SamplingParams to_sampling_params(const SamplingParams& params) {
  sampling::SamplingParams converted;
  converted.temperature = params.temperature;
  converted.top_k = params.top_k;
  converted.top_p = params.top_p;
  converted.min_p = params.min_p;
  converted.repetition_penalty = params.repetition_penalty;
  converted.repeat_last_n = params.repeat_last_n;
  converted.seed = params.seed;
  return converted;
}

Result<std::unique_ptr<Engine>> EngineImpl::create(const EngineOptions& options) {
  if (options.n_slots < 1 || options.n_slots > 256) {
    return Status::errorf("slots must be in [1, 256], got {}", options.n_slots);
  }
  if (options.n_ctx < 8 || options.n_ctx > (1 << 22)) {
    return Status::errorf("context size must be in [8, 4194304], got {}", options.n_ctx);
  }
  if (options.n_batch < 1 || options.n_batch > 65536) {
    return Status::errorf("batch size must be in [1, 65536], got {}", options.n_batch);
  }
  if (options.n_threads < 0 || options.n_threads > 1024) {
    return Status::errorf("threads must be in [0, 1024], got {}", options.n_threads);
  }
  if (options.rewind_depth < 0 || options.rewind_depth > options.n_ctx) {
    return Status::errorf("rewind depth must be in [0, context size = {}], got {}", options.n_ctx,
                          options.rewind_depth);
  }
  if (options.cache_ram_mib < 0 || options.cache_ram_mib > (int64_t{1} << 24)) {
    return Status::errorf("cache RAM must be in [0, 16777216] MiB, got {}", options.cache_ram_mib);
  }
  if (options.checkpoint_every < 0) {
    return Status::errorf("checkpoint interval must be >= 0 tokens (0: prompt ends only), got {}",
                          options.checkpoint_every);
  }
  REWIND_RETURN_IF_ERROR(validate_spec(options.spec, options));
  REWIND_ASSIGN_OR_RETURN(const tensor::DType cache_type_k, parse_kv_type("k", options.cache_type_k));
  REWIND_ASSIGN_OR_RETURN(const tensor::DType cache_type_v, parse_kv_type("v", options.cache_type_v));
  std::unique_ptr<EngineImpl> engine(new EngineImpl());
  engine->options_ = options;
  if (options.on_load_progress) options.on_load_progress(0.0);
  REWIND_ASSIGN_OR_RETURN(engine->model_, model::Model::load(options.model_path));
  if (options.on_load_progress) options.on_load_progress(0.7);
  REWIND_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(engine->model_->file()));
  engine->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  auto chat = choose_chat_template(options, *engine->tokenizer_, engine->model_->hparams().arch,
                                   engine->chat_template_warning_);
  if (chat) {
    engine->chat_template_ = std::move(chat).value();
  } else {
    engine->chat_template_status_ = chat.status();  // reported by the chat calls: plain completion still works
  }
  if (engine->tokenizer_->n_vocab() > engine->model_->hparams().n_vocab) {
    return Status::errorf("{}: tokenizer has {} tokens but the model's output has {} rows", options.model_path,
                          engine->tokenizer_->n_vocab(), engine->model_->hparams().n_vocab);
  }
  engine->pool_ = std::make_unique<ThreadPool>(options.n_threads);
  const SpecOptions& spec = options.spec;
  const bool speculating = spec.mode != "none";
  const state::RollbackPolicy policy = state::parse_rollback_policy(spec.rollback).value();
  if (speculating && policy == state::RollbackPolicy::none && !engine->model_->recurrent_specs().empty()) {
    return Status::errorf(
        "{}: the {} model has recurrent layers, which rollback policy 'none' cannot roll back; use replay, "
        "snapshot or checkpoint, or --spec none",
        options.model_path, engine->model_->hparams().arch);
  }
  if (const Status types = state::KvCache::check_types(engine->model_->kv_specs(), cache_type_k, cache_type_v);
      !types) {
    return Status::errorf("{}: {}", options.model_path, types.message());
  }
  if (spec.tree_nodes > 0 && policy == state::RollbackPolicy::checkpoint && !engine->model_->recurrent_specs().empty()) {
    return Status::errorf("{}: tree drafts need the replay or snapshot rollback policy on the {} model's recurrent "
                          "layers (checkpoint re-runs a chain)", options.model_path, engine->model_->hparams().arch);
  }
  const int64_t max_txn_tokens = speculating ? 1 + std::max(spec.draft_max, spec.tree_nodes) : 0;
  state::StateOptions state_options{options.n_slots, options.n_ctx, policy, max_txn_tokens, options.rewind_depth};
  state_options.cache_type_k = cache_type_k;
  state_options.cache_type_v = cache_type_v;
  engine->state_ = std::make_unique<state::ModelState>(engine->model_->kv_specs(), engine->model_->recurrent_specs(),
                                                       state_options);
  engine->forward_ = std::make_unique<model::ForwardContext>(*engine->model_, *engine->pool_, options.n_batch);
  if (options.cache_ram_mib > 0) {
    engine->prompt_cache_ = std::make_unique<PromptCache>(static_cast<size_t>(options.cache_ram_mib) << 20);
  }
  if (spec.mode == "ngram") {
    engine->proposer_ = std::make_unique<spec::NgramProposer>(spec.ngram_min, spec.ngram_max);
  } else if (spec.mode == "draft") {
    const int64_t draft_vocab = spec.draft_vocab == SpecOptions::kDraftVocabAuto ? spec::DraftModelOptions::kAutoVocab
                                                                                   : spec.draft_vocab;
    spec::DraftModelOptions draft{spec.draft_model, options.n_slots, options.n_ctx, options.n_batch, spec.draft_max,
                                  policy, draft_vocab, {}};
    for (int32_t id = 0; id < engine->tokenizer_->n_vocab(); ++id) {
      if (engine->tokenizer_->is_control(id)) draft.control_ids.push_back(id);
    }
    REWIND_ASSIGN_OR_RETURN(auto proposer, spec::DraftModelProposer::create(draft, engine->model_->hparams().n_vocab,
                                                                            *engine->pool_));
    engine->proposer_ = std::move(proposer);
  } else if (spec.mode == "oracle") {
    engine->proposer_ = std::make_unique<spec::OracleProposer>(spec.oracle_error_rate, spec.oracle_seed,
                                                               engine->model_->hparams().n_vocab);
  } else if (spec.mode == "mtp") {
    REWIND_ASSIGN_OR_RETURN(auto proposer, spec::MtpProposer::create(*engine->model_, *engine->forward_,
                                                                     *engine->state_, options.n_batch));
    engine->proposer_ = std::move(proposer);
  }
  if (engine->proposer_) engine->proposer_cost_.set_max_catch_up_rows(engine->proposer_->max_catch_up_rows());
  if (speculating && spec.adaptive) {
    if (engine->assumed_costs()) {
      engine->assume_costs();
    } else {
      REWIND_RETURN_IF_ERROR(engine->calibrate_costs());
    }
  }
  engine->slots_.resize(static_cast<size_t>(options.n_slots));
  for (int i = 0; i < options.n_slots; ++i) engine->slots_[i].index = i;
  if (options.on_load_progress) options.on_load_progress(1.0);

  const model::HParams& hp = engine->model_->hparams();
  ModelInfo& info = engine->info_;
  info.architecture = hp.arch;
  info.name = hp.name;
  info.n_vocab = hp.n_vocab;
  info.n_ctx_train = hp.n_ctx_train;
  info.n_ctx = options.n_ctx;
  info.n_layer = hp.n_layer;
  info.n_embd = hp.n_embd;
  info.n_params = engine->model_->n_params();
  info.weight_bytes_per_token = engine->model_->weight_bytes_per_token();
  info.kv_bytes_per_slot = engine->state_->kv().bytes_per_slot();
  info.conv_bytes_per_slot = engine->state_->recurrent().conv_bytes_per_slot();
  info.recurrent_bytes_per_slot = engine->state_->recurrent().ssm_bytes_per_slot();
  info.n_threads = engine->pool_->n_threads();
  info.isa = compute::cpu_kernel_set();
  return std::unique_ptr<Engine>(std::move(engine));
}

Result<std::vector<int32_t>> EngineImpl::tokenize(const std::string& text, bool add_bos, bool parse_special) const {
  return tokenizer_->encode(text, add_bos, parse_special);
}

std::string EngineImpl::detokenize(const std::vector<int32_t>& ids) const {
  auto text = tokenizer_->decode(ids);
  return text.is_ok() ? *text : std::string();
}

Result<const tokenizer::ChatTemplate*> EngineImpl::chat_template() const {
  if (!chat_template_) return chat_template_status_;
  if (!chat_template_warning_.empty()) {
    std::call_once(chat_template_warned_, [this] { log_warn("{}", chat_template_warning_); });
  }
  return &*chat_template_;
}

// The template renders as the file carries it, default system text included (SmolLM2's, Qwen2.5's), as HF
// transformers and llama.cpp's Jinja path render it; `--chat-template NAME` picks a built-in instead.
Result<std::string> EngineImpl::format_chat(const std::vector<ChatMessage>& messages) const {
  REWIND_ASSIGN_OR_RETURN(const tokenizer::ChatTemplate* chat, chat_template());
  return chat->apply(template_messages(messages), /*add_generation_prompt=*/true);
}

Result<std::vector<int32_t>> EngineImpl::tokenize_chat(const std::vector<ChatMessage>& messages) const {
  REWIND_ASSIGN_OR_RETURN(const tokenizer::ChatTemplate* chat, chat_template());
  REWIND_ASSIGN_OR_RETURN(tokenizer::MarkedPrompt prompt,
                          chat->apply_marked(template_messages(messages), /*add_generation_prompt=*/true, *tokenizer_));
  return tokenizer_->encode(prompt.text, tokenizer_->add_bos_default(), prompt.literal);
}

bool EngineImpl::add_bos_default() const { return tokenizer_->add_bos_default(); }

Result<int64_t> EngineImpl::submit(Request request, std::function<void(const TokenEvent&)> on_token) {
  const int64_t n_prompt = static_cast<int64_t>(request.prompt_ids.size());
  if (n_prompt == 0) return Status::error("prompt is empty: at least one token is needed");
  if (n_prompt >= options_.n_ctx) {
    return Status::errorf("prompt of {} tokens does not fit the context of {} positions (leave room for output)",
                          n_prompt, options_.n_ctx);
  }
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    const int32_t id = request.prompt_ids[i];
    if (id < 0 || id >= info_.n_vocab) {
      return Status::errorf("prompt token {} at index {} is outside the vocabulary [0, {})", id, i, info_.n_vocab);
    }
  }
  if (request.max_tokens < 1) return Status::errorf("max_tokens must be at least 1, got {}", request.max_tokens);
  if (request.top_logprobs < 0 || request.top_logprobs > 100) {
    return Status::errorf("top_logprobs must be in [0, 100], got {}", request.top_logprobs);
  }
  for (size_t i = 0; i < request.oracle_ids.size(); ++i) {
    if (request.oracle_ids[i] < 0 || request.oracle_ids[i] >= info_.n_vocab) {
      return Status::errorf("oracle token {} at index {} is outside the vocabulary [0, {})", request.oracle_ids[i], i,
                            info_.n_vocab);
    }
  }
  REWIND_RETURN_IF_ERROR(sampling::validate(to_sampling_params(request.sampling)));
  REWIND_RETURN_IF_ERROR(validate_request_spec(request.spec));
  const int64_t id = next_request_id_++;
  pending_.push_back({id, std::move(request), std::move(on_token)});
  return id;
}

Status EngineImpl::validate_request_spec(const RequestSpec& spec) const {
  const std::string& engine_mode = options_.spec.mode;
  if (!spec.mode.empty() && spec.mode != "none" && spec.mode != engine_mode) {
    if (engine_mode == "none") {
      return Status::errorf("speculation '{}' is not available: this engine does not speculate (only 'none')",
                            spec.mode);
    }
    return Status::errorf("speculation '{}' is not available: this engine speculates with '{}' (or 'none')", spec.mode,
                          engine_mode);
  }
  if (spec.draft_max != 0 && spec.mode != "none") {
    if (engine_mode == "none") {
      return Status::errorf("draft_max {} was asked for but this engine does not speculate", spec.draft_max);
    }
    if (spec.draft_max < 1 || spec.draft_max > options_.spec.draft_max) {
      return Status::errorf("draft_max must be in [1, {}] (the engine's limit), got {}", options_.spec.draft_max,
                            spec.draft_max);
    }
  }
  if (spec.tree_nodes != -1 && spec.mode != "none") {
    if (spec.tree_nodes < 0 || spec.tree_nodes > options_.spec.tree_nodes) {
      return Status::errorf("tree nodes must be in [0, {}] (the engine's --draft-tree-nodes; 0: chains), got {}",
                            options_.spec.tree_nodes, spec.tree_nodes);
    }
  }
  return Status::ok();
}

bool EngineImpl::idle() const {
  if (!pending_.empty()) return false;
  return std::none_of(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.busy; });
}

void EngineImpl::cancel(int64_t request_id) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->id == request_id) {
      TokenEvent event;
      event.request_id = request_id;
      event.done = true;
      event.finish_reason = FinishReason::cancelled;
      auto callback = std::move(it->on_token);
      pending_.erase(it);
      if (callback) callback(event);
      return;
    }
  }
  for (Slot& slot : slots_) {
    if (slot.busy && slot.request_id == request_id) slot.cancelled = true;
  }
}

RequestTimings EngineImpl::timings(int64_t request_id) const {
  auto it = finished_timings_.find(request_id);
  if (it != finished_timings_.end()) return it->second;
  for (const Slot& slot : slots_) {
    if (slot.busy && slot.request_id == request_id) return slot.timings;
  }
  return {};
}

void EngineImpl::finish(Slot& slot, FinishReason reason, const std::string& error) {
  TokenEvent event;
  event.request_id = slot.request_id;
  event.error = error;
  event.text = slot.decoder->flush();
  event.done = true;
  event.finish_reason = reason;
  const auto now = Clock::now();
  if (slot.n_generated > 0) slot.timings.generation_seconds = seconds_between(slot.first_token_time, now);
  fill_spec_stats(slot);
  if (finished_timings_.size() >= kMaxFinishedTimings) finished_timings_.erase(finished_timings_.begin());
  finished_timings_[slot.request_id] = slot.timings;
  auto callback = std::move(slot.on_token);
  slot.busy = false;
  // A request that ended normally leaves the state of exactly tokens[0, n_computed) (see emit for end tokens).
  slot.holds_state = reason != FinishReason::error && slot.n_computed <= static_cast<int64_t>(slot.tokens.size());
  if (reason == FinishReason::error) {
    state_->reset_slot(slot.index);
    if (proposer_) proposer_->start_sequence(slot.index, 0, /*kept_from_slot=*/true);
    slot.n_computed = 0;
  }
  slot.on_token = nullptr;
  slot.sampler.reset();
  slot.decoder.reset();
  if (callback) callback(event);
}

void EngineImpl::fail(Slot& slot, std::string_view stage, const Status& status) {
  log_warn("request {} failed at {}: {}", slot.request_id, stage, status.message());
  finish(slot, FinishReason::error, fmt::format("{} failed: {}", stage, status.message()));
}

Status EngineImpl::injected_fault(const Slot& slot, std::string_view stage) const {
  return options_.inject_fault ? options_.inject_fault(stage, slot.request_id) : Status::ok();
}

void EngineImpl::handle_logits(Slot& slot, const float* logits) {
  const int32_t token = slot.sampler->sample(std::span<const float>(logits, static_cast<size_t>(info_.n_vocab)));
  slot.sampler->accept(token);
  emit(slot, token, logits);
}

// Delivers one sampled token (already passed to the sampler's history): finishes on end-of-generation, the
// token limit or a full context.
void EngineImpl::emit(Slot& slot, int32_t token, const float* logits_row) {
  TokenEvent event;
  event.request_id = slot.request_id;
  if (slot.request.logprobs) {
    event.logprob = sampling::token_logprob(std::span<const float>(logits_row, static_cast<size_t>(info_.n_vocab)),
                                            token);
  }
  if (slot.request.top_logprobs > 0) {
    const std::span<const float> row(logits_row, static_cast<size_t>(info_.n_vocab));
    for (const sampling::TokenLogprob& entry : sampling::top_k_logprobs(row, slot.request.top_logprobs)) {
      event.top.push_back({entry.id, entry.logprob});
    }
  }
  if (slot.n_generated == 0) {
    slot.first_token_time = Clock::now();
    slot.timings.prompt_seconds = seconds_between(slot.start_time, slot.first_token_time);
  }
  if (!slot.request.ignore_eos && tokenizer_->is_eog(token)) {
    // An accepted draft's end token is in the state already: the slot's tokens follow it for reuse.
    if (slot.n_computed > static_cast<int64_t>(slot.tokens.size())) slot.tokens.push_back(token);
    finish(slot, FinishReason::eos);
    return;
  }
  slot.tokens.push_back(token);
  ++slot.n_generated;
  slot.timings.n_generated_tokens = slot.n_generated;
  event.token = token;
  event.text = slot.decoder->push(token);
  const bool at_limit = slot.n_generated >= slot.request.max_tokens;
  const bool context_full = static_cast<int64_t>(slot.tokens.size()) >= options_.n_ctx;
  if (slot.on_token) slot.on_token(event);
  if (at_limit || context_full) finish(slot, FinishReason::length);
}

StateReport EngineImpl::state_report() const {
  const state::StateBytes bytes = state_->bytes(pool_->n_threads());
  StateReport report;
  report.rollback = std::string(state::rollback_policy_name(state_->policy()));
  report.n_slots = options_.n_slots;
  report.max_draft = proposer_ ? options_.spec.draft_max : 0;
  report.tree_nodes = proposer_ ? options_.spec.tree_nodes : 0;
  report.bytes_per_node = state_->record_bytes_per_token();
  report.full_state_per_node = static_cast<size_t>(state_->recurrent().slot_floats()) * sizeof(float);
  report.kv = bytes.kv;
  report.conv = bytes.conv;
  report.recurrent = bytes.recurrent;
  report.records = bytes.records;
  report.snapshots = bytes.snapshots;
  report.checkpoint_copies = bytes.checkpoint_copies;
  report.scratch = bytes.scratch;
  report.rewind = bytes.rewind;
  report.draft_model = proposer_ ? proposer_->state_bytes() : 0;
  return report;
}

EngineStatus EngineImpl::status() const {
  EngineStatus status;
  status.n_queued = static_cast<int64_t>(pending_.size());
  if (prompt_cache_) {
    status.n_checkpoints = prompt_cache_->n_entries();
    status.checkpoint_bytes = prompt_cache_->bytes();
  }
  for (const Slot& slot : slots_) {
    SlotStatus entry;
    entry.index = slot.index;
    entry.busy = slot.busy;
    entry.n_cached = slot.busy || slot.holds_state ? slot.n_computed : 0;
    if (slot.busy) {
      entry.request_id = slot.request_id;
      entry.n_prompt = slot.n_prompt;
      entry.n_computed = slot.n_computed;
      entry.n_generated = slot.n_generated;
      entry.speculating = slot.policy.has_value();
      entry.backed_off = slot.policy && slot.policy->backed_off();
      entry.drafted = slot.timings.spec.drafted;
      entry.accepted = slot.timings.spec.accepted;
      entry.acceptance_estimate = slot.policy ? slot.policy->acceptance() : 0.0;
    }
    status.slots.push_back(entry);
  }
  return status;
}

Status EngineImpl::step() {
  for (Slot& slot : slots_) {
    if (slot.busy && slot.cancelled) finish(slot, FinishReason::cancelled);
  }
  assign_pending();
  for (Slot& slot : slots_) {
    if (!slot.busy) continue;
    if (Status fault = injected_fault(slot, "forward"); !fault) fail(slot, "forward", fault);
  }
  batch_.clear();
  std::vector<SlotRun> runs;
  int64_t budget = options_.n_batch;
  const auto start = Clock::now();
  schedule_decode(runs, budget);
  // Prompt chunks with what is left of the budget.
  for (Slot& slot : slots_) {
    if (!slot.busy || budget == 0 || slot.n_computed >= slot.n_prompt) continue;
    const int64_t n_wanted = slot.n_prompt - slot.n_computed;
    const int64_t n_take = std::min(n_wanted, budget);
    SlotRun run;
    run.slot = slot.index;
    run.first_position = slot.n_computed;
    run.n_tokens = n_take;
    for (int64_t i = 0; i < n_take; ++i) {
      const int64_t pos = slot.n_computed + i;
      const bool last = i == n_wanted - 1;
      if (last) run.logit_row = batch_.n_logit_rows();
      batch_.add(slot.tokens[pos], static_cast<int32_t>(pos), slot.index, last);
    }
    slot.n_computed += n_take;
    budget -= n_take;
    runs.push_back(std::move(run));
  }
  if (batch_.size() == 0) return Status::ok();
  if (const Status forwarded = forward_->forward(batch_, *state_, logits_); !forwarded) {
    // The forward may have written part of every run's state: their requests fail, the other slots go on.
    for (SlotRun& run : runs) {
      run.txn.reset();
      fail(slots_[run.slot], "forward", forwarded);
    }
    return Status::ok();
  }
  // Only warm decode and verify steps inform the draft-length policy: a prompt chunk of the same size costs
  // differently (other slots' prompts, long attention spans), and the first steps after a prompt run slow
  // (on the trained hybrid the first plain step took 730 µs against 440 later), for plain decoding as for a
  // round, so a round timed then would make its size look dear until it was timed again, which the policy,
  // seeing the size as too dear to draft, might never do.
  const bool warm_decode = std::all_of(runs.begin(), runs.end(), [&](const SlotRun& run) {
    const Slot& slot = slots_[run.slot];
    return slot.n_prompt <= run.first_position && slot.n_generated >= kColdSteps;
  });
  // Runs are in batch order; their rows follow each other.
  int64_t row = 0;
  for (SlotRun& run : runs) {
    run_first_row_ = row;
    row += run.n_tokens;
    Slot& slot = slots_[run.slot];
    if (run.txn) {
      if (const Status verified = finish_spec_run(slot, run); !verified) {
        run.txn.reset();
        fail(slot, "verify", verified);
      }
      continue;
    }
    if (proposer_) {
      const Status followed = proposer_->on_target_forward(run.slot, run.first_position, run.n_tokens, run.n_tokens,
                                                           forward_->hidden_rows() + run_first_row_ * info_.n_embd);
      if (!followed) {
        fail(slot, "propose", followed);
        continue;
      }
    }
    if (run.first_position < slot.n_prompt) {
      maybe_save_checkpoint(slot);
      if (const Status followed = follow_prompt(slot); !followed) {
        fail(slot, "propose", followed);
        continue;
      }
    }
    if (run.logit_row < 0) continue;
    if (Status fault = injected_fault(slot, "sample"); !fault) {
      fail(slot, "sample", fault);
      continue;
    }
    handle_logits(slot, logits_.data() + run.logit_row * info_.n_vocab);
  }
  if (warm_decode) {
    // The whole step but the proposer's part, which is priced by draft size and tokens owed: the forward, and
    // the verification, commit and emission a round adds to a plain step's sampling.
    if (!assumed_costs()) {
      cost_.observe(static_cast<int64_t>(runs.size()), batch_.size(),
                    seconds_between(start, Clock::now()) - propose_seconds_ - catch_up_seconds_);
    }
    settle_rounds(runs);
  }
  return Status::ok();
}

}  // namespace rwd::runtime
