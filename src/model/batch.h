// Batch: the tokens of one forward, from one or several slots. Each slot's tokens are contiguous and at
// consecutive positions that continue the slot's KV rows; want_logits marks the rows whose logits the
// caller needs (the last prompt token, every token of a verify batch).
#pragma once

#include <cstdint>
#include <vector>

namespace rwd::model {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> slots;
  std::vector<uint8_t> want_logits;

  void add(int32_t token, int32_t position, int32_t slot, bool logits) {
    tokens.push_back(token);
    positions.push_back(position);
    slots.push_back(slot);
    want_logits.push_back(logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    positions.clear();
    slots.clear();
    want_logits.clear();
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
