#include "runtime/engine_impl.h"

#include <algorithm>
#include <chrono>

#include "kernels/cpu/vec_dot.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_template.h"

namespace rwd {

Result<std::unique_ptr<Engine>> Engine::open(const EngineOptions& options) {
  return runtime::EngineImpl::create(options);
}

}  // namespace rwd

namespace rwd::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

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

// Bounded so a long-running server does not grow without limit; the CLI reads its timings right away.
constexpr size_t kMaxFinishedTimings = 4096;

}  // namespace

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
  std::unique_ptr<EngineImpl> engine(new EngineImpl());
  engine->options_ = options;
  if (options.on_load_progress) options.on_load_progress(0.0);
  REWIND_ASSIGN_OR_RETURN(engine->model_, model::Model::load(options.model_path));
  if (options.on_load_progress) options.on_load_progress(0.7);
  REWIND_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(engine->model_->file()));
  engine->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  if (engine->tokenizer_->n_vocab() > engine->model_->hparams().n_vocab) {
    return Status::errorf("{}: tokenizer has {} tokens but the model's output has {} rows", options.model_path,
                          engine->tokenizer_->n_vocab(), engine->model_->hparams().n_vocab);
  }
  engine->pool_ = std::make_unique<ThreadPool>(options.n_threads);
  engine->state_ = std::make_unique<state::ModelState>(engine->model_->kv_specs(), engine->model_->recurrent_specs(),
                                                       options.n_slots, options.n_ctx);
  engine->forward_ = std::make_unique<model::ForwardContext>(*engine->model_, *engine->pool_, options.n_batch);
  engine->slots_.resize(static_cast<size_t>(options.n_slots));
  for (int i = 0; i < options.n_slots; ++i) engine->slots_[i].index = i;
  if (options.on_load_progress) options.on_load_progress(1.0);

  const model::HParams& hp = engine->model_->hparams();
  ModelInfo& info = engine->info_;
  info.architecture = hp.arch;
  info.name = hp.name;
  info.n_vocab = hp.n_vocab;
  info.n_ctx_train = hp.n_ctx_train;
  info.n_layer = hp.n_layer;
  info.n_embd = hp.n_embd;
  info.n_params = engine->model_->n_params();
  info.weight_bytes_per_token = engine->model_->weight_bytes_per_token();
  info.kv_bytes_per_slot = engine->state_->kv().bytes_per_slot();
  info.conv_bytes_per_slot = engine->state_->recurrent().conv_bytes_per_slot();
  info.recurrent_bytes_per_slot = engine->state_->recurrent().ssm_bytes_per_slot();
  info.n_threads = engine->pool_->n_threads();
  info.isa = kernels::cpu::isa_name();
  return std::unique_ptr<Engine>(std::move(engine));
}

Result<std::vector<int32_t>> EngineImpl::tokenize(const std::string& text, bool add_bos, bool parse_special) const {
  return tokenizer_->encode(text, add_bos, parse_special);
}

std::string EngineImpl::detokenize(const std::vector<int32_t>& ids) const {
  auto text = tokenizer_->decode(ids);
  return text.is_ok() ? *text : std::string();
}

