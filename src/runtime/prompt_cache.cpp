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

PromptCache::Matches PromptCache::match(std::span<const int32_t> prompt) const {
  Matches matches;
  for (const Entry& entry : entries_) {
    if (!entry.state.empty() && is_prefix(entry.tokens, prompt)) matches.states.push_back(&entry);
    if (entry.kv.empty()) continue;
    const size_t n = std::min(entry.tokens.size(), prompt.size());
    const auto common = std::mismatch(entry.tokens.begin(), entry.tokens.begin() + static_cast<std::ptrdiff_t>(n),
                                      prompt.begin()).first - entry.tokens.begin();
    if (common > matches.n_archived) {
      matches.n_archived = common;
      matches.archive = &entry;
    }
  }
  return matches;
}

const PromptCache::Entry* PromptCache::Matches::state_within(int64_t max_length) const {
  const Entry* best = nullptr;
  for (const Entry* entry : states) {
    const auto length = static_cast<int64_t>(entry->tokens.size());
    if (length <= max_length && (best == nullptr || length > static_cast<int64_t>(best->tokens.size()))) best = entry;
  }
  return best;
}

void PromptCache::touch(const Entry* entry) {
  for (Entry& candidate : entries_) {
    if (&candidate == entry) candidate.last_used = ++clock_;
  }
}

}  // namespace rwd::runtime
