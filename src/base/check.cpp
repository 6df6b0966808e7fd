#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace rwd::detail {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "rewind: internal check failed at %s:%d: %s: %s\n", file, line, condition, message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace rwd::detail
