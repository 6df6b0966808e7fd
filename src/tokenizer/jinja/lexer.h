// Lexer: template source to tokens, with jinja2's whitespace rules as HF transformers configures them
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off, `-` and `+` tag modifiers). Text between
// tags becomes one text token; inside tags it splits names, literals and operators. Grammar is parser.h's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/error.h"

namespace rwd::tokenizer::jinja {

enum class TokenKind {
  text,            // template text, already trimmed by whitespace control
  variable_begin,  // {{
  variable_end,    // }}
  block_begin,     // {%
  block_end,       // %}
  name,            // identifiers and keywords (if, and, true, ...)
  string,          // a string literal, escapes resolved
  integer,
  floating,
  op,              // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : | ;
  eof,
};

struct Token {
  TokenKind kind = TokenKind::eof;
  std::string text;  // text, name, string value, number spelling or operator
  SourcePos pos;
};

class Lexer {
 public:
  // Throws Error (with the position) for unterminated tags, comments and strings and unknown characters.
  static std::vector<Token> tokenize(std::string_view source);
};

}  // namespace rwd::tokenizer::jinja
