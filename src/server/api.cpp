#include "server/api.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace rwd::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxStops = 16;
constexpr size_t kMaxStopBytes = 256;
constexpr int kMaxTopLogprobs = 20;

const char* type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "something else";
  }
}

ApiError field_error(const std::string& param, std::string message) { return ApiError{400, std::move(message), param}; }

ApiError type_error(const std::string& param, const char* expected, const json& value) {
  return field_error(param, fmt::format("{}: expected {}, got {}", param, expected, type_name(value)));
}

// A field that is absent or null counts as not given.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> get_bool(const json& body, const char* name, bool& out) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) return type_error(name, "a boolean", *value);
  out = value->get<bool>();
  return std::nullopt;
}

// Integers may arrive as integral floats (5.0) from loosely typed clients.
std::optional<ApiError> get_int(const json& body, const std::string& name, int64_t min, int64_t max,
                                std::optional<int64_t>& out) {
  const json* value = field(body, name.c_str());
  if (!value) return std::nullopt;
  int64_t parsed = 0;
  if (value->is_number_unsigned()) {
    const uint64_t raw = value->get<uint64_t>();
    if (raw > static_cast<uint64_t>(max)) {
      return field_error(name, fmt::format("{} must be in [{}, {}], got {}", name, min, max, raw));
    }
    parsed = static_cast<int64_t>(raw);
  } else if (value->is_number_integer()) {
    parsed = value->get<int64_t>();
  } else if (value->is_number_float()) {
    const double raw = value->get<double>();
    if (!(std::trunc(raw) == raw && raw >= -9.0e18 && raw <= 9.0e18)) return type_error(name, "an integer", *value);
    parsed = static_cast<int64_t>(raw);
  } else {
    return type_error(name, "an integer", *value);
  }
  if (parsed < min || parsed > max) {
    return field_error(name, fmt::format("{} must be in [{}, {}], got {}", name, min, max, parsed));
  }
  out = parsed;
  return std::nullopt;
}

std::optional<ApiError> get_number(const json& body, const char* name, double min, double max, bool min_open,
                                   std::optional<double>& out) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) return type_error(name, "a number", *value);
  const double parsed = value->get<double>();
  const bool below = min_open ? !(parsed > min) : !(parsed >= min);
  if (below || !(parsed <= max)) {
    return field_error(name, fmt::format("{} must be in {}{}, {}], got {}", name, min_open ? "(" : "[", min, max, parsed));
  }
  out = parsed;
  return std::nullopt;
}

std::optional<ApiError> parse_prompt(const json& body, CompletionParams& out) {
  const json* prompt = field(body, "prompt");
  if (!prompt) return field_error("prompt", "prompt is required");
  if (prompt->is_string()) {
    out.prompt = prompt->get<std::string>();
    return std::nullopt;
  }
  if (!prompt->is_array()) return type_error("prompt", "a string or an array of token ids", *prompt);
  if (prompt->empty()) return field_error("prompt", "prompt is empty");
  const json* ids = prompt;
  // A batch of one prompt, as OpenAI clients send it: ["text"] or [[1, 2, 3]].
  if ((*prompt)[0].is_string() || (*prompt)[0].is_array()) {
    if (prompt->size() != 1) {
      return field_error("prompt", fmt::format("prompt holds {} prompts; send one prompt per request",
                                               prompt->size()));
    }
    if ((*prompt)[0].is_string()) {
      out.prompt = (*prompt)[0].get<std::string>();
      return std::nullopt;
    }
    ids = &(*prompt)[0];
    if (ids->empty()) return field_error("prompt", "prompt is empty");
  }
  for (size_t i = 0; i < ids->size(); ++i) {
    const json& id = (*ids)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return field_error("prompt", fmt::format("prompt[{}]: expected a token id (a non-negative integer), got {}", i,
                                               id.is_number_integer() ? id.dump() : type_name(id)));
    }
    out.prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& body, CompletionParams& out) {
  const json* messages = field(body, "messages");
  if (!messages) return field_error("messages", "messages is required");
  if (!messages->is_array()) return type_error("messages", "an array of messages", *messages);
  if (messages->empty()) return field_error("messages", "messages is empty: at least one message is needed");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!message.is_object()) return type_error(where, "an object with role and content", message);
    const json* role = field(message, "role");
    if (!role || !role->is_string()) return field_error(where + ".role", where + ".role: expected a string");
    std::string role_name = role->get<std::string>();
    if (role_name == "developer") role_name = "system";  // OpenAI's newer name for the system role
    if (role_name != "system" && role_name != "user" && role_name != "assistant") {
      return field_error(where + ".role", fmt::format("{}.role: '{}' is not supported (system, developer, user or "
                                                      "assistant)", where, role_name));
    }
    const json* content = field(message, "content");
    if (!content) return field_error(where + ".content", where + ".content is required");
    std::string text;
    if (content->is_string()) {
      text = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t p = 0; p < content->size(); ++p) {
        const json& part = (*content)[p];
        const std::string part_where = fmt::format("{}.content[{}]", where, p);
        const json* type = part.is_object() ? field(part, "type") : nullptr;
        if (!type || !type->is_string() || type->get<std::string>() != "text") {
          return field_error(part_where, part_where + ": only {\"type\": \"text\"} parts are supported");
        }
        const json* part_text = field(part, "text");
        if (!part_text || !part_text->is_string()) return field_error(part_where + ".text", part_where + ".text: expected a string");
        text += part_text->get<std::string>();
      }
    } else {
      return type_error(where + ".content", "a string or an array of text parts", *content);
    }
    out.messages.push_back({role_name, std::move(text)});
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const json& body, CompletionParams& out) {
  const json* stop = field(body, "stop");
  if (!stop) return std::nullopt;
  std::vector<std::string> stops;
  if (stop->is_string()) {
    stops.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    if (stop->size() > kMaxStops) {
      return field_error("stop", fmt::format("stop holds {} strings; at most {}", stop->size(), kMaxStops));
    }
    for (size_t i = 0; i < stop->size(); ++i) {
      if (!(*stop)[i].is_string()) return type_error(fmt::format("stop[{}]", i), "a string", (*stop)[i]);
      stops.push_back((*stop)[i].get<std::string>());
    }
  } else {
    return type_error("stop", "a string or an array of strings", *stop);
  }
  for (const std::string& text : stops) {
    if (text.empty()) return field_error("stop", "stop strings must not be empty");
    if (text.size() > kMaxStopBytes) {
      return field_error("stop", fmt::format("a stop string has {} bytes; at most {}", text.size(), kMaxStopBytes));
    }
  }
  out.stop = std::move(stops);
  return std::nullopt;
}

