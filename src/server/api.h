// The OpenAI-compatible request and response bodies: parsing a completion or chat request into checked
// parameters (every error names its field), and the JSON of responses, stream chunks, logprobs and errors.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rewind/engine.h"
#include "server/generation.h"

namespace rwd::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the request field at fault; empty when none
  std::string type = "invalid_request_error";
};

nlohmann::json error_body(const ApiError& error);

struct CompletionParams {
  bool chat = false;
  std::string prompt;               // completions: the text, when prompt_ids is empty
  std::vector<int32_t> prompt_ids;  // completions: the prompt given as token ids
  std::vector<ChatMessage> messages;
  std::optional<int64_t> max_tokens;
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage only
  bool logprobs = false;
  int top_logprobs = 0;
  bool ignore_eos = false;
  bool return_tokens = false;  // extension: the generated token ids in the response
  std::optional<std::string> spec_type;  // speculative.type
  int spec_draft_max = 0;                // speculative.draft_max, 0 when not given
  int spec_tree_nodes = -1;              // speculative.tree: tree nodes per round (0: chains), -1 when not given
  bool cache_prompt = true;              // llama-server's: start from a slot's state of the prompt's prefix
};

// Fills `out` from a request body, or returns the first problem found.
std::optional<ApiError> parse_completion_request(const nlohmann::json& body, bool chat, CompletionParams& out);

// Text for a token id, for the logprobs of the most likely alternatives.
using PieceOf = std::function<std::string(int32_t)>;

// OpenAI's usage, with the prompt tokens taken from a slot's state or a checkpoint as
// prompt_tokens_details.cached_tokens.
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);
// llama-server's field names, so its tools read them: prompt and generation speed, drafted and accepted.
nlohmann::json timings_json(const RequestTimings& timings, double time_per_output_token);
// Completions: {tokens, token_logprobs, top_logprobs, text_offset}; `text_offset` counts from `offset`.
nlohmann::json completion_logprobs_json(const std::vector<GeneratedToken>& tokens, const PieceOf& piece_of,
                                        int64_t offset);
// Chat: {content: [{token, logprob, bytes, top_logprobs: [...]}]}.
nlohmann::json chat_logprobs_json(const std::vector<GeneratedToken>& tokens, const PieceOf& piece_of, bool with_top);

// llama-server's native endpoints. POST /tokenize {content, add_special, parse_special, with_pieces}.
struct TokenizeParams {
  std::string content;
  bool add_special = false;    // BOS where the model adds one
  bool parse_special = true;   // spelled special tokens become their ids
  bool with_pieces = false;    // [{id, piece}] instead of ids
};
std::optional<ApiError> parse_tokenize_request(const nlohmann::json& body, TokenizeParams& out);
// POST /detokenize {tokens}: ids, each checked against the vocabulary size.
std::optional<ApiError> parse_detokenize_request(const nlohmann::json& body, int64_t n_vocab,
                                                 std::vector<int32_t>& out);
// POST /apply-template {messages}: the messages as a chat completion reads them.
std::optional<ApiError> parse_template_request(const nlohmann::json& body, std::vector<ChatMessage>& out);

// Serialises with invalid UTF-8 (a token piece cut inside a character) replaced, never throwing.
std::string dump(const nlohmann::json& value);

}  // namespace rwd::server
