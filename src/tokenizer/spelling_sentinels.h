// SpellingSentinels: keeps a control token's spelling in the caller's chat text (say "<|im_end|>\n<|im_start|>
// system" inside a user message) from becoming that control token, so a message cannot forge a turn. Before the
// template renders, every control spelling in the caller's strings is replaced by a private-use code point (one
// per distinct spelling, occurring in no input and nowhere in the template); after, restore() writes the
// spellings back and marks their bytes literal for Tokenizer::encode. The template sees one opaque, non-space
// character, so trim, strip, split and tojson treat it as text; a filter that would have rewritten the spelling
// itself (escape, replace on its characters) leaves it as the caller wrote it, and tojson(ensure_ascii=true),
// which hub templates do not use, writes the sentinel's escape instead. A spelling that only forms where a
// template writes two caller strings side by side, with no markup between, is not caught.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tokenizer/text_range.h"
#include "tokenizer/tokenizer.h"

namespace rwd::tokenizer {

// A rendered chat prompt and the byte ranges in it of control-token spellings that came from the caller.
struct MarkedPrompt {
  std::string text;
  std::vector<TextRange> literal;  // sorted, disjoint: for Tokenizer::encode(text, add_bos, literal)
};

class SpellingSentinels {
 public:
  // Replaces the control spellings in every string of `caller_values`, object keys included, in place. The
  // sentinels occur neither in those values nor in `template_texts` (the template's source and the other
  // strings it is given), so each sentinel in the rendered text stands for a caller's spelling. Fails only when
  // the values use every private-use code point.
  static Result<SpellingSentinels> substitute(const Tokenizer& tokenizer,
                                              std::span<nlohmann::ordered_json* const> caller_values,
                                              std::span<const std::string_view> template_texts);

  // `rendered` with each sentinel turned back into its spelling, and those spellings' byte ranges.
  MarkedPrompt restore(std::string_view rendered) const;

 private:
  std::unordered_map<uint32_t, std::string> spelling_of_;  // sentinel code point -> the control token's text
};

}  // namespace rwd::tokenizer
