#include "runtime/prompt_cache.h"

#include <algorithm>

namespace rwd::runtime {
namespace {

bool is_prefix(std::span<const int32_t> prefix, std::span<const int32_t> of) {
  return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

}  // namespace

void PromptCache::erase(size_t index) {
  bytes_ -= entries_[index].bytes();
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
}

void PromptCache::store(Entry entry) {
  if (entry.tokens.empty()) return;
  for (size_t i = 0; i < entries_.size();) {
    Entry& other = entries_[i];
    if (other.tokens == entry.tokens) {
      if (entry.state.empty()) entry.state = std::move(other.state);
      if (entry.kv.empty()) entry.kv = std::move(other.kv);
      erase(i);
      continue;
    }
    // The new archive holds these KV rows too.
    if (!entry.kv.empty() && !other.kv.empty() && is_prefix(other.tokens, entry.tokens)) {
      bytes_ -= other.kv.size();
      other.kv = {};
      if (other.state.empty()) {
        erase(i);
        continue;
      }
    }
    ++i;
  }
  const size_t needed = entry.bytes();
  if (needed > budget_bytes_) return;
  while (bytes_ + needed > budget_bytes_) {
    const auto oldest = std::min_element(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.last_used < b.last_used;
    });
    erase(static_cast<size_t>(oldest - entries_.begin()));
  }
  entry.last_used = ++clock_;
  bytes_ += needed;
  entries_.push_back(std::move(entry));
}

const PromptCache::Entry* PromptCache::find_state(std::span<const int32_t> prompt, int64_t max_length) const {
  const Entry* best = nullptr;
  for (const Entry& entry : entries_) {
    const auto length = static_cast<int64_t>(entry.tokens.size());
    if (entry.state.empty() || length > max_length) continue;
    if (best != nullptr && length <= static_cast<int64_t>(best->tokens.size())) continue;
    if (is_prefix(entry.tokens, prompt)) best = &entry;
  }
  return best;
}

const PromptCache::Entry* PromptCache::find_kv(std::span<const int32_t> prompt, int64_t& n_common) const {
  const Entry* best = nullptr;
  n_common = 0;
  for (const Entry& entry : entries_) {
    if (entry.kv.empty()) continue;
    const size_t n = std::min(entry.tokens.size(), prompt.size());
    const auto common = std::mismatch(entry.tokens.begin(), entry.tokens.begin() + static_cast<std::ptrdiff_t>(n),
                                      prompt.begin()).first - entry.tokens.begin();
    if (common > n_common) {
      n_common = common;
      best = &entry;
    }
  }
  return best;
}

void PromptCache::touch(const Entry* entry) {
  for (Entry& candidate : entries_) {
    if (&candidate == entry) candidate.last_used = ++clock_;
  }
}

}  // namespace rwd::runtime
