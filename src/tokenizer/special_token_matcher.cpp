// Special-token partitioning: one trie walk from each position records which spelling lengths match there (a
// bit mask), then lengths are taken longest first, positions left to right. Memory is one mask per matching
// position, so a long run of a repeated special character (newlines, spaces) stays cheap.
#include "tokenizer/special_token_matcher.h"

#include <algorithm>

namespace rwd::tokenizer {

SpecialTokenMatcher::SpecialTokenMatcher(const std::vector<std::string>& tokens,
                                         const std::vector<SpecialKind>& kinds)
    : nodes_(1), starts_(256, false) {
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& text = tokens[id];
    if (kinds[id] == SpecialKind::none || text.empty()) continue;
    starts_[static_cast<uint8_t>(text[0])] = true;
    int32_t node = 0;
    for (char c : text) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
      if (inserted) nodes_.emplace_back();
      node = it->second;
    }
    // Spellings are unique in a valid vocab; should two ids share one, the lower id wins.
    if (nodes_[node].token < 0) nodes_[node] = {static_cast<int32_t>(id), kinds[id]};
  }
}

int32_t SpecialTokenMatcher::child(int32_t node, uint8_t byte) const {
  const auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
  return it == edges_.end() ? -1 : it->second;
}

int32_t SpecialTokenMatcher::token_at(std::string_view text, size_t pos, size_t length) const {
  int32_t node = 0;
  for (size_t i = pos; i < pos + length && node >= 0; ++i) node = child(node, static_cast<uint8_t>(text[i]));
  return node >= 0 ? nodes_[node].token : -1;
}

void SpecialTokenMatcher::find_matches(std::string_view text, const PartitionRules& rules,
                                       std::vector<Matches>& matches, std::vector<LongMatch>& long_matches) const {
  size_t next_literal = 0;  // the first literal range that ends after `pos`
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!starts_[static_cast<uint8_t>(text[pos])]) continue;
    while (next_literal < rules.literal.size() && rules.literal[next_literal].end <= pos) ++next_literal;
    // A match [pos, end] overlaps a literal range exactly when it reaches the first one that ends after pos.
    const size_t literal_begin = next_literal < rules.literal.size() ? rules.literal[next_literal].begin : text.size();
    uint64_t short_lengths = 0;
    int32_t node = 0;
    for (size_t end = pos; end < text.size(); ++end) {
      node = child(node, static_cast<uint8_t>(text[end]));
      if (node < 0) break;
      const Node& n = nodes_[node];
      if (n.token < 0) continue;
      const bool wanted = n.kind == SpecialKind::always ? rules.user_defined
                                                        : rules.parse_special && end < literal_begin;
      if (!wanted) continue;
      const size_t length = end + 1 - pos;
      if (length <= 64) {
        short_lengths |= uint64_t{1} << (length - 1);
      } else {
        long_matches.push_back({pos, length});
      }
    }
    if (short_lengths != 0) matches.push_back({pos, short_lengths});
  }
}

void SpecialTokenMatcher::partition(std::string_view text, const PartitionRules& rules,
                                    std::vector<Fragment>& out) const {
  std::vector<Matches> matches;
  std::vector<LongMatch> long_matches;
  if (nodes_.size() > 1) find_matches(text, rules, matches, long_matches);
  if (matches.empty() && long_matches.empty()) {
    if (!text.empty()) out.push_back({-1, 0, text.size()});
    return;
  }
  // Accepted spellings are never shorter than a later candidate, so a candidate overlaps an accepted one
  // exactly when one of its end bytes is already taken: checking the two ends suffices.
  std::vector<bool> taken(text.size(), false);
  std::vector<Fragment> accepted;
  const auto try_accept = [&](size_t pos, size_t length) {
    const size_t last = pos + length - 1;
    if (taken[pos] || taken[last]) return;
    std::fill(taken.begin() + static_cast<std::ptrdiff_t>(pos), taken.begin() + static_cast<std::ptrdiff_t>(last + 1),
              true);
    accepted.push_back({token_at(text, pos, length), pos, pos + length});
  };
  std::sort(long_matches.begin(), long_matches.end(), [](const LongMatch& a, const LongMatch& b) {
    return a.length != b.length ? a.length > b.length : a.pos < b.pos;
  });
  for (const LongMatch& match : long_matches) try_accept(match.pos, match.length);
  uint64_t all_lengths = 0;
  for (const Matches& match : matches) all_lengths |= match.short_lengths;
  for (int bit = 63; bit >= 0; --bit) {
    if ((all_lengths >> bit & 1) == 0) continue;
    for (const Matches& match : matches) {
      if (match.short_lengths >> bit & 1) try_accept(match.pos, static_cast<size_t>(bit) + 1);
    }
  }
  std::sort(accepted.begin(), accepted.end(), [](const Fragment& a, const Fragment& b) { return a.begin < b.begin; });
  size_t cursor = 0;
  for (const Fragment& fragment : accepted) {
    if (fragment.begin > cursor) out.push_back({-1, cursor, fragment.begin});
    out.push_back(fragment);
    cursor = fragment.end;
  }
  if (cursor < text.size()) out.push_back({-1, cursor, text.size()});
}

}  // namespace rwd::tokenizer
