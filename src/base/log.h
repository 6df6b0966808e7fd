// Logging to stderr with a level chosen once per process (REWIND_LOG=debug|info|warn|error or set_log_level).
// stdout belongs to the program's output (text, JSON), so nothing here writes to it.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace rwd {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) {
  if (log_level() <= LogLevel::debug) log_write(LogLevel::debug, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  if (log_level() <= LogLevel::info) log_write(LogLevel::info, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
  if (log_level() <= LogLevel::warn) log_write(LogLevel::warn, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> format, Args&&... args) {
  if (log_level() <= LogLevel::error) log_write(LogLevel::error, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace rwd
