// The server's request parsing and stop-string matching, without HTTP: every refused field is named in the
// error's `param` and in its message (clients show the message, tools read the param), and the stop matcher
// returns exactly the text before the first stop string to appear, however the text is split into pushes.
// links: rewind_server
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api.h"
#include "server/generation.h"

namespace rwd::server {
namespace {

using nlohmann::json;

// Pushes `pieces` in order, then flushes unless a stop matched; returns everything the matcher released.
std::string run_matcher(const std::vector<std::string>& stops, const std::vector<std::string>& pieces,
                        bool* stopped = nullptr) {
  StopMatcher matcher(stops);
  std::string out;
  for (const std::string& piece : pieces) out += matcher.push(piece);
  if (!matcher.stopped()) out += matcher.flush();
  if (stopped) *stopped = matcher.stopped();
  return out;
}

TEST(StopMatcher, StopSplitAcrossPushesReleasesOnlyTheTextBeforeIt) {
  StopMatcher matcher({"world"});
  EXPECT_EQ(matcher.push("Hello wor"), "Hello ");  // "wor" may begin the stop string
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("ld and more"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.push("anything after"), "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  bool stopped = false;
  EXPECT_EQ(run_matcher({"cd", "b"}, {"abcd"}, &stopped), "a");
  EXPECT_TRUE(stopped);
  // The longer stop began first but the shorter one completes earlier in the text.
  EXPECT_EQ(run_matcher({"abcd", "bc"}, {"ab", "c", "d"}, &stopped), "a");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(run_matcher({"yz", "xyz"}, {"wx", "yz"}, &stopped), "w");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, HeldBackPrefixIsReleasedWhenItDoesNotMatch) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("xE"), "x");
  EXPECT_EQ(matcher.push("N"), "");
  EXPECT_EQ(matcher.push("x"), "ENx");
  EXPECT_FALSE(matcher.stopped());
  // A repeated first character: "aaa" may still become "aab" from its last two bytes.
  StopMatcher repeated({"aab"});
  EXPECT_EQ(repeated.push("aaa"), "a");
  EXPECT_EQ(repeated.push("b"), "");
  EXPECT_TRUE(repeated.stopped());
}

TEST(StopMatcher, FlushReturnsTheHeldTextAtTheEnd) {
  StopMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("abcST"), "abc");
  EXPECT_EQ(matcher.flush(), "ST");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  bool stopped = true;
  EXPECT_EQ(run_matcher({""}, {"abc", "def"}, &stopped), "abcdef");
  EXPECT_FALSE(stopped);
}

TEST(StopMatcher, MultiByteUtf8TextAndStops) {
  bool stopped = false;
  EXPECT_EQ(run_matcher({"世界"}, {"héllo 世", "界!"}, &stopped), "héllo ");
  EXPECT_TRUE(stopped);
  // Byte by byte, as a byte-level vocabulary delivers it: a stop's first bytes are held even mid-character.
  const std::string text = "wörld 世界 🙂 end";
  std::vector<std::string> bytes;
  for (char byte : text) bytes.push_back(std::string(1, byte));
  EXPECT_EQ(run_matcher({"🙂"}, bytes, &stopped), "wörld 世界 ");
  EXPECT_TRUE(stopped);
  // "é" (C3 A9) shares its first byte with "è" (C3 A8): the held byte comes back whole with the next one.
  StopMatcher matcher({"é!"});
  EXPECT_EQ(matcher.push("\xC3"), "");
  EXPECT_EQ(matcher.push("\xA8 x"), "è x");
  EXPECT_FALSE(matcher.stopped());
}

// Random texts over a small alphabet, random stops and random splits. Reference: after each piece, the text so
// far is searched with std::string::find; the first time any stop occurs, the answer is the text before its
// earliest occurrence (a stop that would only complete in later text is never generated).
TEST(StopMatcher, AnySplitGivesTheTextBeforeTheFirstStopToAppear) {
  std::mt19937 rng(7);
  const std::string alphabet = "abc";
  const auto random_string = [&](size_t min_size, size_t max_size) {
    std::string out(std::uniform_int_distribution<size_t>(min_size, max_size)(rng), ' ');
    for (char& c : out) c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    return out;
  };
  int n_stopped = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const std::string text = random_string(0, 24);
    std::vector<std::string> stops;
    const int n_stops = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0; i < n_stops; ++i) stops.push_back(random_string(1, 5));
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(0, 4)(rng);  // empty pieces too
      pieces.push_back(text.substr(at, n));
      at += n;
    }

    std::string so_far;
    std::string expected;
    bool expect_stop = false;
    for (const std::string& piece : pieces) {
      so_far += piece;
      size_t earliest = std::string::npos;
      for (const std::string& stop : stops) earliest = std::min(earliest, so_far.find(stop));
      if (earliest != std::string::npos) {
        expected = so_far.substr(0, earliest);
        expect_stop = true;
        break;
      }
    }
    if (!expect_stop) expected = text;

    bool stopped = false;
    ASSERT_EQ(run_matcher(stops, pieces, &stopped), expected)
        << "text '" << text << "', stops " << json(stops).dump() << ", pieces " << json(pieces).dump();
    ASSERT_EQ(stopped, expect_stop) << text;
    n_stopped += stopped;
  }
  EXPECT_GT(n_stopped, 100);  // both outcomes were exercised
  EXPECT_LT(n_stopped, 1900);
}

