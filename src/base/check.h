// REWIND_CHECK: for broken internal invariants only (never for bad input, which returns a Status).
// Prints file:line, the condition and a formatted explanation with the values involved, then aborts.
#pragma once

#include <fmt/format.h>

namespace rwd::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const std::string& message);
}  // namespace rwd::detail

#define REWIND_CHECK(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) [[unlikely]] {                                                                   \
      ::rwd::detail::check_failed(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__));      \
    }                                                                                             \
  } while (0)
