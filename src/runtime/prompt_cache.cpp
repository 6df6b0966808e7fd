#include "runtime/prompt_cache.h"

#include <algorithm>

namespace rwd::runtime {

void PromptCache::store(std::span<const int32_t> tokens, std::span<const float> state) {
  const size_t needed = tokens.size() * sizeof(int32_t) + state.size() * sizeof(float);
  if (tokens.empty() || needed > budget_bytes_) return;
  const auto same = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& entry) {
    return std::ranges::equal(entry.tokens, tokens);
  });
  if (same != entries_.end()) {
    bytes_ -= same->bytes();
    entries_.erase(same);
  }
  while (bytes_ + needed > budget_bytes_) {
    const auto oldest = std::min_element(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.last_used < b.last_used;
    });
    bytes_ -= oldest->bytes();
    entries_.erase(oldest);
  }
  entries_.push_back({{tokens.begin(), tokens.end()}, {state.begin(), state.end()}, ++clock_});
  bytes_ += needed;
}

const PromptCache::Entry* PromptCache::find(std::span<const int32_t> prompt, int64_t max_length) const {
  const Entry* best = nullptr;
  for (const Entry& entry : entries_) {
    const auto length = static_cast<int64_t>(entry.tokens.size());
    if (length > max_length || length > static_cast<int64_t>(prompt.size())) continue;
    if (best != nullptr && length <= static_cast<int64_t>(best->tokens.size())) continue;
    if (std::equal(entry.tokens.begin(), entry.tokens.end(), prompt.begin())) best = &entry;
  }
  return best;
}

void PromptCache::touch(const Entry* entry) {
  for (Entry& candidate : entries_) {
    if (&candidate == entry) candidate.last_used = ++clock_;
  }
}

}  // namespace rwd::runtime