// Fields that change what a client gets back and that rewind does not do: refused rather than ignored.
std::optional<ApiError> refuse_unsupported(const json& body, bool chat) {
  std::optional<int64_t> n;
  if (auto error = get_int(body, "n", 1, 1, n)) {
    error->message = "n: only one choice per request is supported (n = 1)";
    return error;
  }
  std::optional<int64_t> best_of;
  if (!chat) {
    if (auto error = get_int(body, "best_of", 1, 1, best_of)) {
      error->message = "best_of: only 1 is supported";
      return error;
    }
    bool echo = false;
    if (auto error = get_bool(body, "echo", echo)) return error;
    if (echo) return field_error("echo", "echo: returning the prompt is not supported");
    const json* suffix = field(body, "suffix");
    if (suffix && !(suffix->is_string() && suffix->get<std::string>().empty())) {
      return field_error("suffix", "suffix: insertion is not supported");
    }
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    const json* value = field(body, name);
    if (!value) continue;
    if (!value->is_number()) return type_error(name, "a number", *value);
    if (value->get<double>() != 0.0) {
      return field_error(name, fmt::format("{} is not supported (use repetition_penalty)", name));
    }
  }
  const json* bias = field(body, "logit_bias");
  if (bias && !(bias->is_object() && bias->empty())) return field_error("logit_bias", "logit_bias is not supported");
  for (const char* name : {"tools", "functions"}) {
    const json* value = field(body, name);
    if (value && !(value->is_array() && value->empty())) {
      return field_error(name, fmt::format("{}: tool calling is not supported", name));
    }
  }
  if (const json* format = field(body, "response_format")) {
    const json* type = format->is_object() ? field(*format, "type") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "text") {
      return field_error("response_format", "response_format: only {\"type\": \"text\"} is supported");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_speculative(const json& body, CompletionParams& out) {
  const json* spec = field(body, "speculative");
  if (!spec) return std::nullopt;
  if (!spec->is_object()) return type_error("speculative", "an object {type, draft_max, tree}", *spec);
  for (auto it = spec->begin(); it != spec->end(); ++it) {
    if (it.key() != "type" && it.key() != "draft_max" && it.key() != "tree") {
      return field_error("speculative." + it.key(),
                         fmt::format("speculative.{}: unknown field (expected type, draft_max, tree)", it.key()));
    }
  }
  if (const json* type = field(*spec, "type")) {
    if (!type->is_string()) return type_error("speculative.type", "a string", *type);
    out.spec_type = type->get<std::string>();
  }
  std::optional<int64_t> draft_max;
  if (auto error = get_int(*spec, "draft_max", 1, 64, draft_max)) {
    error->param = "speculative.draft_max";
    error->message = "speculative." + error->message;
    return error;
  }
  out.spec_draft_max = static_cast<int>(draft_max.value_or(0));
  std::optional<int64_t> tree;
  if (auto error = get_int(*spec, "tree", 0, 64, tree)) {
    error->param = "speculative.tree";
    error->message = "speculative." + error->message;
    return error;
  }
  out.spec_tree_nodes = static_cast<int>(tree.value_or(-1));
  return std::nullopt;
}

}  // namespace

json error_body(const ApiError& error) {
  json body;
  body["error"] = {{"message", error.message},
                   {"type", error.type},
                   {"param", error.param.empty() ? json(nullptr) : json(error.param)},
                   {"code", error.status}};
  return body;
}

std::optional<ApiError> parse_completion_request(const json& body, bool chat, CompletionParams& out) {
  if (!body.is_object()) return ApiError{400, fmt::format("the request body must be a JSON object, got {}", type_name(body)), ""};
  out.chat = chat;
  if (const json* model = field(body, "model"); model && !model->is_string()) return type_error("model", "a string", *model);
  if (auto error = chat ? parse_messages(body, out) : parse_prompt(body, out)) return error;
  if (auto error = refuse_unsupported(body, chat)) return error;
  const int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (auto error = get_int(body, "max_tokens", 1, kMaxInt, out.max_tokens)) return error;
  if (!out.max_tokens) {
    // llama-server's name; -1 (its default) means until the context is full, as an absent max_tokens.
    std::optional<int64_t> n_predict;
    if (auto error = get_int(body, "n_predict", -1, kMaxInt, n_predict)) return error;
    if (n_predict == 0) return field_error("n_predict", "n_predict must be -1 (no limit) or at least 1, got 0");
    if (n_predict && *n_predict > 0) out.max_tokens = n_predict;
  }
  if (chat && !out.max_tokens) {
    if (auto error = get_int(body, "max_completion_tokens", 1, kMaxInt, out.max_tokens)) return error;
  }
  std::optional<double> number;
  if (auto error = get_number(body, "temperature", 0.0, 2.0, false, number)) return error;
  if (number) out.sampling.temperature = static_cast<float>(*number);
  number.reset();
  if (auto error = get_number(body, "top_p", 0.0, 1.0, true, number)) return error;
  if (number) out.sampling.top_p = static_cast<float>(*number);
  number.reset();
  if (auto error = get_number(body, "min_p", 0.0, 1.0, false, number)) return error;
  if (number) out.sampling.min_p = static_cast<float>(*number);
  number.reset();
  const char* penalty_name = body.contains("repeat_penalty") ? "repeat_penalty" : "repetition_penalty";
  if (auto error = get_number(body, penalty_name, 0.0, 10.0, true, number)) return error;
  if (number) out.sampling.repetition_penalty = static_cast<float>(*number);
  std::optional<int64_t> integer;
  if (auto error = get_int(body, "top_k", -1, 1 << 20, integer)) return error;
  if (integer) out.sampling.top_k = static_cast<int>(std::max<int64_t>(*integer, 0));  // -1 (vLLM) and 0: off
  integer.reset();
  if (auto error = get_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                           integer)) {
    return error;
  }
  if (integer) {
    out.sampling.seed = static_cast<uint64_t>(*integer);
    out.seed_given = true;
  }
  if (auto error = parse_stop(body, out)) return error;
  if (auto error = get_bool(body, "stream", out.stream)) return error;
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) return type_error("stream_options", "an object", *options);
    if (auto error = get_bool(*options, "include_usage", out.include_usage)) {
      error->param = "stream_options.include_usage";
      error->message = "stream_options." + error->message;
      return error;
    }
  }
  if (chat) {
    if (auto error = get_bool(body, "logprobs", out.logprobs)) return error;
    integer.reset();
    if (auto error = get_int(body, "top_logprobs", 0, kMaxTopLogprobs, integer)) return error;
    if (integer && *integer > 0 && !out.logprobs) {
      return field_error("top_logprobs", "top_logprobs needs logprobs: true");
    }
    out.top_logprobs = static_cast<int>(integer.value_or(0));
  } else {
    integer.reset();
    if (auto error = get_int(body, "logprobs", 0, kMaxTopLogprobs, integer)) return error;
    out.logprobs = integer.has_value();
    out.top_logprobs = static_cast<int>(integer.value_or(0));
  }
  if (auto error = get_bool(body, "ignore_eos", out.ignore_eos)) return error;
  if (auto error = get_bool(body, "return_tokens", out.return_tokens)) return error;
  if (auto error = get_bool(body, "cache_prompt", out.cache_prompt)) return error;
  return parse_speculative(body, out);
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json timings_json(const RequestTimings& timings, double time_per_output_token) {
  const double prompt_ms = timings.prompt_seconds * 1000.0;
  const double predicted_ms = timings.generation_seconds * 1000.0;
  const auto per_second = [](int64_t n, double ms) { return ms > 0.0 ? static_cast<double>(n) * 1000.0 / ms : 0.0; };
  // As llama-server: cache_n prompt tokens were reused, prompt_n were computed in prompt_ms.
  const int64_t n_computed = timings.n_prompt_tokens - timings.n_cached_tokens;
  return {{"cache_n", timings.n_cached_tokens},
          {"prompt_n", n_computed},
          {"prompt_ms", prompt_ms},
          {"prompt_per_second", per_second(n_computed, prompt_ms)},
          {"predicted_n", timings.n_generated_tokens},
          {"predicted_ms", predicted_ms},
          {"predicted_per_token_ms", time_per_output_token * 1000.0},
          {"predicted_per_second", time_per_output_token > 0.0 ? 1.0 / time_per_output_token : 0.0},
          {"draft_n", timings.spec.drafted},
          {"draft_n_accepted", timings.spec.accepted},
          {"draft_rounds", timings.spec.rounds},
          // Tokens each verify forward gave: the accepted drafts and the target's own.
          {"draft_acceptance_length",
           timings.spec.rounds > 0
               ? static_cast<double>(timings.spec.accepted + timings.spec.rounds) / static_cast<double>(timings.spec.rounds)
               : 0.0},
          {"draft_tree_rounds", timings.spec.tree_rounds},
          {"draft_tree_nodes", timings.spec.tree_nodes},
          {"rollbacks", timings.spec.rollbacks}};
}

