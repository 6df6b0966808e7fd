// Tokenizer: text <-> token ids for a GGUF vocab -- byte-level BPE ("gpt2") with the pre-tokenizer rules of
// its family, or SentencePiece ("llama") -- plus special tokens, BOS, the end-of-generation set and decoding
// to bytes. Ids match llama.cpp's for the same file (tested against llama-tokenize on SmolLM2 and Gemma 3).
// Const methods keep no mutable state, so one Tokenizer serves many threads. Chat formatting is
// chat_template.h's; streaming output that must stay valid UTF-8 is stream_decoder.h's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/text_range.h"
#include "tokenizer/vocab_data.h"

namespace rwd::gguf {
class GgufFile;
}

namespace rwd::tokenizer {

enum class VocabKind {
  bpe,  // tokenizer.ggml.model "gpt2"
  spm,  // tokenizer.ggml.model "llama"
};

// A token spelled out in some text: text[range] is token_text(token).
struct SpelledToken {
  int32_t token = -1;
  TextRange range;
};

class Tokenizer {
 public:
  static Result<Tokenizer> from_gguf(const gguf::GgufFile& file);
  // Checks the vocab (counts, ids in range, unique spellings, supported model and pre-tokenizer).
  static Result<Tokenizer> from_vocab(VocabData vocab);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text to ids. `add_bos`: start with the BOS token (an error when the vocab has none); pass
  // add_bos_default() for what the model expects. `parse_special`: a control token's spelling in the text
  // (e.g. "<|im_end|>") becomes that token instead of ordinary text; user-defined tokens are matched either
  // way. Any bytes are accepted: invalid UTF-8 is encoded byte by byte (SPM: with <0xXX> tokens), so decode
  // restores the input exactly whenever the vocab can spell every byte of it. Where it cannot, rewind does
  // what llama.cpp does: such a byte in valid UTF-8 is dropped, and in invalid UTF-8 becomes U+FFFD.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // encode with parse_special on, except that `literal` (sorted, disjoint byte ranges of `text`) is ordinary
  // text: no control token that overlaps a literal range is matched. Text is still cut only at the special
  // tokens matched, so a literal range is tokenized together with its neighbours, as parse_special=false would
  // tokenize that stretch; without a control spelling in it, a range changes nothing. Chat prompts mark the
  // caller's text so (spelling_sentinels.h).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_bos, std::span<const TextRange> literal) const;

  // The control and unknown tokens spelled in `text`, cut as encode(parse_special=true) would cut them if the
  // vocab had no user-defined tokens: every occurrence of such a spelling is one of these or overlaps one.
  // User-defined tokens are left out: encode matches them with or without parse_special, so they are vocabulary,
  // not markup.
  std::vector<SpelledToken> find_control_spellings(std::string_view text) const;

  // Ids to bytes: the concatenated pieces. Control and unknown tokens contribute their spelling only when
  // `render_special`. An id outside [0, n_vocab()) is an error naming its position and value.
  Result<std::string> decode(std::span<const int32_t> ids, bool render_special = false) const;

  // The bytes of one token (may be part of a UTF-8 character); empty for an id out of range, for unused
  // tokens, and for control/unknown tokens unless `render_special`.
  std::string_view token_to_piece(int32_t id, bool render_special = false) const;

  // The vocab's own spelling of `id` (empty when out of range), and the id spelled exactly `text` or kNoToken.
  std::string_view token_text(int32_t id) const;
  int32_t find_token(std::string_view text) const;

  VocabKind kind() const;
  int32_t n_vocab() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t eot_id() const;  // end of turn (<|im_end|>, <end_of_turn>, ...) or kNoToken
  // Whether `id` is a control token (tokenizer.ggml.token_type 3: chat-template markers, BOS/EOS and the like).
  bool is_control(int32_t id) const;
  // End of generation: eos, eot, eom and the end-of-turn spellings llama.cpp recognises.
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;
  bool add_bos_default() const;
  const std::string& chat_template() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rwd::tokenizer
