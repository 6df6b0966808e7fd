// Runs the rewind binary (or any shell command) from a test and captures what it printed, for the tests that
// check the command line end to end.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace rwd::test {

struct CommandResult {
  int status = -1;  // exit status; 128 + signal when killed
  std::string out;
};

// Captures stdout and stderr together, or stdout alone (stderr discarded) when `stdout_only`.
inline CommandResult run_command(const std::string& command, bool stdout_only = false) {
  CommandResult result;
  FILE* pipe = ::popen((command + (stdout_only ? " 2>/dev/null" : " 2>&1")).c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int raw = ::pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return result;
}

}  // namespace rwd::test
