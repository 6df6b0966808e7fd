// PreTokenizer: splits text into the pieces that byte-level BPE then encodes one by one, by the regex rules
// of a tokenizer.ggml.pre family (the same rules, in the same order, as llama.cpp's llama-vocab.cpp). Each
// rule splits every piece left by the previous one into its matches and the text between them. It does not
// byte-encode or merge.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/text_range.h"

namespace rwd::tokenizer {

class PreTokenizer {
 public:
  // The rules for a tokenizer.ggml.pre value ("" means "default", as in llama.cpp); an unsupported name is
  // an error that lists the supported ones.
  static Result<PreTokenizer> create(std::string_view pre_name);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the pieces of `text` to `pieces`, in order; together they cover every byte exactly once. Bytes
  // that are not valid UTF-8 never match a rule, so they end up in the pieces between matches.
  Status split(std::string_view text, std::vector<TextRange>& pieces) const;

  // Family flags that llama.cpp attaches to the name: whether a piece that is itself a vocab token skips the
  // merges, and whether BOS is added when the file does not say.
  bool ignore_merges() const { return ignore_merges_; }
  bool add_bos_default() const { return add_bos_default_; }

 private:
  struct CompiledRegex;
  PreTokenizer() = default;

  std::vector<std::unique_ptr<CompiledRegex>> regexes_;
  bool ignore_merges_ = false;
  bool add_bos_default_ = false;
};

}  // namespace rwd::tokenizer
