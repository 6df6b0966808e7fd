// Parser: tokens to a Program, following jinja2's grammar and operator precedence (ternary < or < and < not
// < comparisons and `in` < + - < ~ < * / // % < ** < unary minus < filters and tests < calls, subscripts,
// attributes). Statements: if/elif/else, for (with else and a filtering if), set (also block set and
// namespace attributes), macro, call, filter, break/continue, HF's generation. Nesting is bounded.
#pragma once

#include <string_view>

#include "tokenizer/jinja/ast.h"

namespace rwd::tokenizer::jinja {

class Parser {
 public:
  // Throws Error naming the position and what was expected.
  static Program parse(std::string_view source);
};

}  // namespace rwd::tokenizer::jinja
