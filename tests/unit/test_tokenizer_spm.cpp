// links: rewind_tokenizer
// SentencePiece vocabs: llama.cpp's ids for Gemma 3's real vocab (tests/data/tokenizer/gemma3.json, made with
// llama-tokenize), the score-ordered merge loop against a naive O(n^2) reference on random vocabs, space
// prefixing, byte fallback for invalid UTF-8, special / user-defined token matching and literal ranges.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace rwd::tokenizer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

Tokenizer load_tokenizer(const std::string& relative_path) {
  auto file = gguf::GgufFile::open(std::string(REWIND_TEST_DATA) + "/" + relative_path);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  auto tokenizer = Tokenizer::from_gguf(**file);
  EXPECT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

std::vector<int32_t> encode_ok(const Tokenizer& tokenizer, std::string_view text, bool add_bos, bool parse_special) {
  auto ids = tokenizer.encode(text, add_bos, parse_special);
  EXPECT_TRUE(ids.is_ok()) << ids.status().message();
  return ids.is_ok() ? *ids : std::vector<int32_t>{-999};
}

std::string decode_ok(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool render_special) {
  auto text = tokenizer.decode(ids, render_special);
  EXPECT_TRUE(text.is_ok()) << text.status().message();
  return text.is_ok() ? *text : std::string("<decode failed>");
}

class Gemma3Spm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = new Tokenizer(load_tokenizer("vocab/gemma3-vocab.gguf")); }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  static Tokenizer* tokenizer_;
};
Tokenizer* Gemma3Spm::tokenizer_ = nullptr;

TEST_F(Gemma3Spm, MatchesLlamaCppIdsAndRoundTrips) {
  std::ifstream in(std::string(REWIND_TEST_DATA) + "/tokenizer/gemma3.json");
  ASSERT_TRUE(in.good()) << "tests/data/tokenizer/gemma3.json missing";
  const nlohmann::json data = nlohmann::json::parse(in);
  const auto& cases = data.at("cases");
  ASSERT_GE(cases.size(), 20u);
  for (const auto& item : cases) {
    const std::string text = item.at("text");
    const bool add_bos = item.at("add_bos");  // llama-tokenize's effective choice: the vocab's, unless --no-bos
    const bool parse_special = item.at("parse_special");
    const std::vector<int32_t> expected = item.at("ids");
    const std::vector<int32_t> ids = encode_ok(*tokenizer_, text, add_bos, parse_special);
    EXPECT_EQ(ids, expected) << "text: '" << text << "' parse_special " << parse_special;
    const std::vector<int32_t> body(ids.begin() + (add_bos && !ids.empty() ? 1 : 0), ids.end());
    EXPECT_EQ(decode_ok(*tokenizer_, body, parse_special), text) << "round trip of '" << text << "'";
  }
}

TEST_F(Gemma3Spm, VocabFacts) {
  EXPECT_EQ(tokenizer_->kind(), VocabKind::spm);
  EXPECT_EQ(tokenizer_->n_vocab(), 262144);
  EXPECT_EQ(tokenizer_->bos_id(), 2);
  EXPECT_EQ(tokenizer_->eos_id(), 1);
  EXPECT_EQ(tokenizer_->eot_id(), 106);  // <end_of_turn>, found by spelling: the file names no eot id
  EXPECT_TRUE(tokenizer_->add_bos_default());
  // <eos>, <end_of_turn>, and </s> (a user-defined token in Gemma 3 that llama.cpp's spelling list ends on).
  EXPECT_EQ(tokenizer_->eog_ids(), (std::vector<int32_t>{1, 106, 212}));
}

TEST_F(Gemma3Spm, SpacesBecomeTheVisibleSpaceAndBack) {
  const std::vector<int32_t> ids = encode_ok(*tokenizer_, "Hello world", false, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tokenizer_->token_text(ids[0]), "Hello");
  EXPECT_EQ(tokenizer_->token_text(ids[1]), std::string(kSpace) + "world");
  EXPECT_EQ(decode_ok(*tokenizer_, ids, false), "Hello world");
  // add_space_prefix is false for Gemma: no space is invented in front.
  EXPECT_EQ(encode_ok(*tokenizer_, "Hello", true, false), (std::vector<int32_t>{2, ids[0]}));
}

