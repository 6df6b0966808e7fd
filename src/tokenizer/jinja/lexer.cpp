// Lexer: jinja2's lexing rules, including the whitespace control that decides byte-exact output:
// `{%-`/`-%}` strip all whitespace on that side; trim_blocks drops the newline after a block or comment tag;
// lstrip_blocks drops spaces and tabs between a line start and a block or comment tag.
#include "tokenizer/jinja/lexer.h"

#include <cctype>
#include <cstdint>

namespace rwd::tokenizer::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// What jinja2 does first: every newline style becomes "\n", and one trailing newline goes.
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(uint32_t code, std::string& out) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

class Scanner {
 public:
  explicit Scanner(std::string source) : source_(std::move(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;  // the previous tag's text ended with a newline (or we are at the start)
    while (at_ < source_.size()) {
      const size_t open = find_tag_open(at_);
      std::string text = source_.substr(at_, (open == std::string::npos ? source_.size() : open) - at_);
      const SourcePos text_pos = pos();
      if (open == std::string::npos) {
        emit_text(std::move(text), text_pos);
        advance_to(source_.size());
        break;
      }
      const char kind = source_[open + 1];  // '{', '%' or '#'
      const char modifier = open + 2 < source_.size() ? source_[open + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (modifier != '+' && kind != '{') {
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line_start > 0 || line_starting) {
          bool blank = true;
          for (size_t i = line_start; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(line_start);
        }
      }
      emit_text(std::move(text), text_pos);
      advance_to(open);
      const SourcePos tag_pos = pos();
      advance_to(open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0));
      if (kind == '#') {
        line_starting = skip_comment(tag_pos);
      } else {
        line_starting = lex_tag(kind, tag_pos);
      }
    }
    tokens_.push_back({TokenKind::eof, "", pos()});
    return std::move(tokens_);
  }

 private:
  SourcePos pos() const { return {line_, column_}; }

  void advance_to(size_t target) {
    for (; at_ < target; ++at_) {
      if (source_[at_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
    }
  }

  size_t find_tag_open(size_t from) const {
    for (size_t i = source_.find('{', from); i != std::string::npos; i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void emit_text(std::string text, SourcePos text_pos) {
    if (!text.empty()) tokens_.push_back({TokenKind::text, std::move(text), text_pos});
  }

  // After a tag's closing delimiter: `-` strips all following whitespace; trim_blocks (block and comment
  // tags) one newline. Returns whether the consumed text ended with a newline.
  bool after_tag_end(bool strip, bool trim_newline) {
    size_t end = at_;
    if (strip) {
      while (end < source_.size() && is_space(source_[end])) ++end;
    } else if (trim_newline && end < source_.size() && source_[end] == '\n') {
      ++end;
    }
    const bool ends_line = end > at_ && source_[end - 1] == '\n';
    advance_to(end);
    return ends_line;
  }

  bool skip_comment(SourcePos tag_pos) {
    const size_t close = source_.find("#}", at_);
    if (close == std::string::npos) fail_at(tag_pos, "unterminated comment: '{{#' without '#}}'");
    const bool strip = close > at_ && source_[close - 1] == '-';
    const bool keep = close > at_ && source_[close - 1] == '+';
    advance_to(close + 2);
    return after_tag_end(strip, !keep);
  }

  // Lexes a {{ }} or {% %} tag's contents; `at_` is just after the opening delimiter and its modifier.
  bool lex_tag(char kind, SourcePos tag_pos) {
    const bool is_block = kind == '%';
    const char close_char = is_block ? '%' : '}';
    tokens_.push_back({is_block ? TokenKind::block_begin : TokenKind::variable_begin, "", tag_pos});
    const size_t first_token = tokens_.size();
    int depth = 0;  // open ( [ { inside the tag: a `}}` there closes a dict literal, not the tag
    while (true) {
      while (at_ < source_.size() && is_space(source_[at_])) advance_to(at_ + 1);
      if (at_ >= source_.size()) {
        fail_at(tag_pos, "unterminated tag: '{}' without '{}'", is_block ? "{%" : "{{", is_block ? "%}" : "}}");
      }
      const char c = source_[at_];
      if (depth == 0 && (c == '-' || c == '+') && at_ + 2 < source_.size() && source_[at_ + 1] == close_char &&
          source_[at_ + 2] == '}') {
        tokens_.push_back({is_block ? TokenKind::block_end : TokenKind::variable_end, "", pos()});
        advance_to(at_ + 3);
        return finish_tag(first_token, is_block, c == '-', c == '+');
      }
      if (depth == 0 && c == close_char && at_ + 1 < source_.size() && source_[at_ + 1] == '}') {
        tokens_.push_back({is_block ? TokenKind::block_end : TokenKind::variable_end, "", pos()});
        advance_to(at_ + 2);
        return finish_tag(first_token, is_block, false, false);
      }
      lex_token(depth);
    }
  }

  bool finish_tag(size_t first_token, bool is_block, bool strip, bool keep) {
    const bool ends_line = after_tag_end(strip, is_block && !keep);
    // {% raw %}: everything up to {% endraw %} is text.
    if (is_block && tokens_.size() == first_token + 2 && tokens_[first_token].kind == TokenKind::name &&
        tokens_[first_token].text == "raw") {
      const SourcePos raw_pos = tokens_[first_token - 1].pos;
      tokens_.resize(first_token - 1);
      return lex_raw(raw_pos);
    }
    return ends_line;
  }

  bool lex_raw(SourcePos raw_pos) {
    for (size_t open = source_.find("{%", at_); open != std::string::npos; open = source_.find("{%", open + 2)) {
      size_t i = open + 2;
      const bool strip_before = i < source_.size() && source_[i] == '-';
      if (i < source_.size() && (source_[i] == '-' || source_[i] == '+')) ++i;
      while (i < source_.size() && is_space(source_[i])) ++i;
      if (source_.compare(i, 6, "endraw") != 0) continue;
      i += 6;
      while (i < source_.size() && is_space(source_[i])) ++i;
      const bool strip_after = i < source_.size() && source_[i] == '-';
      if (i < source_.size() && (source_[i] == '-' || source_[i] == '+')) ++i;
      if (source_.compare(i, 2, "%}") != 0) continue;
      std::string text = source_.substr(at_, open - at_);
      if (strip_before) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(std::move(text), pos());
      advance_to(i + 2);
      return after_tag_end(strip_after, true);
    }
    fail_at(raw_pos, "unterminated raw block: '{{% raw %}}' without '{{% endraw %}}'");
  }

  void lex_token(int& depth) {
    const SourcePos token_pos = pos();
    const char c = source_[at_];
    if (is_name_start(c)) {
      size_t end = at_ + 1;
      while (end < source_.size() && is_name_char(source_[end])) ++end;
      tokens_.push_back({TokenKind::name, source_.substr(at_, end - at_), token_pos});
      advance_to(end);
      return;
    }
    if (is_digit(c)) {
      lex_number(token_pos);
      return;
    }
    if (c == '\'' || c == '"') {
      lex_string(token_pos);
      return;
    }
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwoChar) {
      if (source_.compare(at_, 2, op) == 0) {
        tokens_.push_back({TokenKind::op, std::string(op), token_pos});
        advance_to(at_ + 2);
        return;
      }
    }
    static constexpr std::string_view kOneChar = "+-*/%~=()[]{},.:|;<>";
    if (kOneChar.find(c) == std::string_view::npos) fail_at(token_pos, "unexpected character '{}' in tag", c);
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) fail_at(token_pos, "unexpected '{}'", c);
      --depth;
    }
    tokens_.push_back({TokenKind::op, std::string(1, c), token_pos});
    advance_to(at_ + 1);
  }

  void lex_number(SourcePos token_pos) {
    size_t end = at_;
    const auto digits = [&] {
      while (end < source_.size() && (is_digit(source_[end]) || source_[end] == '_')) ++end;
    };
    digits();
    bool is_float = false;
    if (end + 1 < source_.size() && source_[end] == '.' && is_digit(source_[end + 1])) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
      size_t exponent = end + 1;
      if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-')) ++exponent;
      if (exponent < source_.size() && is_digit(source_[exponent])) {
        is_float = true;
        end = exponent;
        digits();
      }
    }
    std::string spelling;
    for (size_t i = at_; i < end; ++i) {
      if (source_[i] != '_') spelling += source_[i];
    }
    tokens_.push_back({is_float ? TokenKind::floating : TokenKind::integer, spelling, token_pos});
    advance_to(end);
  }

  // Python's unicode-escape rules, which jinja2 applies to literals; unknown escapes stay as written.
  void lex_string(SourcePos token_pos) {
    const char quote = source_[at_];
    std::string value;
    size_t i = at_ + 1;
    while (true) {
      if (i >= source_.size()) fail_at(token_pos, "unterminated string literal");
      const char c = source_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= source_.size()) {
        value += c;
        ++i;
        continue;
      }
      const char escaped = source_[i + 1];
      i += 2;
      switch (escaped) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\n': break;  // a backslash-newline continues the line
        case 'x':
        case 'u':
        case 'U': {
          const size_t n_digits = escaped == 'x' ? 2 : escaped == 'u' ? 4 : 8;
          if (i + n_digits > source_.size()) fail_at(token_pos, "truncated \\{} escape in string literal", escaped);
          uint32_t code = 0;
          for (size_t k = 0; k < n_digits; ++k) {
            const char h = source_[i + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
              fail_at(token_pos, "truncated \\{} escape in string literal", escaped);
            }
            code = code * 16 + static_cast<uint32_t>(is_digit(h) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          i += n_digits;
          append_utf8(code, value);
          break;
        }
        default:
          if (escaped >= '0' && escaped <= '7') {
            uint32_t code = static_cast<uint32_t>(escaped - '0');
            for (int k = 0; k < 2 && i < source_.size() && source_[i] >= '0' && source_[i] <= '7'; ++k, ++i) {
              code = code * 8 + static_cast<uint32_t>(source_[i] - '0');
            }
            append_utf8(code, value);
          } else {
            value += '\\';
            value += escaped;
          }
      }
    }
    tokens_.push_back({TokenKind::string, std::move(value), token_pos});
    advance_to(i + 1);
  }

  std::string source_;
  size_t at_ = 0;
  int line_ = 1;
  int column_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Lexer::tokenize(std::string_view source) { return Scanner(normalize_source(source)).run(); }

}  // namespace rwd::tokenizer::jinja
