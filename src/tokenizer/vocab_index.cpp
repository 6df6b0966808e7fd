// VocabIndex construction with the duplicate check.
#include "tokenizer/vocab_index.h"

#include "gguf/keys.h"

namespace rwd::tokenizer {

Result<VocabIndex> VocabIndex::build(const std::vector<std::string>& tokens) {
  VocabIndex index;
  index.ids_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].empty()) continue;
    const auto [it, inserted] = index.ids_.try_emplace(tokens[id], static_cast<int32_t>(id));
    if (!inserted) {
      return Status::errorf("{}: '{}' appears twice, as ids {} and {}", gguf::kTokenizerTokens, tokens[id],
                            it->second, id);
    }
  }
  return index;
}

}  // namespace rwd::tokenizer
