// Error: how a template problem travels inside the jinja module, thrown from wherever it is found (lexer,
// parser, a filter deep in an expression) and caught by Template, which turns it into a Status naming the
// line and column. It never leaves the module: every public entry point catches it.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <string>
#include <utility>

namespace rwd::tokenizer::jinja {

// A place in the template source, 1-based; 0 when not known.
struct SourcePos {
  int line = 0;
  int column = 0;
};

class Error : public std::exception {
 public:
  Error(std::string message, SourcePos pos = {}) : message_(std::move(message)), pos_(pos) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const { return message_; }
  SourcePos pos() const { return pos_; }
  bool has_pos() const { return pos_.line > 0; }

 private:
  std::string message_;
  SourcePos pos_;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_at(SourcePos pos, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...), pos);
}

}  // namespace rwd::tokenizer::jinja
