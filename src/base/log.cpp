#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace rwd {
namespace {

LogLevel level_from_env() {
  const char* value = std::getenv("REWIND_LOG");
  if (value == nullptr) return LogLevel::warn;
  if (std::strcmp(value, "debug") == 0) return LogLevel::debug;
  if (std::strcmp(value, "info") == 0) return LogLevel::info;
  if (std::strcmp(value, "error") == 0) return LogLevel::error;
  if (std::strcmp(value, "off") == 0) return LogLevel::off;
  return LogLevel::warn;
}

// The one process-wide setting: a log level is configuration of the process, not state of any model.
std::atomic<LogLevel>& level_storage() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

std::mutex& write_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

void set_log_level(LogLevel level) { level_storage().store(level); }
LogLevel log_level() { return level_storage().load(std::memory_order_relaxed); }

void log_write(LogLevel level, std::string_view message) {
  static const char* const names[] = {"debug", "info", "warn", "error", "off"};
  std::lock_guard<std::mutex> lock(write_mutex());
  std::fprintf(stderr, "rewind %s: %.*s\n", names[static_cast<int>(level)], static_cast<int>(message.size()),
               message.data());
}

}  // namespace rwd
