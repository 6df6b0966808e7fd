// The per-family split rules, compiled with PCRE2 in UTF + UCP mode (so \s, \p{L}, \p{N} follow Unicode) and
// with PCRE2_MATCH_INVALID_UTF, so invalid input bytes simply never match instead of failing the match.
// Regexes are the forms llama.cpp uses (its "adapted" spellings where it rewrote the Hugging Face ones).
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>

#include "base/check.h"
#include "gguf/keys.h"
#include "tokenizer/utf8.h"

namespace rwd::tokenizer {
namespace {

// GPT-2's rule, also the core of several families. Long rules are split into adjacent literals.
constexpr std::string_view kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr std::string_view kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)re"
    R"re( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)re"
    R"re( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen35 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|)re"
    R"re( ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kDeepseek3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|)re"
    R"re( ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

struct Family {
  std::vector<std::string_view> names;
  std::vector<std::string_view> regexes;
  bool ignore_merges;
  bool add_bos_default;
};

// Names as llama.cpp's loader groups them; each group shares one list of rules.
const std::array<Family, 9>& families() {
  static const std::array<Family, 9> table = {{
      {{"default", ""},
       {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"},
       false,
       false},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "gigachat", "a.x-4.0", "mellum", "trillion",
        "granite-docling", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de"},
       {kGpt2},
       false,
       false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {kLlama3},
       true,
       true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}, false, false},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open"},
       {kQwen2},
       false,
       false},
      {{"qwen35"}, {kQwen35}, false, false},
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"},
       {R"re(\p{N})re", kGpt2},
       false,
       false},
      {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"}, false, false},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re", kDeepseek3Words},
       false,
       false},
  }};
  return table;
}

std::string supported_names() {
  std::string out;
  for (const Family& family : families()) {
    for (std::string_view name : family.names) {
      if (name.empty()) continue;
      if (!out.empty()) out += ", ";
      out += name;
    }
  }
  return out;
}

}  // namespace

struct PreTokenizer::CompiledRegex {
  pcre2_code* code = nullptr;
  ~CompiledRegex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<PreTokenizer> PreTokenizer::create(std::string_view pre_name) {
  const Family* found = nullptr;
  for (const Family& family : families()) {
    if (std::find(family.names.begin(), family.names.end(), pre_name) != family.names.end()) found = &family;
  }
  if (found == nullptr) {
    return Status::errorf("{} '{}' is not supported (supported: {})", gguf::kTokenizerPre, pre_name,
                          supported_names());
  }
  PreTokenizer pre;
  pre.ignore_merges_ = found->ignore_merges;
  pre.add_bos_default_ = found->add_bos_default;
  for (std::string_view pattern : found->regexes) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    auto compiled = std::make_unique<CompiledRegex>();
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset,
                                   nullptr);
    // The patterns are constants of this file, so a compile failure is a bug here, not bad input.
    REWIND_CHECK(compiled->code != nullptr, "pre-tokenizer regex '{}' failed to compile at offset {} (error {})",
                 pattern, error_offset, error_code);
    // JIT is only a speed-up; without it (unsupported CPU, no executable memory) matching still works.
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
    pre.regexes_.push_back(std::move(compiled));
  }
  return pre;
}

Status PreTokenizer::split(std::string_view text, std::vector<TextRange>& pieces) const {
  std::vector<TextRange> current = {{0, text.size()}};
  std::vector<TextRange> next;
  for (const auto& regex : regexes_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match_data(
        pcre2_match_data_create_from_pattern(regex->code, nullptr), &pcre2_match_data_free);
    if (match_data == nullptr) return Status::error("pre-tokenizer: out of memory for PCRE2 match data");
    next.clear();
    for (const TextRange& range : current) {
      // Matching inside the range only: look-aheads such as (?!\S) must not see past it, as in llama.cpp.
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + range.begin);
      const size_t length = range.end - range.begin;
      size_t emitted = 0;  // everything before this offset is already in `next`
      size_t search = 0;
      while (search < length) {
        int rc = pcre2_match(regex->code, subject, length, search, 0, match_data.get(), nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(regex->code, subject, length, search, PCRE2_NO_JIT, match_data.get(), nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          std::array<PCRE2_UCHAR, 256> message{};
          pcre2_get_error_message(rc, message.data(), message.size());
          return Status::errorf("pre-tokenizer: matching failed at byte {}: {}", range.begin + search,
                                reinterpret_cast<const char*>(message.data()));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
        const size_t match_begin = ovector[0];
        const size_t match_end = ovector[1];
        if (match_end == match_begin) {  // an empty match splits nothing; step over one character
          const size_t step = utf8_valid_length(std::string_view(text.data() + range.begin, length), match_begin);
          search = match_begin + (step == 0 ? 1 : step);
          continue;
        }
        if (match_begin > emitted) next.push_back({range.begin + emitted, range.begin + match_begin});
        next.push_back({range.begin + match_begin, range.begin + match_end});
        emitted = match_end;
        search = match_end;
      }
      if (emitted < length) next.push_back({range.begin + emitted, range.end});
    }
    current.swap(next);
  }
  pieces.insert(pieces.end(), current.begin(), current.end());
  return Status::ok();
}

}  // namespace rwd::tokenizer
