// PromptCache: checkpoints of the recurrent layers' state after token prefixes, in host memory under a byte
// budget with least-recently-used eviction (the server's --cache-ram). A new request whose prompt leaves a
// slot's tokens further back than the rewind depth reaches (a chat template that re-renders an earlier turn,
// e.g. dropping its thinking text) restores the checkpoint nearest at or before the divergence and computes only
// the tokens after it. A checkpoint holds no KV rows: they are already in any slot whose tokens agree with the
// prefix, which the engine checks before restoring. Token prefixes are kept whole and compared exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rwd::runtime {

class PromptCache {
 public:
  struct Entry {
    std::vector<int32_t> tokens;  // the prefix the state was taken after
    std::vector<float> state;     // ModelState::save_recurrent's block
    uint64_t last_used = 0;
    size_t bytes() const { return tokens.size() * sizeof(int32_t) + state.size() * sizeof(float); }
  };

  explicit PromptCache(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Keeps the state after `tokens`, evicting the least recently used entries to stay in the budget; an entry
  // for the same tokens is replaced. Nothing is kept when the entry alone exceeds the budget.
  void store(std::span<const int32_t> tokens, std::span<const float> state);
  // The entry with the longest prefix of `prompt` of at most max_length tokens (and at least one), or null.
  const Entry* find(std::span<const int32_t> prompt, int64_t max_length) const;
  // Marks an entry found by find() as used now (it is evicted last).
  void touch(const Entry* entry);

  size_t bytes() const { return bytes_; }
  size_t budget_bytes() const { return budget_bytes_; }
  int64_t n_entries() const { return static_cast<int64_t>(entries_.size()); }

 private:
  size_t budget_bytes_;
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace rwd::runtime
