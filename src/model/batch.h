// Batch: the tokens of one forward, from one or several slots. Each slot's tokens are contiguous and at
// consecutive positions that continue the slot's KV rows; want_logits marks the rows whose logits the
// caller needs (the last prompt token, every token of a verify batch).
//
// A tree batch (tree speculation) gives each row a parent: the row it follows in its sequence, or -1 for the
// first row of a slot's run. A slot's rows are then a token tree in depth-first order (every row after its
// parent, each subtree's rows together), each row one position past its parent; row r of a slot's run has the
// KV row (first position of the run) + r, which is its position only along a chain.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace rwd::model {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> slots;
  std::vector<uint8_t> want_logits;
  // Empty for a batch of chains; else one per row (batch row indices).
  std::vector<int32_t> parents;

  void add(int32_t token, int32_t position, int32_t slot, bool logits) {
    if (!parents.empty()) parents.push_back(!slots.empty() && slots.back() == slot ? static_cast<int32_t>(size() - 1) : -1);
    tokens.push_back(token);
    positions.push_back(position);
    slots.push_back(slot);
    want_logits.push_back(logits ? 1 : 0);
  }
  // A row of `slot` after batch row `parent` (-1: the slot's first row), at one position past it.
  void add_node(int32_t token, int32_t position, int32_t slot, bool logits, int32_t parent) {
    if (parents.empty()) {
      // The chains so far, written in place: the vector keeps its capacity from earlier tree batches.
      parents.resize(static_cast<size_t>(size()));
      for (int64_t i = 0; i < size(); ++i) parents[i] = i > 0 && slots[i - 1] == slots[i] ? static_cast<int32_t>(i - 1) : -1;
    }
    parents.push_back(parent);
    tokens.push_back(token);
    positions.push_back(position);
    slots.push_back(slot);
    want_logits.push_back(logits ? 1 : 0);
  }
  bool is_tree() const { return !parents.empty(); }
  // Row i's parent: as given in a tree batch, else the row before it in the slot's run (or -1).
  int32_t parent(int64_t i) const {
    if (!parents.empty()) return parents[i];
    return i > 0 && slots[i - 1] == slots[i] ? static_cast<int32_t>(i - 1) : -1;
  }
  void clear() {
    tokens.clear();
    positions.clear();
    slots.clear();
    want_logits.clear();
    parents.clear();
  }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  int64_t n_logit_rows() const {
    int64_t n = 0;
    for (uint8_t want : want_logits) n += want;
    return n;
  }
};

// A run of the batch's tokens that belong to one slot: rows [begin, end).
struct SlotSpan {
  int32_t slot;
  int64_t begin;
  int64_t end;
};

}  // namespace rwd::model