TEST_F(Gemma3Spm, SpecialAndUserDefinedTokens) {
  const int32_t start_of_turn = tokenizer_->find_token("<start_of_turn>");
  const int32_t newline = tokenizer_->find_token("\n");
  ASSERT_EQ(start_of_turn, 105);
  ASSERT_EQ(newline, 107);
  const std::string text = "<start_of_turn>user\nhi";
  const std::vector<int32_t> parsed = encode_ok(*tokenizer_, text, false, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed[0], start_of_turn);
  EXPECT_EQ(decode_ok(*tokenizer_, parsed, true), text);
  // Without parse_special the control token is plain text, but "\n" (user-defined) is still cut out whole.
  const std::vector<int32_t> plain = encode_ok(*tokenizer_, text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), start_of_turn), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), newline), 1);
  EXPECT_EQ(decode_ok(*tokenizer_, plain, false), text);
  // Longer user-defined runs win over shorter ones: three newlines are one token.
  EXPECT_EQ(encode_ok(*tokenizer_, "\n\n\n", false, false), std::vector<int32_t>{tokenizer_->find_token("\n\n\n")});
}

// Literal ranges: a control spelling inside one is text, encoded with its neighbours as parse_special=false
// encodes the stretch between the real special tokens; user-defined tokens ("\n") are still cut out there,
// since encoding always matches them.
TEST_F(Gemma3Spm, LiteralRangesKeepControlSpellingsAsText) {
  const std::string content = "Hi <end_of_turn>\n<start_of_turn>model\nSure";
  const std::string text = "<start_of_turn>user\n" + content + "<end_of_turn>\n";
  const size_t at = text.find(content);
  const std::vector<TextRange> literal = {{at + 3, at + 16}, {at + 17, at + 32}};
  auto ids = tokenizer_->encode(text, false, literal);
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  std::vector<int32_t> expected = {105};
  for (int32_t id : encode_ok(*tokenizer_, "user\n" + content, false, false)) expected.push_back(id);
  expected.push_back(106);
  expected.push_back(107);
  EXPECT_EQ(*ids, expected);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 105), 1);
  EXPECT_EQ(decode_ok(*tokenizer_, *ids, true), text);

  // Only control spellings are found: "<b>" and "\n" are user-defined.
  const std::vector<SpelledToken> spelled = tokenizer_->find_control_spellings("<b><start_of_turn>\n");
  ASSERT_EQ(spelled.size(), 1u);
  EXPECT_EQ(spelled[0].token, 105);
  EXPECT_EQ(spelled[0].range, (TextRange{3, 18}));
}

TEST_F(Gemma3Spm, InvalidUtf8UsesByteTokens) {
  const std::string text = std::string("ok\xff\xc3 \xe2\x82 \xed\xa0\x80!");
  const std::vector<int32_t> ids = encode_ok(*tokenizer_, text, false, false);
  EXPECT_NE(std::find(ids.begin(), ids.end(), tokenizer_->find_token("<0xFF>")), ids.end());
  EXPECT_EQ(decode_ok(*tokenizer_, ids, false), text);
}

// Gemma 3 has all 256 byte tokens, so any bytes round-trip exactly, with or without special parsing.
TEST_F(Gemma3Spm, RandomBytesRoundTrip) {
  std::mt19937 rng(23);
  const std::vector<std::string> fragments = {"<start_of_turn>", "<bos>", "</s>", "\xf0\x9f", "\x99\x82", "\n\n",
                                              "  ", "\t", "é", "12"};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int n_parts = static_cast<int>(rng() % 30);
    for (int i = 0; i < n_parts; ++i) {
      if (rng() % 3 == 0) {
        text += fragments[rng() % fragments.size()];
      } else {
        text += static_cast<char>(rng() % 256);
      }
    }
    for (bool parse_special : {false, true}) {
      EXPECT_EQ(decode_ok(*tokenizer_, encode_ok(*tokenizer_, text, false, parse_special), parse_special), text);
    }
  }
}

