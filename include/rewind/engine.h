// The public API of rewind: open a model, submit requests, step the engine, read results and statistics.
// The CLI and the server use nothing else; no tensor, kernel or state type appears here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rwd {

// Speculative decoding (DESIGN §5, §6). The output is the same as without it: greedy output token for token,
// sampled output in distribution.
struct SpecOptions {
  std::string mode = "none";       // none | ngram | draft | mtp | oracle (measurements: see Request)
  std::string draft_model;         // draft: a GGUF with the target's vocabulary
  int draft_max = 8;               // most tokens drafted per round
  int draft_min = 1;               // fewest, when the policy drafts at all
  // draft: score only token ids below this, the frequent ids of a BPE vocabulary, in rounds whose recent tokens
  // mostly lie there (0: the whole vocabulary; auto: 32768 for drafts of more than 65536 ids, else 0).
  static constexpr int64_t kDraftVocabAuto = -1;
  int64_t draft_vocab = kDraftVocabAuto;
  std::string rollback = "replay";  // replay | snapshot | checkpoint | none
  // ngram: lookup sizes, longest first. Matches shorter than 3 tokens draft mostly noise: on code-editing
  // prompts with Qwen2.5-Coder-1.5B, 3..8 ran 1.24x plain where 1..3 ran 1.12x (README, speculation options).
  int ngram_min = 3;
  int ngram_max = 8;
  static constexpr int kMaxNgram = 16;
  // Tree drafts (every proposer; a draft model's only when greedy): at most this many tokens per round, branching where the proposer has
  // alternatives, at most tree_topk children per token; the draft length is then the tree's depth. 0: chains.
  int tree_nodes = 0;
  int tree_topk = 4;
  static constexpr int kMaxTreeNodes = 64;
  bool adaptive = true;            // adapt the draft length per slot and back off when speculation loses
  // Costs the adaptive policy assumes instead of timing steps (at load and as it runs), in plain steps of a
  // slot: each verify token past a slot's first costs assumed_verify_token, each drafted token (and each token
  // a proposer catches up on) assumed_draft_token. Set, the policy's choices rest on acceptance alone and
  // repeat on every machine and run: for tests of what it chooses, and comparisons of policies that timing
  // noise would blur. 0: timed.
  double assumed_verify_token = 0.0;
  double assumed_draft_token = 0.0;
  static constexpr double kMaxAssumedCost = 16.0;
  double oracle_error_rate = 0.0;  // oracle: probability that a drafted token is replaced by a wrong one
  uint64_t oracle_seed = 1;
};

