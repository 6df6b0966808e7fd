// Tokenizer construction (vocab checks, llama.cpp's defaults, the end-of-generation set, decoded pieces) and
// the encode/decode paths that tie the special-token matcher, pre-tokenizer and BPE/SPM encoders together.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "gguf/gguf_file.h"
#include "gguf/keys.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/byte_encoding.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_token_matcher.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/vocab_index.h"

namespace rwd::tokenizer {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// Spellings llama.cpp treats as end of generation whatever the metadata says (llama-vocab.cpp, "special_eog_ids").
constexpr auto kEogSpellings = std::to_array<std::string_view>({
    "<|eot_id|>", "<|im_end|>",     "<|end|>",        "<|return|>",         "<|call|>",
    "<|flush|>",  "<|calls|>",      "<end_of_turn>",  "<|endoftext|>",      "</s>",
    "<|eom_id|>", "<EOT>",          "_<EOT>",         "[EOT]",              "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",            "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
});

// When the file names no end-of-turn token, llama.cpp picks one of these spellings.
constexpr auto kEotSpellings = std::to_array<std::string_view>({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<end_of_utterance>",
});

// Fill-in-the-middle pad / repo / file-separator spellings; llama.cpp ends generation on these too, so a
// model that emits one stops here exactly where it stops there.
constexpr auto kFimEogSpellings = std::to_array<std::string_view>({
    "<|fim_pad|>",  "<fim-pad>",     "<fim_pad>", "<PAD>",  "[PAD]",       "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>",   "<REPO>",    "<reponame>", "<|file_sep|>",
});

template <size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view text) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

Status check_id(std::string_view key, int32_t id, size_t n_tokens) {
  if (id == kNoToken || (id >= 0 && static_cast<size_t>(id) < n_tokens)) return Status::ok();
  return Status::errorf("{} is {}, but the vocab has {} tokens", key, id, n_tokens);
}

Result<VocabKind> vocab_kind(std::string_view model) {
  if (model == "gpt2") return VocabKind::bpe;
  if (model == "llama") return VocabKind::spm;
  return Status::errorf("{} '{}' is not supported (supported: 'gpt2' = byte-level BPE, 'llama' = SentencePiece)",
                        gguf::kTokenizerModel, model);
}

// The byte a byte-type token stands for, from its "<0xXX>" spelling.
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else {
      return std::nullopt;
    }
  }
  return static_cast<uint8_t>(value);
}

std::string unescape_spm(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.substr(pos, kSpmSpace.size()) == kSpmSpace) {
      out.push_back(' ');
      pos += kSpmSpace.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  VocabData vocab;  // token_types always has one entry per token here
  VocabKind kind = VocabKind::bpe;
  VocabIndex index;
  std::optional<PreTokenizer> pre;
  BpeEncoder bpe;
  SpmEncoder spm;
  SpecialTokenMatcher specials;
  std::vector<std::string> pieces;  // decoded bytes of each token
  std::vector<bool> hidden;         // control/unknown: piece shown only when rendering specials
  std::vector<int32_t> eog_ids;     // sorted
  std::vector<bool> eog;
  bool add_bos = false;
  bool add_space_prefix = false;

  Status check_and_index();
  void find_end_of_generation();
  void build_pieces();
  void encode_spm_fragment(std::string_view raw, bool after_special, std::vector<int32_t>& out) const;
  Result<std::vector<int32_t>> encode(std::string_view text, bool start_with_bos, const PartitionRules& rules) const;
};

Status Tokenizer::Impl::check_and_index() {
  const size_t n_tokens = vocab.tokens.size();
  if (n_tokens == 0) return Status::errorf("{} is empty", gguf::kTokenizerTokens);
  if (n_tokens > static_cast<size_t>(INT32_MAX)) {
    return Status::errorf("{} has {} entries, more than int32 ids can address", gguf::kTokenizerTokens, n_tokens);
  }
  if (!vocab.scores.empty() && vocab.scores.size() != n_tokens) {
    return Status::errorf("{} has {} entries, expected {} (one per token)", gguf::kTokenizerScores,
                          vocab.scores.size(), n_tokens);
  }
  if (vocab.token_types.empty()) vocab.token_types.assign(n_tokens, TokenType::normal);
  if (vocab.token_types.size() != n_tokens) {
    return Status::errorf("{} has {} entries, expected {} (one per token)", gguf::kTokenizerTokenType,
                          vocab.token_types.size(), n_tokens);
  }
  REWIND_RETURN_IF_ERROR(check_id(gguf::kTokenizerBosTokenId, vocab.bos_id, n_tokens));
  REWIND_RETURN_IF_ERROR(check_id(gguf::kTokenizerEosTokenId, vocab.eos_id, n_tokens));
  REWIND_RETURN_IF_ERROR(check_id(gguf::kTokenizerEotTokenId, vocab.eot_id, n_tokens));
  REWIND_RETURN_IF_ERROR(check_id(gguf::kTokenizerEomTokenId, vocab.eom_id, n_tokens));
  REWIND_RETURN_IF_ERROR(check_id(gguf::kTokenizerUnknownTokenId, vocab.unknown_id, n_tokens));
  REWIND_RETURN_IF_ERROR(check_id(gguf::kTokenizerPaddingTokenId, vocab.padding_id, n_tokens));
  REWIND_ASSIGN_OR_RETURN(index, VocabIndex::build(vocab.tokens));
  return Status::ok();
}

