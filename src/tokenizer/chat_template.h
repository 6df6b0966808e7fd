// ChatTemplate: turns a conversation into the prompt text a model was trained on, for the template families
// rewind recognises in a GGUF's tokenizer.chat_template (ChatML, Gemma, Llama 3). It reproduces what the
// model's Jinja template renders for plain text messages, without running Jinja; tools, images and
// reasoning fields are not supported. BOS is never part of the text: encode it with add_bos_default().
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace rwd::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

enum class ChatFormat {
  chatml,  // <|im_start|>role\ncontent<|im_end|>\n (SmolLM2, Qwen)
  gemma,   // <start_of_turn>user\ncontent<end_of_turn>\n, assistant -> "model", system folded into the first turn
  llama3,  // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> (Llama 3.0)
};

class ChatTemplate {
 public:
  // Recognises the family of a Jinja template. An empty or unrecognised template is an error that says so
  // and names the formats that can be chosen explicitly with from_name().
  static Result<ChatTemplate> from_jinja(std::string_view jinja);
  // "chatml", "gemma" or "llama3" (for models whose file carries no template).
  static Result<ChatTemplate> from_name(std::string_view name);

  ChatFormat format() const { return format_; }
  // The system message a ChatML template inserts when the conversation does not start with one (taken from
  // the template text, e.g. SmolLM2's); empty when it has none.
  const std::string& default_system() const { return default_system_; }

  // The prompt text for `messages`, ending with the opening of the assistant's turn when
  // `add_generation_prompt`. Errors where the template would raise (Gemma: roles must alternate
  // user/assistant after an optional leading system message).
  Result<std::string> apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  ChatTemplate(ChatFormat format, std::string default_system)
      : format_(format), default_system_(std::move(default_system)) {}

  ChatFormat format_;
  std::string default_system_;
};

}  // namespace rwd::tokenizer
