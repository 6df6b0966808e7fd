// The public API of rewind: open a model, submit requests, step the engine, read results and statistics.
// The CLI and the server use nothing else; no tensor, kernel or state type appears here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace rwd {

struct EngineOptions {
  std::string model_path;
  int n_threads = 0;        // 0: one per core
  int n_ctx = 4096;         // positions per slot
  int n_slots = 1;          // sequences decoded together
  int n_batch = 512;        // most tokens in one forward (prompt chunking)
  std::string chat_template;  // "chatml", "gemma" or "llama3"; empty: the family of the GGUF's template
  std::function<void(double fraction)> on_load_progress;  // may be empty
};

struct SamplingParams {
  float temperature = 0.8f;  // 0: greedy
  int top_k = 40;            // 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float repetition_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

struct ChatMessage {
  std::string role;
  std::string content;
};

struct Request {
  std::vector<int32_t> prompt_ids;  // exactly these ids (use Engine::tokenize or format_chat to make them)
  int max_tokens = 128;
  SamplingParams sampling;
  bool ignore_eos = false;
  int top_logprobs = 0;             // > 0: report the K most likely tokens at every step
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

enum class FinishReason { none, length, eos, cancelled, error };

// One generated token, delivered as soon as it is known.
struct TokenEvent {
  int64_t request_id = 0;
  int32_t token = -1;
  std::string text;                   // UTF-8 text completed by this token (may be empty mid-character)
  std::vector<TokenLogprob> top;      // when top_logprobs > 0
  bool done = false;
  FinishReason finish_reason = FinishReason::none;
};

struct RequestTimings {
  int64_t n_prompt_tokens = 0;
  int64_t n_generated_tokens = 0;
  double prompt_seconds = 0.0;
  double generation_seconds = 0.0;
};

struct ModelInfo {
  std::string architecture;
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  size_t n_params = 0;
  size_t weight_bytes_per_token = 0;  // bytes a decode step reads from weights
  size_t kv_bytes_per_slot = 0;         // KV rows at the full context
  size_t conv_bytes_per_slot = 0;       // convolution windows of the recurrent layers
  size_t recurrent_bytes_per_slot = 0;  // recurrent (SSM / delta-rule) states
  int n_threads = 0;
  std::string isa;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> open(const EngineOptions& options);
  virtual ~Engine() = default;

  virtual const ModelInfo& info() const = 0;

  virtual Result<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos, bool parse_special) const = 0;
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  // Formats messages with the model's chat template and adds the assistant turn's opening.
  virtual Result<std::string> format_chat(const std::vector<ChatMessage>& messages) const = 0;
  virtual bool add_bos_default() const = 0;

  // Queues a request; on_token is called from step() for every generated token and once with done = true.
  virtual Result<int64_t> submit(Request request, std::function<void(const TokenEvent&)> on_token) = 0;
  // Runs one engine step over every active slot; returns an error only for internal failures.
  virtual Status step() = 0;
  virtual bool idle() const = 0;
  virtual void cancel(int64_t request_id) = 0;
  virtual RequestTimings timings(int64_t request_id) const = 0;
};

}  // namespace rwd