void Tokenizer::Impl::find_end_of_generation() {
  const size_t n_tokens = vocab.tokens.size();
  if (vocab.eot_id == kNoToken) {
    for (std::string_view spelling : kEotSpellings) {
      if (const int32_t id = index.find(spelling); id >= 0) {
        vocab.eot_id = id;
        break;
      }
    }
  }
  if (vocab.eom_id == kNoToken) vocab.eom_id = index.find("<|eom_id|>");

  eog.assign(n_tokens, false);
  std::vector<bool> by_spelling(n_tokens, false);
  for (size_t id = 0; id < n_tokens; ++id) {
    const std::string& text = vocab.tokens[id];
    by_spelling[id] = contains(kEogSpellings, text) || contains(kFimEogSpellings, text);
    eog[id] = by_spelling[id];
  }
  for (int32_t id : {vocab.eos_id, vocab.eot_id, vocab.eom_id}) {
    if (id >= 0) eog[static_cast<size_t>(id)] = true;
  }
  // llama.cpp's two exceptions: harmony-style vocabs (<|return|> + <|call|>) end turns with <|end|> but keep
  // generating, and vocabs with <|tool_response> use </s> as ordinary text.
  const int32_t end_id = index.find("<|end|>");
  if (end_id >= 0 && index.find("<|call|>") >= 0 &&
      (index.find("<|return|>") >= 0 || index.find("<|flush|>") >= 0)) {
    eog[static_cast<size_t>(end_id)] = false;
    by_spelling[static_cast<size_t>(end_id)] = false;
    vocab.token_types[static_cast<size_t>(end_id)] = TokenType::user_defined;
  }
  const int32_t s_id = index.find("</s>");
  if (s_id >= 0 && index.find("<|tool_response>") >= 0) {
    eog[static_cast<size_t>(s_id)] = false;
    by_spelling[static_cast<size_t>(s_id)] = false;
    vocab.token_types[static_cast<size_t>(s_id)] = TokenType::normal;
  }
  for (size_t id = 0; id < n_tokens; ++id) {
    if (eog[id]) eog_ids.push_back(static_cast<int32_t>(id));
    // An end-of-turn spelling typed otherwise is a converter bug; llama.cpp makes it a control token, so it is
    // matched only with parse_special and hidden in output.
    if (by_spelling[id]) vocab.token_types[id] = TokenType::control;
  }
}

void Tokenizer::Impl::build_pieces() {
  const size_t n_tokens = vocab.tokens.size();
  pieces.assign(n_tokens, std::string());
  hidden.assign(n_tokens, false);
  std::vector<SpecialKind> kinds(n_tokens, SpecialKind::none);
  for (size_t id = 0; id < n_tokens; ++id) {
    const std::string& text = vocab.tokens[id];
    switch (vocab.token_types[id]) {
      case TokenType::normal:
        pieces[id] = kind == VocabKind::bpe ? byte_decode(text) : unescape_spm(text);
        break;
      case TokenType::byte:
        if (const auto byte = parse_byte_token(text)) {
          pieces[id] = std::string(1, static_cast<char>(*byte));
        } else {
          pieces[id] = kind == VocabKind::bpe ? byte_decode(text) : text;
        }
        break;
      case TokenType::user_defined:
        pieces[id] = text;
        kinds[id] = SpecialKind::always;
        break;
      case TokenType::control:
      case TokenType::unknown:
        pieces[id] = text;
        hidden[id] = true;
        kinds[id] = SpecialKind::parse_special;
        break;
      case TokenType::unused:
      case TokenType::undefined:
        break;  // llama.cpp renders these as nothing
    }
  }
  specials = SpecialTokenMatcher(vocab.tokens, kinds);
}

void Tokenizer::Impl::encode_spm_fragment(std::string_view raw, bool after_special,
                                          std::vector<int32_t>& out) const {
  std::string escaped;
  escaped.reserve(raw.size() + raw.size() / 2 + kSpmSpace.size());
  // llama.cpp prefixes the space to the first fragment and to every fragment that follows a special token.
  if (add_space_prefix && after_special) escaped.append(kSpmSpace);
  for (char c : raw) {
    if (c == ' ') {
      escaped.append(kSpmSpace);
    } else {
      escaped.push_back(c);
    }
  }
  spm.encode(escaped, index, out);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  auto vocab = load_vocab(file);
  if (!vocab.is_ok()) return vocab.status();
  auto tokenizer = from_vocab(std::move(vocab).value());
  if (!tokenizer.is_ok()) return tokenizer.status().with_context(file.path());
  return tokenizer;
}

