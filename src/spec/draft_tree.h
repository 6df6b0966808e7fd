// Trees grown from a proposer's chain: the chain stays whole and first, and the proposer's next most likely
// tokens at each depth (its runners-up) hang beside the chain's token there as leaves. A proposer that drafts a
// chain one forward per token (MTP, a draft model) has every depth's logits anyway, so such a tree costs it no
// more forwards than the chain; the verify forward pays for the extra tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/verify.h"

namespace rwd::spec {

// The ids of the n largest logits other than `skip`, largest first, ties to the lower id; NaN and -inf never
// count. For a row whose argmax is `skip`, these are its runners-up.
std::vector<int32_t> runners_up(std::span<const float> logits, int32_t skip, int n);

// chain with runners_up[d] (the alternatives at depth d + 1, most likely first) added as leaves, depth d taking
// at most wanted[d] of them, or, with wanted empty, the shallowest depths first (a depth is reached only when
// every chain token before it was right, so its alternatives matter less), while the budget of max_nodes tokens
// lasts; depth-first order.
std::vector<DraftToken> chain_with_runners_up(std::span<const DraftToken> chain,
                                              const std::vector<std::vector<int32_t>>& runners_up, int max_nodes,
                                              std::span<const int> wanted = {});

}  // namespace rwd::spec