struct EngineOptions {
  std::string model_path;
  int n_threads = 0;        // 0: one per core
  int n_ctx = 4096;         // positions per slot
  int n_slots = 1;          // sequences decoded together
  int n_batch = 512;        // most tokens in one forward (prompt chunking)
  int rewind_depth = 0;     // committed tokens per slot that can be rolled back exactly; 0: off, no memory
  // How KV rows are stored: f32, f16 (half the memory; rewind serve/run default, as llama.cpp) or q8_0 (heads of
  // whole 32-value blocks). Every token reads back what was stored, so outputs stay exact under any batching.
  std::string cache_type_k = "f32";
  std::string cache_type_v = "f32";
  // Prompt reuse (see Request::cache_prompt): host memory for checkpoints of the recurrent state after each
  // prompt, restored when a later prompt diverges from a slot's tokens further back than the rewind depth, and
  // for archives of the sequences that requests displace from their slots (KV rows and state), restored into
  // any slot; 0: neither (a slot's own state is still reused where it can be rewound to the divergence).
  int64_t cache_ram_mib = 0;
  int64_t checkpoint_every = 1024;  // with cache_ram_mib: a checkpoint every this many tokens of long prompts too
  std::string chat_template;  // a built-in template, "chatml", "gemma" or "llama3"; empty: the GGUF's own
  std::function<void(double fraction)> on_load_progress;  // may be empty
  // Tests only: called for every busy slot at each stage of a step ("propose", "forward", "verify", "sample");
  // an error fails that slot's request as a failure at that stage would. Empty in production.
  std::function<Status(std::string_view stage, int64_t request_id)> inject_fault;
  SpecOptions spec;
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

// A request's own speculation, within the engine's: it can only switch it off or draft less.
struct RequestSpec {
  std::string mode;   // empty: the engine's mode; "none": decode plainly; otherwise it must name the engine's mode
  int draft_max = 0;  // 0: the engine's; otherwise in [1, the engine's draft_max]
  int tree_nodes = -1;  // -1: the engine's; 0: chains; otherwise in [1, the engine's tree_nodes]
};

struct Request {
  std::vector<int32_t> prompt_ids;  // exactly these ids (use Engine::tokenize or tokenize_chat to make them)
  int max_tokens = 128;
  SamplingParams sampling;
  bool ignore_eos = false;
  bool logprobs = false;            // report each generated token's log-probability
  int top_logprobs = 0;             // > 0: report the K most likely tokens at every step
  RequestSpec spec;
  std::vector<int32_t> oracle_ids;  // --spec oracle: the continuation the oracle drafts from (none: no drafts)
  // Start from the state of the idle slot (or the checkpoint) that holds the longest prefix of the prompt
  // instead of computing it all; the output is the same either way.
  bool cache_prompt = true;
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
  float logprob = 0.0f;               // when the request asked for logprobs
  std::vector<TokenLogprob> top;      // when top_logprobs > 0
  bool done = false;
  FinishReason finish_reason = FinishReason::none;
  std::string error;  // finish_reason == error: what failed
};

// What speculation did for one request.
struct SpecStats {
  int64_t rounds = 0;                       // verify forwards with at least one drafted token
  int64_t drafted = 0;
  int64_t accepted = 0;
  std::vector<int64_t> drafted_by_position;   // [i]: rounds that drafted an (i+1)-th token
  std::vector<int64_t> accepted_by_position;  // [i]: rounds whose (i+1)-th draft token was accepted
  // Tree rounds count by depth: [i] above is rounds that drafted a token at depth i + 1 / accepted one there.
  int64_t tree_rounds = 0;                  // rounds whose draft branched
  int64_t tree_nodes = 0;                   // tokens those rounds verified (drafted counts them too)
  int64_t rollbacks = 0;                    // rounds that rejected part of the draft
  size_t rollback_bytes_written = 0;        // target state bytes written by the rollback policy
  size_t rollback_bytes_copied = 0;         // of which full-state copies
  int64_t plain_steps = 0;                  // steps the draft-length policy decoded without drafting
  int64_t fallbacks = 0;                    // times the policy switched speculation off
  int64_t budget_plain_steps = 0;           // of plain_steps: a round the loss budget could not bear
  double budget_balance = 0.0;              // plain steps the rounds gained (+) or lost (-), as the policy counts
  std::vector<int64_t> rounds_by_length;    // [k]: rounds the policy drafted k tokens
  double final_acceptance_estimate = 0.0;   // the policy's per-token acceptance estimate at the end
};

struct RequestTimings {
  int64_t n_prompt_tokens = 0;
  int64_t n_cached_tokens = 0;  // of the prompt's tokens, those taken from a slot's state or a checkpoint
  int64_t n_generated_tokens = 0;
  double prompt_seconds = 0.0;
  double generation_seconds = 0.0;
  SpecStats spec;
};

// State memory of the engine's slots by kind, at its context, slot count and draft depth.
struct StateReport {
  std::string rollback;
  int n_slots = 0;
  int max_draft = 0;
  size_t kv = 0;  // allocated now: KV rows grow with the positions slots hold (ModelInfo has the full size)
  size_t conv = 0;
  size_t recurrent = 0;
  size_t records = 0;
  size_t snapshots = 0;
  size_t checkpoint_copies = 0;
  size_t scratch = 0;
  size_t rewind = 0;       // --rewind-depth: lagging checkpoints and their rings of records
  size_t draft_model = 0;  // the draft model's own state, all kinds
  int tree_nodes = 0;      // the tree budget (--draft-tree-nodes), 0: chains
  // What one drafted token (a tree node) costs in rollback state: its records (replay), against one full
  // recurrent state (conv windows and states) per node, as engines that keep a state per tree node hold.
  size_t bytes_per_node = 0;
  size_t full_state_per_node = 0;
};

// What one slot is doing, for monitoring.
struct SlotStatus {
  int index = 0;
  bool busy = false;
  int64_t request_id = 0;
  int64_t n_prompt = 0;
  int64_t n_computed = 0;  // positions whose state is written (prompt progress)
  int64_t n_generated = 0;
  int64_t n_cached = 0;      // tokens whose state the slot holds for the next request to reuse
  bool speculating = false;  // the request drafts; false when speculation is off for it
  bool backed_off = false;   // the draft-length policy switched drafting off for now (it probes again later)
  int64_t drafted = 0;
  int64_t accepted = 0;
  double acceptance_estimate = 0.0;
};

struct EngineStatus {
  int64_t n_queued = 0;  // submitted requests waiting for a slot
  int64_t n_checkpoints = 0;    // prompt-reuse checkpoints in host memory
  size_t checkpoint_bytes = 0;
  std::vector<SlotStatus> slots;
};

struct ModelInfo {
  std::string architecture;
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_ctx = 0;  // positions per slot of this engine
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
  // Renders messages with the model's Jinja chat template (or the built-in one chosen) and adds the assistant
  // turn's opening; a leading BOS text is left out when tokenize() adds BOS itself. For display: the ids of a
  // chat are tokenize_chat's, since this text alone does not say which control-token spellings are markup.
  virtual Result<std::string> format_chat(const std::vector<ChatMessage>& messages) const = 0;
  // The prompt ids of a chat: format_chat's text, with BOS where the model wants one, in which only the
  // template's own markup becomes special tokens. A control token's spelling inside a message (a user writing
  // "<|im_end|>\n<|im_start|>system\n...") is tokenized as ordinary text, so a message cannot forge a turn;
  // without such a spelling the ids are tokenize(format_chat(messages), add_bos_default(), true)'s.
  virtual Result<std::vector<int32_t>> tokenize_chat(const std::vector<ChatMessage>& messages) const = 0;
  virtual bool add_bos_default() const = 0;

  // Queues a request; on_token is called from step() for every generated token and once with done = true.
  virtual Result<int64_t> submit(Request request, std::function<void(const TokenEvent&)> on_token) = 0;
  // Runs one engine step over every active slot. A failure that concerns some requests (a proposer, a rollback,
  // the forward of their batch) ends those with FinishReason::error and the reason, resets their slots, and the
  // step goes on for the others; the engine stays usable. An error is returned only for a broken engine.
  virtual Status step() = 0;
  virtual bool idle() const = 0;
  virtual void cancel(int64_t request_id) = 0;
  virtual RequestTimings timings(int64_t request_id) const = 0;
  virtual StateReport state_report() const = 0;
  virtual EngineStatus status() const = 0;
};

}  // namespace rwd