Result<std::string> EngineImpl::format_chat(const std::vector<ChatMessage>& messages) const {
  // Like llama.cpp's llama_chat_apply_template, the family's format is used as written, without a default
  // system message that a template may insert (SmolLM2's makes its Q4_1 build answer nonsense); callers
  // that want one pass it as the first message.
  tokenizer::ChatFormat format = tokenizer::ChatFormat::chatml;
  if (!options_.chat_template.empty()) {
    REWIND_ASSIGN_OR_RETURN(tokenizer::ChatTemplate named, tokenizer::ChatTemplate::from_name(options_.chat_template));
    format = named.format();
  } else if (tokenizer_->chat_template().empty() && info_.architecture.rfind("gemma", 0) == 0) {
    format = tokenizer::ChatFormat::gemma;  // Gemma GGUFs often ship without a template; their format is fixed
  } else if (tokenizer_->chat_template().empty()) {
    return Status::errorf(
        "{}: the model has no chat template (tokenizer.chat_template); choose one with --chat-template "
        "chatml|gemma|llama3",
        options_.model_path);
  } else {
    auto detected = tokenizer::ChatTemplate::from_jinja(tokenizer_->chat_template());
    if (!detected) return detected.status().with_context(options_.model_path);
    format = detected->format();
  }
  static constexpr const char* kFormatNames[] = {"chatml", "gemma", "llama3"};
  REWIND_ASSIGN_OR_RETURN(tokenizer::ChatTemplate chat,
                          tokenizer::ChatTemplate::from_name(kFormatNames[static_cast<int>(format)]));
  std::vector<tokenizer::ChatMessage> converted;
  converted.reserve(messages.size());
  for (const ChatMessage& message : messages) converted.push_back({message.role, message.content});
  return chat.apply(converted, /*add_generation_prompt=*/true);
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
  REWIND_RETURN_IF_ERROR(sampling::validate(to_sampling_params(request.sampling)));
  const int64_t id = next_request_id_++;
  pending_.push_back({id, std::move(request), std::move(on_token)});
  return id;
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

void EngineImpl::assign_pending() {
  for (Slot& slot : slots_) {
    if (pending_.empty()) return;
    if (slot.busy) continue;
    Pending next = std::move(pending_.front());
    pending_.pop_front();
    slot.busy = true;
    slot.cancelled = false;
    slot.request_id = next.id;
    slot.request = std::move(next.request);
    slot.on_token = std::move(next.on_token);
    slot.tokens = slot.request.prompt_ids;
    slot.n_prompt = static_cast<int64_t>(slot.tokens.size());
    slot.n_computed = 0;
    slot.n_generated = 0;
    state_->reset_slot(slot.index);
    // Validated in submit(), so creation cannot fail here.
    slot.sampler.emplace(std::move(sampling::Sampler::create(to_sampling_params(slot.request.sampling)).value()));
    for (int32_t token : slot.tokens) slot.sampler->accept(token);
    slot.decoder.emplace(*tokenizer_);
    slot.timings = RequestTimings{};
    slot.timings.n_prompt_tokens = slot.n_prompt;
    slot.start_time = Clock::now();
  }
}

void EngineImpl::finish(Slot& slot, FinishReason reason) {
  TokenEvent event;
  event.request_id = slot.request_id;
  event.text = slot.decoder->flush();
  event.done = true;
  event.finish_reason = reason;
  const auto now = Clock::now();
  if (slot.n_generated > 0) slot.timings.generation_seconds = seconds_between(slot.first_token_time, now);
  if (finished_timings_.size() >= kMaxFinishedTimings) finished_timings_.erase(finished_timings_.begin());
  finished_timings_[slot.request_id] = slot.timings;
  auto callback = std::move(slot.on_token);
  slot.busy = false;
  slot.on_token = nullptr;
  slot.sampler.reset();
  slot.decoder.reset();
  if (callback) callback(event);
}

void EngineImpl::handle_logits(Slot& slot, const float* logits) {
  const std::span<const float> row(logits, static_cast<size_t>(info_.n_vocab));
  TokenEvent event;
  event.request_id = slot.request_id;
  if (slot.request.top_logprobs > 0) {
    for (const sampling::TokenLogprob& entry : sampling::top_k_logprobs(row, slot.request.top_logprobs)) {
      event.top.push_back({entry.id, entry.logprob});
    }
  }
  const int32_t token = slot.sampler->sample(row);
  if (slot.n_generated == 0) {
    slot.first_token_time = Clock::now();
    slot.timings.prompt_seconds = seconds_between(slot.start_time, slot.first_token_time);
  }
  if (!slot.request.ignore_eos && tokenizer_->is_eog(token)) {
    finish(slot, FinishReason::eos);
    return;
  }
  slot.sampler->accept(token);
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

Status EngineImpl::step() {
  for (Slot& slot : slots_) {
    if (slot.busy && slot.cancelled) finish(slot, FinishReason::cancelled);
  }
  assign_pending();
  batch_.clear();
  std::vector<int> logit_slots;
  // Decode tokens first (one per slot, they bound latency), then prompt chunks with what is left.
  int64_t budget = options_.n_batch;
  for (int pass = 0; pass < 2; ++pass) {
    for (Slot& slot : slots_) {
      if (!slot.busy || budget == 0) continue;
      const int64_t n_wanted = static_cast<int64_t>(slot.tokens.size()) - slot.n_computed;
      const bool decoding = slot.n_computed >= slot.n_prompt;
      if (n_wanted <= 0 || decoding != (pass == 0)) continue;
      const int64_t n_take = std::min(n_wanted, budget);
      for (int64_t i = 0; i < n_take; ++i) {
        const int64_t pos = slot.n_computed + i;
        const bool last = i == n_wanted - 1;
        batch_.add(slot.tokens[pos], static_cast<int32_t>(pos), slot.index, last);
      }
      if (n_take == n_wanted) logit_slots.push_back(slot.index);
      slot.n_computed += n_take;
      budget -= n_take;
    }
  }
  if (batch_.size() == 0) return Status::ok();
  REWIND_RETURN_IF_ERROR(forward_->forward(batch_, *state_, logits_));
  // Logit rows come in batch order, which is the order slots were added above.
  for (size_t r = 0; r < logit_slots.size(); ++r) {
    handle_logits(slots_[logit_slots[r]], logits_.data() + r * info_.n_vocab);
  }
  return Status::ok();
}

}  // namespace rwd::runtime
