// Chat formatting by template family. Detection uses marker strings, as llama.cpp's llm_chat_detect_template
// does; rendering follows the Jinja of each family's reference template (SmolLM2/Qwen ChatML, Gemma 3,
// Llama 3.0) for text messages.
#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include "gguf/keys.h"

namespace rwd::tokenizer {
namespace {

constexpr std::string_view kChatmlSystemOpen = "<|im_start|>system";
constexpr std::string_view kChatmlEnd = "<|im_end|>";

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Jinja's `trim` as llama.cpp's template engine applies it: ASCII whitespace at both ends.
std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) + 1 - begin);
}

// A ChatML template may carry a whole default system turn as one string literal, e.g. SmolLM2's
// '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, ...<|im_end|>\n'. Returns its text, or
// "" when no literal holds a complete turn (a literal that ends before <|im_end|> is followed by a variable).
std::string find_default_system(std::string_view jinja) {
  size_t pos = 0;
  while ((pos = jinja.find(kChatmlSystemOpen, pos)) != std::string_view::npos) {
    const char quote = pos > 0 ? jinja[pos - 1] : '\0';
    size_t at = pos + kChatmlSystemOpen.size();
    pos = at;
    if (quote != '\'' && quote != '"') continue;
    if (jinja.substr(at, 1) == "\n") {
      at += 1;
    } else if (jinja.substr(at, 2) == "\\n") {
      at += 2;
    } else {
      continue;
    }
    std::string text;
    bool complete = false;
    while (at < jinja.size()) {
      if (jinja.substr(at, kChatmlEnd.size()) == kChatmlEnd) {
        complete = true;
        break;
      }
      const char c = jinja[at];
      if (c == quote) break;
      if (c == '\\' && at + 1 < jinja.size()) {
        const char escaped = jinja[at + 1];
        text.push_back(escaped == 'n' ? '\n' : escaped == 't' ? '\t' : escaped);
        at += 2;
        continue;
      }
      text.push_back(c);
      ++at;
    }
    if (complete && !text.empty()) return text;
  }
  return "";
}

Status not_recognised(std::string_view jinja, std::string_view why) {
  const std::string_view head = jinja.substr(0, 60);
  return Status::errorf(
      "chat template not recognised ({}; {} begins '{}'): rewind renders ChatML, Gemma and Llama 3 templates; "
      "choose one explicitly (chatml, gemma, llama3)",
      why, gguf::kTokenizerChatTemplate, head);
}

std::string render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                          const std::string& default_system) {
  std::string out;
  if (!messages.empty() && messages[0].role != "system" && !default_system.empty()) {
    out += fmt::format("<|im_start|>system\n{}<|im_end|>\n", default_system);
  }
  for (const ChatMessage& message : messages) {
    out += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", message.role, message.content);
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

Result<std::string> render_gemma(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  std::string first_user_prefix;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    first_user_prefix = messages[0].content + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    const size_t turn = i - first;
    if ((message.role == "user") != (turn % 2 == 0)) {
      return Status::errorf(
          "gemma chat template: conversation roles must alternate user/assistant/user/assistant/... after an "
          "optional system message, but message {} has role '{}'",
          i, message.role);
    }
    const std::string_view role = message.role == "assistant" ? std::string_view("model") : message.role;
    out += fmt::format("<start_of_turn>{}\n{}{}<end_of_turn>\n", role, turn == 0 ? first_user_prefix : "",
                       trim(message.content));
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string render_llama3(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& message : messages) {
    out += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", message.role, trim(message.content));
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_jinja(std::string_view jinja) {
  if (trim(jinja).empty()) {
    return Status::errorf(
        "chat template not recognised: the model file has no {}; choose one explicitly (chatml, gemma, llama3)",
        gguf::kTokenizerChatTemplate);
  }
  if (contains(jinja, "<|im_start|>")) {
    // Same exclusions as llama.cpp: Phi-4 and SmolVLM use <|im_start|> but are not ChatML.
    if (contains(jinja, "<|im_sep|>")) return not_recognised(jinja, "Phi-4 style <|im_sep|>");
    if (contains(jinja, "<end_of_utterance>")) return not_recognised(jinja, "SmolVLM style <end_of_utterance>");
    return ChatTemplate(ChatFormat::chatml, find_default_system(jinja));
  }
  if (contains(jinja, "<start_of_turn>")) return ChatTemplate(ChatFormat::gemma, "");
  if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|end_header_id|>")) {
    // Llama 3.1+ templates add a dated system preamble that the 3.0 rendering would silently omit.
    if (contains(jinja, "Cutting Knowledge Date")) {
      return not_recognised(jinja, "Llama 3.1+ template with a knowledge-date system preamble");
    }
    return ChatTemplate(ChatFormat::llama3, "");
  }
  return not_recognised(jinja, "no ChatML, Gemma or Llama 3 markers");
}

Result<ChatTemplate> ChatTemplate::from_name(std::string_view name) {
  if (name == "chatml") return ChatTemplate(ChatFormat::chatml, "");
  if (name == "gemma") return ChatTemplate(ChatFormat::gemma, "");
  if (name == "llama3") return ChatTemplate(ChatFormat::llama3, "");
  return Status::errorf("chat format '{}' is not known (known: chatml, gemma, llama3)", name);
}

Result<std::string> ChatTemplate::apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  switch (format_) {
    case ChatFormat::chatml: return render_chatml(messages, add_generation_prompt, default_system_);
    case ChatFormat::gemma: return render_gemma(messages, add_generation_prompt);
    case ChatFormat::llama3: return render_llama3(messages, add_generation_prompt);
  }
  return Status::error("chat template: unknown format");
}

}  // namespace rwd::tokenizer
