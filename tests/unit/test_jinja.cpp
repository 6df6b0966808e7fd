// links: rewind_tokenizer
// The Jinja interpreter against Python jinja2 (HF transformers' environment): every template in
// tests/data/chat_templates against every conversation, and the interpreter snippets, byte for byte as
// tools/jinja/render_reference.py recorded them in expected.json, expected errors included. Then the
// errors a broken or hostile template must produce: positions, names, and bounded work.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/json_value.h"
#include "tokenizer/jinja/template.h"

namespace rwd::tokenizer {
namespace {

using nlohmann::ordered_json;

std::string data_dir() { return std::string(REWIND_TEST_DATA) + "/chat_templates/"; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ordered_json read_json(const std::string& path) { return ordered_json::parse(read_text(path)); }

// What the reference recorded: the output, or an error whose message rewind must repeat where jinja2's is
// the template's own words (raise_exception) or jinja2's undefined-value wording; other errors only fail.
void expect_matches(const Result<std::string>& rendered, const ordered_json& expected) {
  if (expected.contains("output")) {
    ASSERT_TRUE(rendered.is_ok()) << rendered.status().message();
    EXPECT_EQ(*rendered, expected.at("output").get<std::string>());
    return;
  }
  ASSERT_FALSE(rendered.is_ok()) << "rendered '" << *rendered << "' where jinja2 failed with: " << expected.at("error");
  const std::string kind = expected.at("error_kind");
  if (kind == "raised" || kind == "undefined") {
    EXPECT_NE(rendered.status().message().find(expected.at("error").get<std::string>()), std::string::npos)
        << rendered.status().message() << "\n  jinja2: " << expected.at("error");
  }
}

TEST(Jinja, ChatTemplatesMatchJinja2) {
  const ordered_json expected = read_json(data_dir() + "expected.json");
  std::map<std::string, ordered_json> conversations;
  const ordered_json conversation_file = read_json(data_dir() + "conversations.json");
  for (const auto& conversation : conversation_file.at("conversations")) {
    conversations[conversation.at("name").get<std::string>()] = conversation;
  }
  const ChatSpecialTokens tokens{expected.at("bos_token"), expected.at("eos_token"), false};
  std::map<std::string, ChatTemplate> templates;
  int n_checked = 0;
  for (const auto& entry : expected.at("renders")) {
    const std::string name = entry.at("template");
    const std::string conversation_name = entry.at("conversation");
    SCOPED_TRACE(name + " x " + conversation_name + (entry.at("add_generation_prompt").get<bool>() ? " +gen" : ""));
    if (!templates.contains(name)) {
      auto compiled = ChatTemplate::from_jinja(read_text(data_dir() + name), tokens);
      ASSERT_TRUE(compiled.is_ok()) << compiled.status().message();
      templates.emplace(name, std::move(compiled).value());
    }
    const ordered_json& conversation = conversations.at(conversation_name);
    ChatInputs inputs;
    inputs.messages = conversation.at("messages");
    if (conversation.contains("tools")) inputs.tools = conversation.at("tools");
    if (conversation.contains("documents")) inputs.documents = conversation.at("documents");
    if (conversation.contains("template_kwargs")) inputs.extra = conversation.at("template_kwargs");
    inputs.add_generation_prompt = entry.at("add_generation_prompt");
    expect_matches(templates.at(name).apply(inputs), entry);
    ++n_checked;
  }
  // 13 templates (3 built-in, 2 from GGUF files, 5 written after hybrid families' ones) x 13 conversations x 2.
  EXPECT_EQ(templates.size(), 10u);
  EXPECT_GE(n_checked, 260);
}

TEST(Jinja, SnippetsMatchJinja2) {
  const ordered_json expected = read_json(data_dir() + "expected.json");
  int n_checked = 0;
  for (const auto& entry : expected.at("snippets")) {
    const std::string source = entry.at("template");
    SCOPED_TRACE(source);
    const jinja::Value context = jinja::value_from_json(entry.at("context"));
    auto compiled = jinja::Template::compile(source);
    if (!compiled) {
      ASSERT_TRUE(entry.contains("error")) << "compile failed: " << compiled.status().message();
      ++n_checked;
      continue;
    }
    expect_matches(compiled->render(context.object()), entry);
    ++n_checked;
  }
  EXPECT_GE(n_checked, 60);
}

Status render_error(std::string_view source, const jinja::RenderLimits& limits = {}) {
  auto compiled = jinja::Template::compile(source);
  if (!compiled) return compiled.status();
  auto rendered = compiled->render(jinja::Object{}, limits);
  if (rendered) return Status::errorf("rendered without error: '{}'", rendered->substr(0, 200));
  return rendered.status();
}

void expect_error(std::string_view source, std::initializer_list<std::string_view> parts,
                  const jinja::RenderLimits& limits = {}) {
  const Status status = render_error(source, limits);
  ASSERT_FALSE(status.is_ok()) << source;
  for (std::string_view part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos) << "'" << part << "' not in: " << status.message();
  }
}

TEST(Jinja, ErrorsNameThePlaceAndTheProblem) {
  expect_error("ok\n{% if x %}never closed", {"line 2, column 1", "endif"});
  expect_error("{{ 'no end quote", {"line 1, column 4", "unterminated string"});
  expect_error("text {{ x ", {"line 1, column 6", "unterminated tag"});
  expect_error("{# open comment", {"line 1, column 1", "unterminated comment"});
  expect_error("a\n\n  {{ x | shout }}", {"line 3, column", "no filter named 'shout'"});
  expect_error("{{ x is loud }}", {"no test named 'loud'"});
  expect_error("{% for x in y %}{% endif %}", {"unknown statement", "endif"});
  expect_error("{% frobnicate %}", {"unknown statement '{% frobnicate %}'"});
  expect_error("\n{{ raise_exception('Roles must alternate') }}", {"line 2, column", "Roles must alternate"});
  expect_error("{{ m.a.b }}", {"'m' is undefined"});
  expect_error("{{ 1 // 0 }}", {"division"});
  expect_error("{{ 'a' + 1 }}", {"can only concatenate str"});
  expect_error("{% set l = [] %}{{ l.append(1) }}", {"unsafe"});
  expect_error("{% set d = {} %}{% set d.x = 1 %}", {"non-namespace"});
  expect_error("{{ (1, 2) | tojson(indent=undefined_thing) }}{{ undefined_thing | tojson }}", {"JSON serializable"});
}

// A hostile template fails with a message instead of hanging, overflowing the stack or exhausting memory.
TEST(Jinja, HostileTemplatesAreBounded) {
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {"nesting deeper than"});
  expect_error("{% for a in range(1000000) %}{% for b in range(1000000) %}{% endfor %}{% endfor %}", {"steps"});
  expect_error("{{ range(100000000) | length }}", {"range() longer than"});
  expect_error("{{ 'x' * 1000000000000 }}", {"larger than"});
  jinja::RenderLimits one_mib;
  one_mib.max_output_bytes = 1u << 20;
  expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               {"longer than 1048576 bytes"}, one_mib);
  expect_error("{% for i in range(100000) %}{{ 'line of output\n' }}{% endfor %}", {"longer than 1048576 bytes"}, one_mib);
  expect_error("{{ " + std::string(10000, '(') + "1" + std::string(10000, ')') + " }}", {"nested deeper than"});
  std::string deep_ifs;
  for (int i = 0; i < 5000; ++i) deep_ifs += "{% if true %}";
  expect_error(deep_ifs, {"nested deeper than"});
  expect_error("{{ 9223372036854775807 + 1 }}", {"overflow"});
  // Deep and self-containing values: refused when built, or caught when printed, compared or serialised.
  expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}",
               {"nested deeper than 256"});
  expect_error("{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'k': ns.x} %}{% endfor %}",
               {"nested deeper than 256"});
  expect_error("{% set h = namespace(ns=1) %}{% for i in range(100000) %}{% set h.ns = namespace(inner=h.ns) %}{% endfor %}",
               {"nested deeper than 256"});
  expect_error("{% set h = namespace(x=0) %}{% for i in range(100000) %}{% for l in [h.x, h.x] %}"
               "{% if loop.first %}{% set h.x = loop %}{% endif %}{% endfor %}{% endfor %}",
               {"nested deeper than 256"});
  expect_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", {"containing itself"});
  expect_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns == ns }}", {"containing itself"});
  expect_error("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ [ns] | tojson }}", {"containing itself"});
  jinja::RenderLimits small;
  small.max_steps = 100;
  expect_error("{% for i in range(1000) %}{{ i }}{% endfor %}", {"more than 100 steps"}, small);
}

TEST(Jinja, StrftimeNowFormatsTheCurrentDate) {
  auto compiled = jinja::Template::compile("{{ strftime_now('%Y') | int > 2000 }}|{{ strftime_now('%d %B %Y') | length > 8 }}");
  ASSERT_TRUE(compiled.is_ok()) << compiled.status().message();
  auto rendered = compiled->render(jinja::Object{});
  ASSERT_TRUE(rendered.is_ok()) << rendered.status().message();
  EXPECT_EQ(*rendered, "True|True");
}

}  // namespace
}  // namespace rwd::tokenizer
