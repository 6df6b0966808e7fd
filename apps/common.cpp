#include <cstdio>

#include "commands.h"

namespace rwd::apps {

int report_error(const std::string& message) {
  std::fprintf(stderr, "rewind: %s\n", message.c_str());
  return 1;
}

}  // namespace rwd::apps
