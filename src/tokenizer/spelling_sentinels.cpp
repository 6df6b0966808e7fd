// SpellingSentinels: one walk over the caller's strings to see which private-use code points they already use,
// a second to replace control spellings by free ones, and a scan of the rendered text to put them back.
#include "tokenizer/spelling_sentinels.h"

#include <array>
#include <functional>
#include <unordered_set>
#include <utility>

#include "tokenizer/utf8.h"

namespace rwd::tokenizer {
namespace {

struct CodePointRange {
  uint32_t first;
  uint32_t last;
};

// Where sentinels come from, in order: the supplementary private-use planes, which text almost never uses, then
// the BMP's private-use area.
constexpr std::array<CodePointRange, 3> kPrivateUse = {{{0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD}, {0xE000, 0xF8FF}}};

bool is_private_use(uint32_t code_point) {
  for (const CodePointRange& range : kPrivateUse) {
    if (code_point >= range.first && code_point <= range.last) return true;
  }
  return false;
}

// Calls `visit` on every string in `root`, object keys included (an object is rebuilt with the keys as `visit`
// leaves them). Iterative, so JSON nested too deep for the template (which refuses it) cannot exhaust the stack
// here first.
void visit_strings(nlohmann::ordered_json& root, const std::function<void(std::string&)>& visit) {
  std::vector<nlohmann::ordered_json*> pending = {&root};
  while (!pending.empty()) {
    nlohmann::ordered_json* value = pending.back();
    pending.pop_back();
    if (value->is_string()) {
      visit(value->get_ref<std::string&>());
    } else if (value->is_array()) {
      for (nlohmann::ordered_json& element : *value) pending.push_back(&element);
    } else if (value->is_object()) {
      auto& object = value->get_ref<nlohmann::ordered_json::object_t&>();
      // Keys are const inside the map; emplace_back (not the map's emplace, which searches for duplicates)
      // keeps this linear. Substitution is injective, so no two keys become one.
      nlohmann::ordered_json::object_t rebuilt;
      rebuilt.reserve(object.size());
      for (auto& [key, element] : object) {
        std::string new_key = key;
        visit(new_key);
        rebuilt.emplace_back(std::move(new_key), std::move(element));
      }
      object = std::move(rebuilt);
      for (auto& entry : object) pending.push_back(&entry.second);
    }
  }
}

void add_private_use_code_points(std::string_view text, std::unordered_set<uint32_t>& used) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = utf8_valid_length(text, pos);
    if (length >= 3) {
      const uint32_t code_point = decode_utf8(text, pos, length);
      if (is_private_use(code_point)) used.insert(code_point);
    }
    pos += length == 0 ? 1 : length;
  }
}

// Hands out the private-use code points that are not in `used`, in kPrivateUse order.
class FreeCodePoints {
 public:
  explicit FreeCodePoints(const std::unordered_set<uint32_t>& used) : used_(used) {}

  Result<uint32_t> next() {
    for (; range_ < kPrivateUse.size(); ++range_, offset_ = 0) {
      const CodePointRange& range = kPrivateUse[range_];
      while (range.first + offset_ <= range.last) {
        const uint32_t code_point = range.first + offset_++;
        if (!used_.contains(code_point)) return code_point;
      }
    }
    return Status::error("chat messages use every private-use code point; none is left to mark control-token "
                         "spellings in them as text");
  }

 private:
  const std::unordered_set<uint32_t>& used_;
  size_t range_ = 0;
  uint32_t offset_ = 0;
};

}  // namespace

Result<SpellingSentinels> SpellingSentinels::substitute(const Tokenizer& tokenizer,
                                                        std::span<nlohmann::ordered_json* const> caller_values,
                                                        std::span<const std::string_view> template_texts) {
  std::unordered_set<uint32_t> used;
  for (std::string_view text : template_texts) add_private_use_code_points(text, used);
  for (nlohmann::ordered_json* value : caller_values) {
    visit_strings(*value, [&used](std::string& text) { add_private_use_code_points(text, used); });
  }

  SpellingSentinels sentinels;
  FreeCodePoints free_code_points(used);
  std::unordered_map<int32_t, std::string> sentinel_of;  // control token -> its sentinel's UTF-8
  Status status;
  const auto replace_spellings = [&](std::string& text) {
    if (!status) return;
    const std::vector<SpelledToken> spelled = tokenizer.find_control_spellings(text);
    if (spelled.empty()) return;
    std::string replaced;
    replaced.reserve(text.size());
    size_t cursor = 0;
    for (const SpelledToken& token : spelled) {
      auto it = sentinel_of.find(token.token);
      if (it == sentinel_of.end()) {
        Result<uint32_t> code_point = free_code_points.next();
        if (!code_point) {
          status = code_point.status();
          return;
        }
        std::string encoded;
        append_utf8(encoded, *code_point);
        it = sentinel_of.emplace(token.token, std::move(encoded)).first;
        sentinels.spelling_of_.emplace(*code_point, std::string(tokenizer.token_text(token.token)));
      }
      replaced.append(text, cursor, token.range.begin - cursor);
      replaced.append(it->second);
      cursor = token.range.end;
    }
    replaced.append(text, cursor);
    text = std::move(replaced);
  };
  for (nlohmann::ordered_json* value : caller_values) visit_strings(*value, replace_spellings);
  if (!status) return status;
  return sentinels;
}

MarkedPrompt SpellingSentinels::restore(std::string_view rendered) const {
  MarkedPrompt prompt;
  if (spelling_of_.empty()) {
    prompt.text = rendered;
    return prompt;
  }
  prompt.text.reserve(rendered.size());
  for (size_t pos = 0; pos < rendered.size();) {
    const size_t length = utf8_valid_length(rendered, pos);
    if (length >= 3) {
      const auto it = spelling_of_.find(decode_utf8(rendered, pos, length));
      if (it != spelling_of_.end()) {
        prompt.literal.push_back({prompt.text.size(), prompt.text.size() + it->second.size()});
        prompt.text.append(it->second);
        pos += length;
        continue;
      }
    }
    const size_t n_copied = length == 0 ? 1 : length;
    prompt.text.append(rendered.substr(pos, n_copied));
    pos += n_copied;
  }
  return prompt;
}

}  // namespace rwd::tokenizer