Result<Tokenizer> Tokenizer::from_vocab(VocabData vocab) {
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(vocab);
  VocabData& v = impl->vocab;
  REWIND_ASSIGN_OR_RETURN(impl->kind, vocab_kind(v.model));
  REWIND_RETURN_IF_ERROR(impl->check_and_index());

  bool add_bos_default = true;  // SentencePiece vocabs start with BOS unless the file says otherwise
  if (impl->kind == VocabKind::bpe) {
    REWIND_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::create(v.pre));
    add_bos_default = pre.add_bos_default();
    impl->bpe = BpeEncoder(v, impl->index, pre.ignore_merges());
    impl->pre.emplace(std::move(pre));
  } else {
    impl->spm = SpmEncoder(v, impl->index);
  }
  impl->add_bos = v.add_bos.value_or(add_bos_default);
  impl->add_space_prefix = impl->kind == VocabKind::spm && v.add_space_prefix.value_or(true);
  if (impl->add_bos && v.bos_id == kNoToken) {
    return Status::errorf("{} is true but {} is not set", gguf::kTokenizerAddBosToken, gguf::kTokenizerBosTokenId);
  }
  impl->find_end_of_generation();
  impl->build_pieces();
  return Tokenizer(std::move(impl));
}

Result<std::vector<int32_t>> Tokenizer::Impl::encode(std::string_view text, bool start_with_bos,
                                                     const PartitionRules& rules) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (start_with_bos) {
    if (vocab.bos_id == kNoToken) return Status::error("encode: BOS requested but the vocab has no BOS token");
    ids.push_back(vocab.bos_id);
  }
  std::vector<Fragment> fragments;
  specials.partition(text, rules, fragments);
  std::vector<TextRange> pre_pieces;
  std::string replaced;
  bool after_special = true;
  for (const Fragment& fragment : fragments) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      after_special = true;
      continue;
    }
    std::string_view raw = text.substr(fragment.begin, fragment.end - fragment.begin);
    if (kind == VocabKind::bpe) {
      if (bpe.replace_unspellable_invalid_bytes(raw, replaced)) raw = replaced;
      pre_pieces.clear();
      REWIND_RETURN_IF_ERROR(pre->split(raw, pre_pieces));
      bpe.encode(raw, pre_pieces, index, ids);
    } else {
      encode_spm_fragment(raw, after_special, ids);
    }
    after_special = false;
  }
  return ids;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  PartitionRules rules;
  rules.parse_special = parse_special;
  return impl_->encode(text, add_bos, rules);
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_bos,
                                               std::span<const TextRange> literal) const {
  PartitionRules rules;
  rules.parse_special = true;
  rules.literal = literal;
  return impl_->encode(text, add_bos, rules);
}

std::vector<SpelledToken> Tokenizer::find_control_spellings(std::string_view text) const {
  PartitionRules rules;
  rules.parse_special = true;
  rules.user_defined = false;
  std::vector<Fragment> fragments;
  impl_->specials.partition(text, rules, fragments);
  std::vector<SpelledToken> spelled;
  for (const Fragment& fragment : fragments) {
    if (fragment.token >= 0) spelled.push_back({fragment.token, {fragment.begin, fragment.end}});
  }
  return spelled;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab()) {
      return Status::errorf("decode: id {} at position {} is outside the vocab [0, {})", ids[i], i, n_vocab());
    }
    out.append(token_to_piece(ids[i], render_special));
  }
  return out;
}

std::string_view Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return {};
  const auto index = static_cast<size_t>(id);
  if (impl_->hidden[index] && !render_special) return {};
  return impl_->pieces[index];
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return {};
  return impl_->vocab.tokens[static_cast<size_t>(id)];
}

int32_t Tokenizer::find_token(std::string_view text) const { return impl_->index.find(text); }

VocabKind Tokenizer::kind() const { return impl_->kind; }
int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->vocab.tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->vocab.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->vocab.eos_id; }
int32_t Tokenizer::eot_id() const { return impl_->vocab.eot_id; }

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->vocab.token_types[static_cast<size_t>(id)] == TokenType::control;
}

bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[static_cast<size_t>(id)];
}

const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog_ids; }
bool Tokenizer::add_bos_default() const { return impl_->add_bos; }
const std::string& Tokenizer::chat_template() const { return impl_->vocab.chat_template; }

}  // namespace rwd::tokenizer
