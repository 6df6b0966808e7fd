// libFuzzer target for the Jinja interpreter: any bytes as a template must compile or fail with a Status,
// and a compiled one must render or fail with a Status, within its step, nesting and output bounds: never
// crash, hang, overflow the stack or read out of bounds. The context is a small conversation with a tool.
// Build as scripts/fuzz.sh does (clang, -DREWIND_FUZZ=ON), then:
//   build-fuzz/tests/fuzz/fuzz_jinja -max_total_time=120 CORPUS_DIR tests/data/chat_templates
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/json_value.h"
#include "tokenizer/jinja/template.h"

namespace {

const rwd::tokenizer::jinja::Object& context() {
  static const rwd::tokenizer::jinja::Object globals = [] {
    const auto json = nlohmann::ordered_json::parse(R"({
      "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "Hi <think>x</think>"},
                   {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                    "function": {"name": "f", "arguments": {"a": 1, "b": [true, null, 2.5]}}}]},
                   {"role": "tool", "content": "ok"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
    return rwd::tokenizer::jinja::value_from_json(json).object();
  }();
  return globals;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto compiled = rwd::tokenizer::jinja::Template::compile(source);
  if (!compiled) return 0;
  rwd::tokenizer::jinja::RenderLimits limits;
  limits.max_steps = 200'000;  // keeps each input fast; the bounds themselves are what is under test
  limits.max_output_bytes = 1u << 20;
  limits.max_range = 10'000;
  (void)compiled->render(context(), limits);
  return 0;
}