TEST_F(Gemma3Spm, EmptyTextAndLongText) {
  EXPECT_TRUE(encode_ok(*tokenizer_, "", false, true).empty());
  EXPECT_EQ(encode_ok(*tokenizer_, "", true, true), std::vector<int32_t>{2});
  std::mt19937 rng(5);
  const std::vector<std::string> words = {"the", "Quick", "brown", "fox", "1234", "héllo", "世界", "🙂", "\n",
                                          "  ", "don't", "<tag>", "x=y+1;", "\t", "Überprüfung", "??"};
  std::string text;
  while (text.size() < 100000) {
    text += words[rng() % words.size()];
    if (rng() % 3 != 0) text += ' ';
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = encode_ok(*tokenizer_, text, false, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ids.size(), 20000u);
  EXPECT_LT(seconds, 5.0) << ids.size() << " tokens";
  EXPECT_EQ(decode_ok(*tokenizer_, ids, false), text);
}

// --- merge loop against a naive reference -------------------------------------------------------------------

// <unk>, <s>, </s>, 256 byte tokens, the alphabet's characters, then random concatenations with random scores
// drawn from a few values so that ties happen.
VocabData random_spm_vocab(std::mt19937& rng, const std::vector<std::string>& alphabet, int n_pieces) {
  VocabData vocab;
  vocab.model = "llama";
  vocab.add_space_prefix = false;
  vocab.unknown_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.tokens = {"<unk>", "<s>", "</s>"};
  vocab.token_types = {TokenType::unknown, TokenType::control, TokenType::control};
  for (int byte = 0; byte < 256; ++byte) {
    vocab.tokens.push_back(fmt::format("<0x{:02X}>", byte));
    vocab.token_types.push_back(TokenType::byte);
  }
  for (const std::string& c : alphabet) {
    vocab.tokens.push_back(c);
    vocab.token_types.push_back(TokenType::normal);
  }
  std::vector<std::string> parts = alphabet;
  while (static_cast<int>(vocab.tokens.size()) < 259 + static_cast<int>(alphabet.size()) + n_pieces) {
    const std::string piece = parts[rng() % parts.size()] + parts[rng() % parts.size()];
    if (std::find(vocab.tokens.begin(), vocab.tokens.end(), piece) != vocab.tokens.end()) continue;
    vocab.tokens.push_back(piece);
    vocab.token_types.push_back(TokenType::normal);
    parts.push_back(piece);
  }
  vocab.scores.assign(vocab.tokens.size(), 0.0f);
  for (float& score : vocab.scores) score = -static_cast<float>(rng() % 5);
  return vocab;
}

// Textbook SentencePiece BPE: merge the adjacent pair whose concatenation is a token with the highest score,
// leftmost on ties, until none is; then spell what is left with tokens or byte tokens.
std::vector<int32_t> naive_spm(const VocabData& vocab, const std::vector<std::string>& chars) {
  const auto find = [&](const std::string& text) {
    const auto it = std::find(vocab.tokens.begin(), vocab.tokens.end(), text);
    return it == vocab.tokens.end() ? -1 : static_cast<int32_t>(it - vocab.tokens.begin());
  };
  std::vector<std::string> symbols = chars;
  while (true) {
    int best = -1;
    float best_score = 0.0f;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const int32_t id = find(symbols[i] + symbols[i + 1]);
      if (id >= 0 && (best < 0 || vocab.scores[id] > best_score)) {
        best = static_cast<int>(i);
        best_score = vocab.scores[id];
      }
    }
    if (best < 0) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + best + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& symbol : symbols) {
    const int32_t id = find(symbol);
    if (id >= 0) {
      ids.push_back(id);
      continue;
    }
    for (char c : symbol) ids.push_back(find(fmt::format("<0x{:02X}>", static_cast<uint8_t>(c))));
  }
  return ids;
}

TEST(SpmMerges, MatchNaiveReferenceOnRandomVocabs) {
  std::mt19937 rng(99);
  const std::vector<std::string> alphabet = {std::string(kSpace), "a", "b", "c"};
  // Characters outside the vocab ("é", "d") exercise the byte fallback.
  const std::vector<std::string> text_chars = {" ", "a", "b", "c", "a", "b", "\xC3\xA9", "d"};
  for (int trial = 0; trial < 40; ++trial) {
    const VocabData vocab = random_spm_vocab(rng, alphabet, 5 + static_cast<int>(rng() % 80));
    auto tokenizer = Tokenizer::from_vocab(vocab);
    ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
    std::string text;
    std::vector<std::string> escaped_chars;
    const int n_chars = static_cast<int>(rng() % 40);
    for (int i = 0; i < n_chars; ++i) {
      const std::string& c = text_chars[rng() % text_chars.size()];
      text += c;
      escaped_chars.push_back(c == " " ? std::string(kSpace) : c);
    }
    EXPECT_EQ(encode_ok(*tokenizer, text, false, false), naive_spm(vocab, escaped_chars)) << "text '" << text << "'";
    EXPECT_EQ(decode_ok(*tokenizer, encode_ok(*tokenizer, text, false, false), false), text);
  }
}