json completion_logprobs_json(const std::vector<GeneratedToken>& tokens, const PieceOf& piece_of, int64_t offset) {
  json out;
  json pieces = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (const GeneratedToken& token : tokens) {
    pieces.push_back(token.piece);
    logprobs.push_back(token.logprob);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(token.piece.size());
    if (token.top.empty()) {
      tops.push_back(nullptr);
      continue;
    }
    json top = json::object();
    for (const TokenLogprob& entry : token.top) top[piece_of(entry.id)] = entry.logprob;
    tops.push_back(std::move(top));
  }
  out["tokens"] = std::move(pieces);
  out["token_logprobs"] = std::move(logprobs);
  out["top_logprobs"] = std::move(tops);
  out["text_offset"] = std::move(offsets);
  return out;
}

json chat_logprobs_json(const std::vector<GeneratedToken>& tokens, const PieceOf& piece_of, bool with_top) {
  const auto bytes_of = [](const std::string& piece) {
    json bytes = json::array();
    for (unsigned char byte : piece) bytes.push_back(static_cast<int>(byte));
    return bytes;
  };
  json content = json::array();
  for (const GeneratedToken& token : tokens) {
    json entry = {{"token", token.piece}, {"logprob", token.logprob}, {"bytes", bytes_of(token.piece)}};
    json top = json::array();
    if (with_top) {
      for (const TokenLogprob& alternative : token.top) {
        const std::string piece = piece_of(alternative.id);
        top.push_back({{"token", piece}, {"logprob", alternative.logprob}, {"bytes", bytes_of(piece)}});
      }
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::optional<ApiError> parse_tokenize_request(const json& body, TokenizeParams& out) {
  if (!body.is_object()) return ApiError{400, fmt::format("the request body must be a JSON object, got {}", type_name(body)), ""};
  const json* content = field(body, "content");
  if (!content) return field_error("content", "content is required");
  if (!content->is_string()) return type_error("content", "a string", *content);
  out.content = content->get<std::string>();
  if (auto error = get_bool(body, "add_special", out.add_special)) return error;
  if (auto error = get_bool(body, "parse_special", out.parse_special)) return error;
  return get_bool(body, "with_pieces", out.with_pieces);
}

std::optional<ApiError> parse_detokenize_request(const json& body, int64_t n_vocab, std::vector<int32_t>& out) {
  if (!body.is_object()) return ApiError{400, fmt::format("the request body must be a JSON object, got {}", type_name(body)), ""};
  const json* tokens = field(body, "tokens");
  if (!tokens) return field_error("tokens", "tokens is required");
  if (!tokens->is_array()) return type_error("tokens", "an array of token ids", *tokens);
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& id = (*tokens)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab) {
      return field_error("tokens", fmt::format("tokens[{}]: expected a token id in [0, {}), got {}", i, n_vocab,
                                               id.dump()));
    }
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_template_request(const json& body, std::vector<ChatMessage>& out) {
  if (!body.is_object()) return ApiError{400, fmt::format("the request body must be a JSON object, got {}", type_name(body)), ""};
  CompletionParams params;
  if (auto error = parse_messages(body, params)) return error;
  out = std::move(params.messages);
  return std::nullopt;
}

}  // namespace rwd::server
