// links: rewind_tokenizer
// Chat formatting: the prompt text and ids llama.cpp produced for SmolLM2 (Jinja engine on the GGUF's
// template, and its built-in ChatML) and Gemma 3 (built-in gemma) in tests/data/tokenizer/chat_prompts.json;
// then each family's template semantics written out by hand (default system text, system folding, trimming,
// role alternation) and the detection errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rwd::tokenizer {
namespace {

Tokenizer load_tokenizer(const std::string& relative_path) {
  auto file = gguf::GgufFile::open(std::string(REWIND_TEST_DATA) + "/" + relative_path);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  auto tokenizer = Tokenizer::from_gguf(**file);
  EXPECT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

std::string apply_ok(const ChatTemplate& chat, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  auto text = chat.apply(messages, add_generation_prompt);
  EXPECT_TRUE(text.is_ok()) << text.status().message();
  return text.is_ok() ? *text : std::string("<apply failed>");
}

ChatTemplate from_jinja_ok(std::string_view jinja) {
  auto chat = ChatTemplate::from_jinja(jinja);
  EXPECT_TRUE(chat.is_ok()) << chat.status().message();
  return std::move(chat).value();
}

ChatTemplate from_name_ok(std::string_view name) {
  auto chat = ChatTemplate::from_name(name);
  EXPECT_TRUE(chat.is_ok()) << chat.status().message();
  return std::move(chat).value();
}

TEST(ChatTemplate, MatchesLlamaCppPromptsAndIds) {
  std::ifstream in(std::string(REWIND_TEST_DATA) + "/tokenizer/chat_prompts.json");
  ASSERT_TRUE(in.good()) << "tests/data/tokenizer/chat_prompts.json missing";
  const nlohmann::json data = nlohmann::json::parse(in);
  const Tokenizer smollm2 = load_tokenizer("vocab/smollm2-vocab.gguf");
  const Tokenizer gemma3 = load_tokenizer("vocab/gemma3-vocab.gguf");
  int n_chat = 0;
  for (const auto& prompt : data.at("prompts")) {
    const std::string model = prompt.at("model");
    const Tokenizer& tokenizer = model.find("gemma") != std::string::npos ? gemma3 : smollm2;
    const std::string format = prompt.at("format");
    const std::string expected_text = prompt.at("text");
    SCOPED_TRACE(prompt.at("reference").get<std::string>());
    if (format != "text") {
      std::vector<ChatMessage> messages;
      for (const auto& message : prompt.at("messages")) messages.push_back({message.at("role"), message.at("content")});
      const ChatTemplate chat = format == "jinja"          ? from_jinja_ok(tokenizer.chat_template())
                                : format == "builtin:gemma" ? from_name_ok("gemma")
                                                            : from_name_ok("chatml");
      EXPECT_EQ(apply_ok(chat, messages, prompt.at("add_generation_prompt")), expected_text);
      ++n_chat;
    }
    // llama.cpp tokenized with add_special: BOS exactly when the vocab asks for it, never doubled by the text.
    const bool add_bos = prompt.at("add_special").get<bool>() && tokenizer.add_bos_default();
    auto ids = tokenizer.encode(expected_text, add_bos, prompt.at("parse_special"));
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    EXPECT_EQ(*ids, prompt.at("ids").get<std::vector<int32_t>>());
  }
  EXPECT_EQ(n_chat, 3);
}

TEST(ChatTemplate, SmolLm2DefaultSystemComesFromTheTemplate) {
  const Tokenizer tokenizer = load_tokenizer("vocab/smollm2-vocab.gguf");
  const ChatTemplate chat = from_jinja_ok(tokenizer.chat_template());
  EXPECT_EQ(chat.format(), ChatFormat::chatml);
  EXPECT_EQ(chat.default_system(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  // With a system message of its own, the template inserts nothing; roles and contents are copied verbatim.
  EXPECT_EQ(apply_ok(chat, {{"system", "Be brief. "}, {"user", " hi"}, {"assistant", "hello"}, {"user", "bye"}}, false),
            "<|im_start|>system\nBe brief. <|im_end|>\n<|im_start|>user\n hi<|im_end|>\n"
            "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nbye<|im_end|>\n");
  EXPECT_EQ(apply_ok(chat, {{"user", "a"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n");
  // No messages: the template's loop never runs, so no default system either.
  EXPECT_EQ(apply_ok(chat, {}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, DefaultSystemOnlyFromACompleteLiteral) {
  // Qwen2.5's template (abridged): the first '<|im_start|>system\n' literal is followed by a variable; the
  // default turn is the later literal, written with escaped newlines.
  const std::string qwen25 =
      "{%- if messages[0]['role'] == 'system' %}\n"
      "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
      "{%- else %}\n"
      "    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\\n' }}\n"
      "{%- endif %}";
  EXPECT_EQ(from_jinja_ok(qwen25).default_system(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // Qwen3-style: no literal default at all.
  const std::string qwen3 =
      "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
      "{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
      "'<|im_end|>' + '\\n' }}{%- endfor %}";
  const ChatTemplate chat = from_jinja_ok(qwen3);
  EXPECT_EQ(chat.default_system(), "");
  EXPECT_EQ(apply_ok(chat, {{"user", "x"}}, true), "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

// Gemma 3's template: system content + "\n\n" opens the first user turn, contents are trimmed, "assistant" is
// "model", and roles must alternate user/model.
TEST(ChatTemplate, GemmaFoldsSystemIntoFirstTurn) {
  const ChatTemplate chat = from_jinja_ok("{{ bos_token }}{% for message in messages %}<start_of_turn>...");
  EXPECT_EQ(chat.format(), ChatFormat::gemma);
  EXPECT_EQ(apply_ok(chat, {{"system", "Answer in French."}, {"user", "  Hi there \n"}, {"assistant", " Salut ! "},
                            {"user", "Ça va ?"}},
                     true),
            "<start_of_turn>user\nAnswer in French.\n\nHi there<end_of_turn>\n"
            "<start_of_turn>model\nSalut !<end_of_turn>\n"
            "<start_of_turn>user\nÇa va ?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(apply_ok(chat, {{"user", "q"}}, false), "<start_of_turn>user\nq<end_of_turn>\n");
}

TEST(ChatTemplate, GemmaRejectsNonAlternatingRoles) {
  const ChatTemplate chat = from_name_ok("gemma");
  for (const std::vector<ChatMessage>& messages :
       {std::vector<ChatMessage>{{"user", "a"}, {"user", "b"}}, std::vector<ChatMessage>{{"assistant", "a"}},
        std::vector<ChatMessage>{{"system", "s"}, {"assistant", "a"}}}) {
    auto text = chat.apply(messages, true);
    ASSERT_FALSE(text.is_ok());
    EXPECT_NE(text.status().message().find("alternate"), std::string::npos) << text.status().message();
  }
}

TEST(ChatTemplate, Llama3TrimsContents) {
  const ChatTemplate chat = from_jinja_ok(
      "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
      "trim + '<|eot_id|>' %}");
  EXPECT_EQ(chat.format(), ChatFormat::llama3);
  EXPECT_EQ(apply_ok(chat, {{"system", " sys "}, {"user", "\thello\n"}}, true),
            "<|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, UnrecognisedTemplatesAreClearErrors) {
  const std::vector<std::string> templates = {
      "",
      "   \n",
      "{% for m in messages %}{{ m.content }}{% endfor %}",
      "{{'<|im_start|>' + message['role'] + '<|im_sep|>'}}",
      "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023",
  };
  for (const std::string& jinja : templates) {
    auto chat = ChatTemplate::from_jinja(jinja);
    ASSERT_FALSE(chat.is_ok()) << jinja;
    EXPECT_NE(chat.status().message().find("not recognised"), std::string::npos) << chat.status().message();
    EXPECT_NE(chat.status().message().find("chatml"), std::string::npos) << chat.status().message();
  }
  auto named = ChatTemplate::from_name("vicuna");
  ASSERT_FALSE(named.is_ok());
  EXPECT_NE(named.status().message().find("'vicuna'"), std::string::npos) << named.status().message();
}

}  // namespace
}  // namespace rwd::tokenizer