// --- parse_completion_request ---

std::optional<ApiError> parse(const json& body, bool chat, CompletionParams* params = nullptr) {
  CompletionParams local;
  return parse_completion_request(body, chat, params ? *params : local);
}

json completion(json extra) {
  json body = {{"prompt", "hello"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

json chat(json extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

// The request is refused with a 400 whose param is `param` and whose message names it.
void expect_field_error(const json& body, bool is_chat, const std::string& param) {
  SCOPED_TRACE(body.dump());
  const std::optional<ApiError> error = parse(body, is_chat);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 400);
  EXPECT_EQ(error->type, "invalid_request_error");
  EXPECT_EQ(error->param, param);
  EXPECT_NE(error->message.find(param), std::string::npos) << error->message;
}

TEST(ParseCompletionRequest, ValidCompletionFillsEveryField) {
  CompletionParams params;
  const json body = {{"model", "any"},       {"prompt", "hello"},       {"max_tokens", 7},
                     {"temperature", 0.5},   {"top_p", 0.9},            {"top_k", -1},
                     {"min_p", 0.1},         {"repeat_penalty", 1.1},   {"seed", -3},
                     {"stop", "\n"},         {"stream", true},          {"stream_options", {{"include_usage", true}}},
                     {"logprobs", 2},        {"ignore_eos", true},      {"return_tokens", true},
                     {"n", 1},               {"echo", false},           {"logit_bias", json::object()},
                     {"speculative", {{"type", "ngram"}, {"draft_max", 4}, {"tree", 9}}}};
  ASSERT_FALSE(parse(body, false, &params).has_value());
  EXPECT_FALSE(params.chat);
  EXPECT_EQ(params.prompt, "hello");
  EXPECT_TRUE(params.prompt_ids.empty());
  EXPECT_EQ(params.max_tokens, 7);
  EXPECT_FLOAT_EQ(params.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(params.sampling.top_p, 0.9f);
  EXPECT_EQ(params.sampling.top_k, 0);  // -1 means off, as in vLLM
  EXPECT_FLOAT_EQ(params.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(params.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(params.seed_given);
  EXPECT_EQ(params.sampling.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(params.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(params.stream);
  EXPECT_EQ(params.spec_tree_nodes, 9);
  EXPECT_TRUE(params.include_usage);
  EXPECT_TRUE(params.logprobs);
  EXPECT_EQ(params.top_logprobs, 2);
  EXPECT_TRUE(params.ignore_eos);
  EXPECT_TRUE(params.return_tokens);
  EXPECT_EQ(params.spec_type, "ngram");
  EXPECT_EQ(params.spec_draft_max, 4);
}

TEST(ParseCompletionRequest, ValidChatFillsMessages) {
  CompletionParams params;
  const json body = {
      {"messages", json::array({{{"role", "developer"}, {"content", "be brief"}},
                                {{"role", "user"},
                                 {"content", json::array({{{"type", "text"}, {"text", "one "}},
                                                          {{"type", "text"}, {"text", "two"}}})}},
                                {{"role", "assistant"}, {"content", "ok"}}})},
      {"max_completion_tokens", 5},
      {"logprobs", true},
      {"top_logprobs", 3}};
  ASSERT_FALSE(parse(body, true, &params).has_value());
  EXPECT_TRUE(params.chat);
  ASSERT_EQ(params.messages.size(), 3u);
  EXPECT_EQ(params.messages[0].role, "system");  // OpenAI's newer name for it
  EXPECT_EQ(params.messages[1].content, "one two");
  EXPECT_EQ(params.messages[2].role, "assistant");
  EXPECT_EQ(params.max_tokens, 5);
  EXPECT_TRUE(params.logprobs);
  EXPECT_EQ(params.top_logprobs, 3);
  EXPECT_FALSE(params.seed_given);
  EXPECT_FALSE(params.spec_type.has_value());
}

TEST(ParseCompletionRequest, NullFieldsCountAsAbsent) {
  CompletionParams params;
  ASSERT_FALSE(parse(completion({{"max_tokens", nullptr}, {"temperature", nullptr}, {"stop", nullptr}}), false,
                     &params).has_value());
  EXPECT_FALSE(params.max_tokens.has_value());
  EXPECT_FLOAT_EQ(params.sampling.temperature, SamplingParams{}.temperature);
  EXPECT_TRUE(params.stop.empty());
}

TEST(ParseCompletionRequest, BodyMustBeAnObject) {
  for (const json& body : {json::array({1, 2}), json("text"), json(3), json(nullptr)}) {
    const std::optional<ApiError> error = parse(body, false);
    ASSERT_TRUE(error.has_value()) << body.dump();
    EXPECT_EQ(error->status, 400);
    EXPECT_TRUE(error->param.empty());
    EXPECT_NE(error->message.find("JSON object"), std::string::npos) << error->message;
  }
}

TEST(ParseCompletionRequest, WrongTypesNameTheField) {
  expect_field_error(completion({{"model", 5}}), false, "model");
  expect_field_error(completion({{"temperature", "hot"}}), false, "temperature");
  expect_field_error(completion({{"top_p", true}}), false, "top_p");
  expect_field_error(completion({{"top_k", 1.5}}), false, "top_k");
  expect_field_error(completion({{"top_k", "5"}}), false, "top_k");
  expect_field_error(completion({{"min_p", json::array()}}), false, "min_p");
  expect_field_error(completion({{"max_tokens", "5"}}), false, "max_tokens");
  expect_field_error(completion({{"seed", "x"}}), false, "seed");
  expect_field_error(completion({{"stream", "yes"}}), false, "stream");
  expect_field_error(completion({{"stream_options", true}}), false, "stream_options");
  expect_field_error(completion({{"stream_options", {{"include_usage", 1}}}}), false, "stream_options.include_usage");
  expect_field_error(completion({{"ignore_eos", 1}}), false, "ignore_eos");
  expect_field_error(completion({{"return_tokens", "true"}}), false, "return_tokens");
  expect_field_error(completion({{"logprobs", true}}), false, "logprobs");  // completions: an integer
  expect_field_error(chat({{"logprobs", 3}}), true, "logprobs");            // chat: a boolean
  expect_field_error(completion({{"prompt", 5}}), false, "prompt");
  expect_field_error(chat({{"messages", "hi"}}), true, "messages");
  expect_field_error(completion({{"speculative", "ngram"}}), false, "speculative");
  expect_field_error(completion({{"speculative", {{"type", 1}}}}), false, "speculative.type");
}

TEST(ParseCompletionRequest, IntegralFloatsAreAcceptedAsIntegers) {
  CompletionParams params;
  ASSERT_FALSE(parse(completion({{"max_tokens", 5.0}, {"top_k", 3.0}}), false, &params).has_value());
  EXPECT_EQ(params.max_tokens, 5);
  EXPECT_EQ(params.sampling.top_k, 3);
}

TEST(ParseCompletionRequest, OutOfRangeValuesNameTheField) {
  expect_field_error(completion({{"temperature", -0.1}}), false, "temperature");
  expect_field_error(completion({{"temperature", 2.5}}), false, "temperature");
  expect_field_error(completion({{"top_p", 0.0}}), false, "top_p");  // open at 0: nothing would be kept
  expect_field_error(completion({{"top_p", 1.5}}), false, "top_p");
  expect_field_error(completion({{"top_k", -2}}), false, "top_k");
  expect_field_error(completion({{"min_p", -0.5}}), false, "min_p");
  expect_field_error(completion({{"min_p", 1.5}}), false, "min_p");
  expect_field_error(completion({{"repetition_penalty", 0.0}}), false, "repetition_penalty");
  expect_field_error(completion({{"max_tokens", 0}}), false, "max_tokens");
  expect_field_error(completion({{"max_tokens", -1}}), false, "max_tokens");
  expect_field_error(completion({{"max_tokens", 1000000000000}}), false, "max_tokens");
  expect_field_error(completion({{"max_tokens", uint64_t{1} << 63}}), false, "max_tokens");
  expect_field_error(completion({{"max_tokens", 1e30}}), false, "max_tokens");
  expect_field_error(chat({{"max_completion_tokens", 0}}), true, "max_completion_tokens");
  expect_field_error(completion({{"logprobs", 21}}), false, "logprobs");
  expect_field_error(completion({{"logprobs", -1}}), false, "logprobs");
  expect_field_error(chat({{"logprobs", true}, {"top_logprobs", 21}}), true, "top_logprobs");
  expect_field_error(chat({{"top_logprobs", 2}}), true, "top_logprobs");  // needs logprobs: true
  expect_field_error(completion({{"speculative", {{"draft_max", 0}}}}), false, "speculative.draft_max");
  expect_field_error(completion({{"speculative", {{"draft_max", 65}}}}), false, "speculative.draft_max");
  expect_field_error(completion({{"speculative", {{"tree", -1}}}}), false, "speculative.tree");
  expect_field_error(completion({{"speculative", {{"tree", 65}}}}), false, "speculative.tree");
  expect_field_error(completion({{"speculative", {{"tree", "wide"}}}}), false, "speculative.tree");
}

TEST(ParseCompletionRequest, UnsupportedFeaturesAreRefusedByName) {
  expect_field_error(completion({{"n", 2}}), false, "n");
  expect_field_error(chat({{"n", 3}}), true, "n");
  expect_field_error(completion({{"best_of", 2}}), false, "best_of");
  expect_field_error(completion({{"echo", true}}), false, "echo");
  expect_field_error(completion({{"suffix", "tail"}}), false, "suffix");
  expect_field_error(completion({{"presence_penalty", 0.5}}), false, "presence_penalty");
  expect_field_error(chat({{"frequency_penalty", 1}}), true, "frequency_penalty");
  expect_field_error(completion({{"logit_bias", {{"50256", -100}}}}), false, "logit_bias");
  expect_field_error(chat({{"tools", json::array({{{"type", "function"}}})}}), true, "tools");
  expect_field_error(chat({{"functions", json::array({{{"name", "f"}}})}}), true, "functions");
  expect_field_error(chat({{"response_format", {{"type", "json_object"}}}}), true, "response_format");
  expect_field_error(completion({{"speculative", {{"kind", "ngram"}}}}), false, "speculative.kind");
  // Their neutral values are accepted, as clients send them by default.
  EXPECT_FALSE(parse(chat({{"n", 1}, {"presence_penalty", 0}, {"tools", json::array()},
                           {"response_format", {{"type", "text"}}}}),
                     true).has_value());
}

TEST(ParseCompletionRequest, MessagesAreChecked) {
  expect_field_error(chat({{"messages", json::array()}}), true, "messages");
  expect_field_error(json::object(), true, "messages");
  expect_field_error(chat({{"messages", json::array({"hi"})}}), true, "messages[0]");
  expect_field_error(chat({{"messages", json::array({{{"content", "hi"}}})}}), true, "messages[0].role");
  expect_field_error(chat({{"messages", json::array({{{"role", 1}, {"content", "hi"}}})}}), true, "messages[0].role");
  expect_field_error(chat({{"messages", json::array({{{"role", "tool"}, {"content", "hi"}}})}}), true,
                     "messages[0].role");
  expect_field_error(chat({{"messages", json::array({{{"role", "user"}, {"content", "a"}},
                                                     {{"role", "user"}, {"content", 5}}})}}),
                     true, "messages[1].content");
  expect_field_error(chat({{"messages", json::array({{{"role", "user"}}})}}), true, "messages[0].content");
  expect_field_error(chat({{"messages", json::array({{{"role", "user"},
                                                      {"content", json::array({{{"type", "image_url"}}})}}})}}),
                     true, "messages[0].content[0]");
  expect_field_error(chat({{"messages", json::array({{{"role", "user"},
                                                      {"content", json::array({{{"type", "text"}}})}}})}}),
                     true, "messages[0].content[0].text");
}

TEST(ParseCompletionRequest, PromptForms) {
  CompletionParams ids;
  ASSERT_FALSE(parse(completion({{"prompt", {72, 105, 0}}}), false, &ids).has_value());
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{72, 105, 0}));
  EXPECT_TRUE(ids.prompt.empty());

  CompletionParams batch_of_ids;  // OpenAI clients send a batch of one: [[ids]]
  ASSERT_FALSE(parse(completion({{"prompt", json::array({{5, 6}})}}), false, &batch_of_ids).has_value());
  EXPECT_EQ(batch_of_ids.prompt_ids, (std::vector<int32_t>{5, 6}));

  CompletionParams one_string;
  ASSERT_FALSE(parse(completion({{"prompt", json::array({"text"})}}), false, &one_string).has_value());
  EXPECT_EQ(one_string.prompt, "text");
  EXPECT_TRUE(one_string.prompt_ids.empty());

  expect_field_error(completion({{"prompt", json::array({"a", "b"})}}), false, "prompt");
  expect_field_error(completion({{"prompt", json::array({{1}, {2}})}}), false, "prompt");
  expect_field_error(completion({{"prompt", json::array()}}), false, "prompt");
  expect_field_error(completion({{"prompt", json::array({json::array()})}}), false, "prompt");
  expect_field_error(completion({{"prompt", {1, -1}}}), false, "prompt");
  expect_field_error(completion({{"prompt", {1, 2.5}}}), false, "prompt");
  expect_field_error(completion({{"prompt", {1, "x"}}}), false, "prompt");
  expect_field_error(completion({{"prompt", {int64_t{1} << 40}}}), false, "prompt");
  expect_field_error(json::object(), false, "prompt");
  const std::optional<ApiError> several = parse(completion({{"prompt", json::array({"a", "b", "c"})}}), false);
  ASSERT_TRUE(several.has_value());
  EXPECT_NE(several->message.find("3 prompts"), std::string::npos) << several->message;
  const std::optional<ApiError> bad_id = parse(completion({{"prompt", {1, 2, -7}}}), false);
  ASSERT_TRUE(bad_id.has_value());
  EXPECT_NE(bad_id->message.find("prompt[2]"), std::string::npos) << bad_id->message;
}

TEST(ParseCompletionRequest, StopForms) {
  CompletionParams one;
  ASSERT_FALSE(parse(completion({{"stop", "END"}}), false, &one).has_value());
  EXPECT_EQ(one.stop, std::vector<std::string>{"END"});

  CompletionParams several;
  ASSERT_FALSE(parse(completion({{"stop", {"a", "bc"}}}), false, &several).has_value());
  EXPECT_EQ(several.stop, (std::vector<std::string>{"a", "bc"}));

  json too_many = json::array();
  for (int i = 0; i < 17; ++i) too_many.push_back(std::string(1, static_cast<char>('a' + i)));
  expect_field_error(completion({{"stop", too_many}}), false, "stop");
  expect_field_error(completion({{"stop", ""}}), false, "stop");
  expect_field_error(completion({{"stop", {"a", ""}}}), false, "stop");
  expect_field_error(completion({{"stop", std::string(257, 'x')}}), false, "stop");
  expect_field_error(completion({{"stop", 5}}), false, "stop");
  expect_field_error(completion({{"stop", {"a", 1}}}), false, "stop[1]");
}

TEST(ApiJson, ErrorBodyHasMessageTypeAndParam) {
  const json named = error_body({400, "temperature: expected a number, got a string", "temperature"});
  EXPECT_EQ(named["error"]["message"], "temperature: expected a number, got a string");
  EXPECT_EQ(named["error"]["type"], "invalid_request_error");
  EXPECT_EQ(named["error"]["param"], "temperature");
  EXPECT_EQ(named["error"]["code"], 400);
  EXPECT_TRUE(error_body({429, "busy", "", "rate_limit_error"})["error"]["param"].is_null());
}

TEST(ApiJson, DumpReplacesInvalidUtf8InsteadOfThrowing) {
  const std::string out = dump(json{{"text", std::string("a\xE4\xB8")}});  // a character cut after two bytes
  json parsed;
  EXPECT_NO_THROW(parsed = json::parse(out));
  EXPECT_EQ(parsed["text"].get<std::string>().substr(0, 1), "a");
}

TEST(ApiJson, CompletionLogprobsOffsetsCountBytes) {
  const std::vector<GeneratedToken> tokens = {{65, "A", -0.5f, {{65, -0.5f}, {66, -1.5f}}}, {200, "\xC3\xA9", -1.0f, {}}};
  const json out = completion_logprobs_json(tokens, [](int32_t id) { return std::string(1, static_cast<char>(id)); },
                                            10);
  EXPECT_EQ(out["tokens"], json({"A", "\xC3\xA9"}));
  EXPECT_EQ(out["text_offset"], json({10, 11}));
  EXPECT_FLOAT_EQ(out["token_logprobs"][0].get<float>(), -0.5f);
  EXPECT_EQ(out["top_logprobs"][0].size(), 2u);
  EXPECT_TRUE(out["top_logprobs"][1].is_null());
}

}  // namespace
}  // namespace rwd::server
