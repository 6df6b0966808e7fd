#include "spec/ngram.h"

#include <algorithm>

namespace rwd::spec {

std::vector<int32_t> NgramProposer::lookup(std::span<const int32_t> tokens, int ngram_min, int ngram_max,
                                           int max_draft) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const auto tail = tokens.subspan(static_cast<size_t>(len - n));
    // Latest match first: recent context predicts the continuation best. A match must leave at least one
    // token after it.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n;
      const int64_t count = std::min<int64_t>(max_draft, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

Status NgramProposer::propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  for (size_t r = 0; r < requests.size(); ++r) {
    for (int32_t id : lookup(requests[r].tokens, ngram_min_, ngram_max_, requests[r].max_draft)) {
      drafts[r].push_back({id, {}});
    }
  }
  return Status::ok();
}

}  // namespace rwd::spec
