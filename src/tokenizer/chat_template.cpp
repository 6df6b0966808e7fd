// ChatTemplate: the variables a chat template gets, the built-in templates, and BOS handling.
#include "tokenizer/chat_template.h"

#include "tokenizer/jinja/json_value.h"

namespace rwd::tokenizer {
namespace {

// Built-in templates, written for rewind, rendering what each family's reference template renders for text
// messages. Gemma and Llama 3 start with bos_token as their reference templates do.
constexpr std::string_view kChatml = R"({%- for message in messages -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
)";

constexpr std::string_view kGemma = R"({{- bos_token }}
{%- if messages and messages[0].role == 'system' -%}
    {%- set first_user_prefix = messages[0].content ~ '\n\n' -%}
    {%- set turns = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = '' -%}
    {%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
    {%- if (message.role == 'user') != (loop.index0 % 2 == 0) -%}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/... after an optional system message') -}}
    {%- endif -%}
<start_of_turn>{{ 'model' if message.role == 'assistant' else message.role }}
{{ (first_user_prefix if loop.first else '') ~ message.content | trim }}<end_of_turn>
{% endfor -%}
{%- if add_generation_prompt -%}
<start_of_turn>model
{% endif -%}
)";

constexpr std::string_view kLlama3 = R"({{- bos_token }}
{%- for message in messages -%}
<|start_header_id|>{{ message.role }}<|end_header_id|>

{{ message.content | trim }}<|eot_id|>
{%- endfor -%}
{%- if add_generation_prompt -%}
<|start_header_id|>assistant<|end_header_id|>

{% endif -%}
)";

nlohmann::ordered_json message_json(const ChatMessage& message) {
  nlohmann::ordered_json json = {{"role", message.role}, {"content", message.content}};
  if (!message.reasoning_content.empty()) json["reasoning_content"] = message.reasoning_content;
  if (!message.tool_calls.is_null()) json["tool_calls"] = message.tool_calls;
  if (!message.tool_call_id.empty()) json["tool_call_id"] = message.tool_call_id;
  return json;
}

ChatInputs inputs_of(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  ChatInputs inputs;
  for (const ChatMessage& message : messages) inputs.messages.push_back(message_json(message));
  inputs.add_generation_prompt = add_generation_prompt;
  return inputs;
}

}  // namespace

std::string_view ChatTemplate::builtin_source(std::string_view name) {
  if (name == "chatml") return kChatml;
  if (name == "gemma") return kGemma;
  if (name == "llama3") return kLlama3;
  return {};
}

Result<ChatTemplate> ChatTemplate::from_jinja(std::string_view jinja, ChatSpecialTokens tokens) {
  auto compiled = jinja::Template::compile(jinja);
  if (!compiled) return compiled.status().with_context("chat template");
  return ChatTemplate(std::move(compiled).value(), std::move(tokens), jinja);
}

Result<ChatTemplate> ChatTemplate::from_name(std::string_view name, ChatSpecialTokens tokens) {
  const std::string_view source = builtin_source(name);
  if (source.empty()) return Status::errorf("chat template '{}' is not known (known: chatml, gemma, llama3)", name);
  auto compiled = jinja::Template::compile(source);
  if (!compiled) return compiled.status().with_context(fmt::format("built-in chat template {}", name));
  return ChatTemplate(std::move(compiled).value(), std::move(tokens), source);
}

Result<std::string> ChatTemplate::apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  return apply(inputs_of(messages, add_generation_prompt));
}

Result<std::string> ChatTemplate::apply(const ChatInputs& inputs) const {
  // The variables and their order follow transformers' apply_chat_template: absent tools and documents are
  // None (so `tools is defined` holds, as there), special tokens by name, extra variables last.
  jinja::Object globals;
  try {  // value_from_json refuses JSON nested deeper than jinja::kMaxValueDepth with a jinja::Error
    globals.set("messages", jinja::value_from_json(inputs.messages));
    globals.set("tools", jinja::value_from_json(inputs.tools));
    globals.set("documents", jinja::value_from_json(inputs.documents));
    for (const auto& [key, value] : inputs.extra.items()) globals.set(key, jinja::value_from_json(value));
  } catch (const jinja::Error& error) {
    return Status::errorf("chat template inputs: {}", error.message());
  }
  globals.set("add_generation_prompt", jinja::Value(inputs.add_generation_prompt));
  globals.set("bos_token", jinja::Value(tokens_.bos));
  globals.set("eos_token", jinja::Value(tokens_.eos));
  auto text = compiled_.render(globals);
  if (!text) return text.status().with_context("chat template");
  // Templates such as Gemma's and Llama 3's start with {{ bos_token }}, written for tokenizers that do not
  // add BOS themselves (HF renders and tokenizes with add_special_tokens=False). rewind encodes chat prompts
  // with add_bos_default(), so where the tokenizer adds BOS the text's copy would make a second BOS token;
  // drop it, as llama.cpp does for the same reason.
  if (tokens_.tokenizer_adds_bos && !tokens_.bos.empty() && text->compare(0, tokens_.bos.size(), tokens_.bos) == 0) {
    text->erase(0, tokens_.bos.size());
  }
  return text;
}

Result<MarkedPrompt> ChatTemplate::apply_marked(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                                const Tokenizer& tokenizer) const {
  return apply_marked(inputs_of(messages, add_generation_prompt), tokenizer);
}

Result<MarkedPrompt> ChatTemplate::apply_marked(ChatInputs inputs, const Tokenizer& tokenizer) const {
  nlohmann::ordered_json* const caller_values[] = {&inputs.messages, &inputs.tools, &inputs.documents,
                                                   &inputs.extra};
  const std::string_view template_texts[] = {source_, tokens_.bos, tokens_.eos};
  REWIND_ASSIGN_OR_RETURN(SpellingSentinels sentinels,
                          SpellingSentinels::substitute(tokenizer, caller_values, template_texts));
  REWIND_ASSIGN_OR_RETURN(std::string text, apply(inputs));
  return sentinels.restore(text);
}

}  // namespace rwd::tokenizer
