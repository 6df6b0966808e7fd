#include "spec/oracle.h"

namespace rwd::spec {
namespace {

// splitmix64: a well-mixed hash of (seed, position) without carrying generator state between rounds.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Status OracleProposer::propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposeRequest& request = requests[r];
    const int64_t next = static_cast<int64_t>(request.tokens.size()) - request.n_prompt;  // continuation index
    for (int64_t i = 0; i < request.max_draft; ++i) {
      const int64_t at = next + i;
      if (at < 0 || at >= static_cast<int64_t>(request.oracle.size())) break;
      int32_t id = request.oracle[at];
      const uint64_t hash = mix(seed_ ^ mix(static_cast<uint64_t>(at)));
      if (static_cast<double>(hash >> 11) * 0x1.0p-53 < error_rate_ && n_vocab_ > 1) {
        id = static_cast<int32_t>((id + 1 + static_cast<int64_t>(mix(hash) % static_cast<uint64_t>(n_vocab_ - 1))) %
                                  n_vocab_);
      }
      drafts[r].push_back({id, {}});
    }
  }
  return Status::ok();
}

}  // namespace rwd::spec
