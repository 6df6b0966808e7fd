// ChatTemplate: turns a conversation into the prompt text a model was trained on by running the model's own
// Jinja chat template (tokenizer.chat_template) in rewind's interpreter (tokenizer/jinja/), with the
// variables HF transformers passes: messages, tools, documents, add_generation_prompt, bos_token, eos_token.
// Built-in templates stand in for files without one (chatml, gemma, llama3). BOS is left out of the text when
// the tokenizer adds it as a token. apply_marked() also says which control-token spellings came from the caller
// (spelling_sentinels.h), so they can be encoded as text. Parsing tool calls out of the model's reply is not
// done here.
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/spelling_sentinels.h"
#include "tokenizer/tokenizer.h"

namespace rwd::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
  std::string reasoning_content;      // the assistant's thinking; empty: none (not passed to the template)
  nlohmann::ordered_json tool_calls;  // null: none; else [{"type": "function", "function": {"name", "arguments"}}]
  std::string tool_call_id;           // role "tool": the call this answers; empty: none
};

// Everything a template sees, as JSON in HF's message format (content may also be a list of parts).
struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;      // null (None in the template) or a list of tool schemas
  nlohmann::ordered_json documents;  // null or a list of documents (Granite-style RAG templates)
  bool add_generation_prompt = true;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables, e.g. enable_thinking
};

// The vocabulary's special-token texts, and whether encoding adds BOS by itself (add_bos_default()).
struct ChatSpecialTokens {
  std::string bos;
  std::string eos;
  bool tokenizer_adds_bos = false;
};

class ChatTemplate {
 public:
  // Compiles a Jinja template; errors name the line and column (e.g. a feature rewind does not support).
  static Result<ChatTemplate> from_jinja(std::string_view jinja, ChatSpecialTokens tokens = {});
  // A built-in template by name: "chatml", "gemma" or "llama3".
  static Result<ChatTemplate> from_name(std::string_view name, ChatSpecialTokens tokens = {});
  // The Jinja text of a built-in template; empty for an unknown name.
  static std::string_view builtin_source(std::string_view name);

  // The prompt text for `messages`, ending with the opening of the assistant's turn when
  // `add_generation_prompt`. Errors where the template raises (e.g. Gemma's role alternation).
  Result<std::string> apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;
  Result<std::string> apply(const ChatInputs& inputs) const;

  // apply's text, with the byte ranges of the control-token spellings (of `tokenizer`'s vocab) that the inputs
  // brought in, messages, tools, documents and extra variables alike: everything in the inputs is the caller's,
  // only the template's own text is markup. Encoding the text with those ranges literal gives the prompt ids.
  Result<MarkedPrompt> apply_marked(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                    const Tokenizer& tokenizer) const;
  Result<MarkedPrompt> apply_marked(ChatInputs inputs, const Tokenizer& tokenizer) const;

 private:
  ChatTemplate(jinja::Template compiled, ChatSpecialTokens tokens, std::string_view source)
      : compiled_(std::move(compiled)), tokens_(std::move(tokens)), source_(source) {}

  jinja::Template compiled_;
  ChatSpecialTokens tokens_;
  std::string source_;  // the Jinja text: its characters are never chosen as sentinels
};

}  // namespace rwd::tokenizer
