#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "commands.h"

namespace rwd::apps {

Result<std::vector<std::string>> split_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) return Status::errorf("{}: empty item in '{}'", flag, text);
    items.push_back(item);
  }
  if (items.empty()) return Status::errorf("{}: no value given", flag);
  return items;
}

Result<std::vector<int>> parse_int_list(const std::string& flag, const std::string& text, int min, int max) {
  REWIND_ASSIGN_OR_RETURN(std::vector<std::string> items, split_list(flag, text));
  std::vector<int> values;
  for (const std::string& item : items) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < min || value > max) {
      return Status::errorf("{}: '{}' is not an integer in [{}, {}]", flag, item, min, max);
    }
    values.push_back(value);
  }
  return values;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t low = static_cast<size_t>(rank);
  const size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (rank - static_cast<double>(low));
}

void add_draft_vocab_option(CLI::App& cmd, int64_t& draft_vocab) {
  cmd.add_option_function<std::string>(
         "--draft-vocab",
         [&draft_vocab](const std::string& value) {
           if (value == "auto") {
             draft_vocab = SpecOptions::kDraftVocabAuto;
             return;
           }
           int64_t parsed = 0;
           const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
           if (error != std::errc() || end != value.data() + value.size() || parsed < 0) {
             throw CLI::ValidationError("--draft-vocab", "expected auto or a number >= 0, got '" + value + "'");
           }
           draft_vocab = parsed;
         },
         "--spec draft: the draft scores only token ids below N, the frequent ones of a BPE vocabulary, in rounds "
         "whose recent tokens mostly lie there (less to read per draft token; output unchanged; 0: all; auto: "
         "32768 for vocabularies over 65536 ids)")
      ->default_str("auto");
}

void add_assume_costs_option(CLI::App& cmd, double& verify_token, double& draft_token) {
  cmd.add_option_function<std::string>(
         "--assume-costs",
         [&verify_token, &draft_token](const std::string& value) {
           const size_t comma = value.find(',');
           const auto parse = [&value](const std::string& item) {
             size_t used = 0;
             double parsed = -1.0;
             try {
               parsed = std::stod(item, &used);
             } catch (const std::exception&) {
               used = 0;
             }
             if (used == 0 || used != item.size() || !(parsed >= 0.0 && parsed <= SpecOptions::kMaxAssumedCost)) {
               throw CLI::ValidationError("--assume-costs", fmt::format("expected VERIFY[,DRAFT] with each in [0, {}] "
                                                                        "plain steps, got '{}'",
                                                                        SpecOptions::kMaxAssumedCost, value));
             }
             return parsed;
           };
           verify_token = parse(value.substr(0, comma));
           draft_token = comma == std::string::npos ? 0.0 : parse(value.substr(comma + 1));
         },
         "the adaptive policy assumes these costs instead of timing steps: a verify token past a slot's first costs "
         "VERIFY plain steps, a drafted token DRAFT (default 0); its choices then repeat on every machine and run");
}

void add_speculation_options(CLI::App& cmd, EngineOptions& engine, const std::string& modes) {
  SpecOptions& spec = engine.spec;
  cmd.add_option("--spec", spec.mode, "speculative decoding: " + modes)->capture_default_str();
  cmd.add_option("--draft-model", spec.draft_model, "draft model for --spec draft (same vocabulary)");
  cmd.add_option("--draft-max", spec.draft_max, "most tokens drafted per round")->capture_default_str();
  cmd.add_option("--draft-min", spec.draft_min, "fewest tokens drafted per round")->capture_default_str();
  add_draft_vocab_option(cmd, spec.draft_vocab);
  cmd.add_option("--rollback", spec.rollback, "recurrent-state rollback: replay, snapshot, checkpoint, none")
      ->capture_default_str();
  cmd.add_option("--rewind-depth", engine.rewind_depth,
                 "committed tokens per slot kept exactly revocable (a lagging checkpoint per slot; 0: off)")
      ->capture_default_str();
  cmd.add_option("--ngram-min", spec.ngram_min, "shortest n-gram the ngram proposer matches")->capture_default_str();
  cmd.add_option("--ngram-max", spec.ngram_max, "longest n-gram the ngram proposer matches")->capture_default_str();
  cmd.add_option("--draft-tree-nodes", spec.tree_nodes,
                 "tree drafts: verify up to N drafted tokens per round as a tree of alternatives, "
                 "depth up to the draft length; the adaptive policy drafts alternatives only where their measured "
                 "acceptance pays for their rows (0: chains)")
      ->capture_default_str();
  cmd.add_option("--draft-tree-topk", spec.tree_topk, "tree drafts: most alternatives after one token")
      ->capture_default_str();
  cmd.add_flag("!--fixed-draft", spec.adaptive, "always draft --draft-max tokens (no adaptive draft length, no back-off)");
  add_assume_costs_option(cmd, spec.assumed_verify_token, spec.assumed_draft_token);
}

void add_cache_type_options(CLI::App& cmd, EngineOptions& engine) {
  // f16, as llama.cpp: half the memory of f32 rows, at a rounding of keys and values that every token then reads
  // alike (outputs stay exact under speculation and any batching).
  engine.cache_type_k = "f16";
  engine.cache_type_v = "f16";
  cmd.add_option("--cache-type-k", engine.cache_type_k, "how KV cache keys are stored: f32, f16, q8_0 (or -ctk)")
      ->capture_default_str();
  cmd.add_option("--cache-type-v", engine.cache_type_v, "how KV cache values are stored: f32, f16, q8_0 (or -ctv)")
      ->capture_default_str();
}

int report_error(const std::string& message) {
  std::fprintf(stderr, "rewind: %s\n", message.c_str());
  return 1;
}

}  // namespace rwd::apps
