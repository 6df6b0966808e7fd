// VocabIndex: exact token spelling -> id. The keys are views into the token strings it was built from, so
// those strings must outlive the index and must not move (the Tokenizer keeps both in one heap object).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace rwd::tokenizer {

class VocabIndex {
 public:
  VocabIndex() = default;
  // Fails on a spelling used by two ids (llama.cpp refuses such vocabs too); empty spellings are not indexed.
  static Result<VocabIndex> build(const std::vector<std::string>& tokens);

  // The id spelled exactly `text`, or -1.
  int32_t find(std::string_view text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  std::unordered_map<std::string_view, int32_t> ids_;
};

}  // namespace rwd::tokenizer