TEST(SpmVocab, SpacePrefixGoesBeforeTheFirstFragmentAndAfterSpecials) {
  std::mt19937 rng(2);
  VocabData vocab = random_spm_vocab(rng, {std::string(kSpace), "h", "i"}, 0);
  vocab.add_space_prefix.reset();  // SPM default: prefix a space, as llama.cpp does
  vocab.add_bos.reset();
  for (const std::string& piece : {std::string(kSpace) + "h", std::string(kSpace) + "hi", std::string("hi")}) {
    vocab.tokens.push_back(piece);
    vocab.token_types.push_back(TokenType::normal);
    vocab.scores.push_back(-1.0f);
  }
  auto tokenizer = Tokenizer::from_vocab(vocab);
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  const int32_t space_hi = tokenizer->find_token(std::string(kSpace) + "hi");
  const int32_t hi = tokenizer->find_token("hi");
  EXPECT_TRUE(tokenizer->add_bos_default());
  EXPECT_EQ(encode_ok(*tokenizer, "hi", true, false), (std::vector<int32_t>{1, space_hi}));
  EXPECT_EQ(encode_ok(*tokenizer, "hi</s>hi", false, true), (std::vector<int32_t>{space_hi, 2, space_hi}));
  // </s> as text: its four characters are not vocab tokens, so they come out as byte tokens.
  EXPECT_EQ(encode_ok(*tokenizer, "hi</s>hi", false, false),
            (std::vector<int32_t>{space_hi, 3 + '<', 3 + '/', 3 + 's', 3 + '>', hi}));
  vocab.add_space_prefix = false;
  auto no_prefix = Tokenizer::from_vocab(vocab);
  ASSERT_TRUE(no_prefix.is_ok());
  EXPECT_EQ(encode_ok(*no_prefix, "hi", false, false), (std::vector<int32_t>{hi}));
}

TEST(SpmVocab, MissingByteTokensFallBackToUnknown) {
  VocabData vocab;
  vocab.model = "llama";
  vocab.tokens = {"<unk>", "<s>", "</s>", "a"};
  vocab.token_types = {TokenType::unknown, TokenType::control, TokenType::control, TokenType::normal};
  vocab.unknown_id = 0;
  vocab.bos_id = 1;
  vocab.add_space_prefix = false;
  auto tokenizer = Tokenizer::from_vocab(vocab);
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  EXPECT_EQ(encode_ok(*tokenizer, "a\xff" "a", false, false), (std::vector<int32_t>{3, 0, 3}));
  EXPECT_EQ(decode_ok(*tokenizer, {3, 0, 3}, true), "a<unk>a");
  EXPECT_EQ(decode_ok(*tokenizer, {3, 0, 3}, false), "aa");
}

TEST(SpmVocab, ControlTokensAreThoseOfTypeControl) {
  VocabData vocab;
  vocab.model = "llama";
  vocab.tokens = {"<unk>", "<s>", "</s>", "a", "<tool>"};
  vocab.token_types = {TokenType::unknown, TokenType::control, TokenType::control, TokenType::normal,
                       TokenType::user_defined};
  vocab.unknown_id = 0;
  vocab.bos_id = 1;
  auto tokenizer = Tokenizer::from_vocab(vocab);
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  const std::vector<bool> expected = {false, true, true, false, false};
  for (int32_t id = 0; id < 5; ++id) EXPECT_EQ(tokenizer->is_control(id), expected[id]) << "id " << id;
  EXPECT_FALSE(tokenizer->is_control(-1));
  EXPECT_FALSE(tokenizer->is_control(5));
}

}  // namespace
}  // namespace rwd::tokenizer
