// PromptCache: what earlier requests computed, kept in host memory under a byte budget with least-recently-used
// eviction (the server's --cache-ram), so that a prompt sharing a prefix with them computes only the rest.
// Two kinds of entry, both keyed by their exact token prefix:
// - checkpoints of the recurrent layers' state, taken at the end of each prompt and every N tokens: a prompt
//   that leaves a slot's tokens further back than the rewind depth reaches (a chat template that re-renders an
//   earlier turn) restores the nearest one at or before the divergence;
// - archives of a slot's whole sequence (KV rows and recurrent state), taken when a request takes the slot over:
//   a conversation whose slot went to another conversation resumes in any slot. An archive supersedes the KV of
//   the archives of its own prefixes (the same conversation, earlier), which keep only their recurrent state.
// The engine pairs a checkpoint's state with KV rows of its prefix, from the slot itself or from an archive.
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
    std::vector<float> state;     // ModelState::save_recurrent's block; empty without recurrent layers
    std::vector<uint8_t> kv;      // KvCache::save_prefix's block of all the tokens; empty for a checkpoint
    uint64_t last_used = 0;
    size_t bytes() const { return tokens.size() * sizeof(int32_t) + state.size() * sizeof(float) + kv.size(); }
  };

  explicit PromptCache(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Keeps `entry` (its last_used is set), evicting the least recently used entries to stay in the budget. An
  // entry for the same tokens is merged into it; nothing is kept when the entry alone exceeds the budget.
  void store(Entry entry);
  // What the cache holds for one prompt, found once and then weighed for every slot.
  struct Matches {
    const Entry* archive = nullptr;  // the entry with KV rows agreeing with the prompt on the most leading tokens
    int64_t n_archived = 0;          // how many (0: no archive)
    std::vector<const Entry*> states;  // entries with recurrent state whose tokens are a prefix of the prompt

    // The longest of `states` of at most max_length tokens, or null.
    const Entry* state_within(int64_t max_length) const;
  };
  Matches match(std::span<const int32_t> prompt) const;
  // Marks an entry found by match() as used now (it is evicted last).
  void touch(const Entry* entry);

  size_t bytes() const { return bytes_; }
  size_t budget_bytes() const { return budget_bytes_; }
  int64_t n_entries() const { return static_cast<int64_t>(entries_.size()); }

 private:
  void erase(size_t index);

  size_t budget_bytes_;
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace rwd::runtime
