// `rewind bench spec`: does speculation pay on this model, these prompts and this concurrency? For every workload
// (a JSONL prompt file) and slot count, a plain run is the baseline; then every proposer × rollback policy × draft
// length decodes the same prompts (fixed length, ignore_eos) after a warm-up, greedily or, with --temp, sampled.
// Reported per configuration: output tokens/s (median of reps, min–max), time per output token and time to first
// token percentiles over the requests, acceptance (overall and by draft position), accepted tokens per round, state
// memory by kind, rollback bytes per round, and, when greedy, whether every output was token-identical to the plain
// run (it must be). Sampled speculation keeps the target's distribution, not its random stream, so sampled outputs
// differ from plain ones by design; tests/spec checks that distribution.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "bench_report.h"
#include "commands.h"
#include "rewind/tools.h"

namespace rwd::apps {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Workload {
  std::string name;
  std::vector<std::string> prompts;
};

struct Config {
  std::string spec = "none";
  std::string rollback = "-";
  int draft_max = 0;
  int slots = 1;
  int tree_nodes = 0;
};

Result<Workload> load_workload(const std::string& path) {
  std::ifstream file(path);
  if (!file) return Status::errorf("--prompts: cannot open '{}'", path);
  Workload workload;
  workload.name = std::filesystem::path(path).stem().string();
  std::string line;
  int line_number = 0;
  while (std::getline(file, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("prompt") || !parsed["prompt"].is_string() ||
        parsed["prompt"].get<std::string>().empty()) {
      return Status::errorf("{} line {}: expected a JSON object with a non-empty string \"prompt\"", path, line_number);
    }
    workload.prompts.push_back(parsed["prompt"].get<std::string>());
  }
  if (workload.prompts.empty()) return Status::errorf("{}: no prompts (one JSON object per line)", path);
  return workload;
}

std::string config_label(const Config& config) {
  if (config.spec == "none") return fmt::format("plain, {} slot(s)", config.slots);
  const std::string tree = config.tree_nodes > 0 ? fmt::format(" tree {}", config.tree_nodes) : "";
  return fmt::format("{} {} k{}{}, {} slot(s)", config.spec, config.rollback, config.draft_max, tree, config.slots);
}

// Progress on stderr: a bar redrawn in place on a terminal, a line per configuration otherwise.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total), start_(Clock::now()), tty_(::isatty(STDERR_FILENO) != 0) {}
  void advance(const std::string& what) {
    ++done_;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double eta = done_ > 0 ? elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0.0;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done_ / std::max<int64_t>(total_, 1));
    const std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(kWidth - filled, '.');
    if (tty_) {
      std::fprintf(stderr, "\r[%s] %lld/%lld  %-40.40s eta %3.0fs", bar.c_str(), static_cast<long long>(done_),
                   static_cast<long long>(total_), what.c_str(), eta);
      if (done_ == total_) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "[%s] %lld/%lld %s (eta %.0fs)\n", bar.c_str(), static_cast<long long>(done_),
                   static_cast<long long>(total_), what.c_str(), eta);
    }
    std::fflush(stderr);
  }

 private:
  int64_t total_;
  int64_t done_ = 0;
  Clock::time_point start_;
  bool tty_;
};

struct RunOutcome {
  json row;
  std::vector<std::vector<int32_t>> ids;  // per prompt, from the last rep
  ModelInfo info;
};

json state_json(const StateReport& state) {
  const size_t total = state.kv + state.conv + state.recurrent + state.records + state.snapshots +
                       state.checkpoint_copies + state.scratch + state.rewind + state.draft_model;
  return {{"kv", state.kv},
          {"conv", state.conv},
          {"recurrent", state.recurrent},
          {"records", state.records},
          {"snapshots", state.snapshots},
          {"checkpoint_copies", state.checkpoint_copies},
          {"scratch", state.scratch},
          {"rewind", state.rewind},
          {"draft_model", state.draft_model},
          {"total", total},
          {"bytes_per_node", state.bytes_per_node},
          {"full_state_per_node", state.full_state_per_node}};
}

// One configuration on one workload: a warm-up, then `reps` runs of every prompt through the configured slots,
// one call of run_rep each, so that several configurations can take turns rep by rep (--interleave).
class ConfigRun {
 public:
  static Result<ConfigRun> open(const BenchSpecOptions& options, const Workload& workload, const Config& config,
                                int n_gen) {
    EngineOptions engine_options;
    engine_options.model_path = options.model;
    engine_options.n_threads = options.n_threads;
    engine_options.n_ctx = options.n_ctx;
    engine_options.n_slots = config.slots;
    engine_options.n_batch = std::max(512, config.slots * (std::max(config.draft_max, config.tree_nodes) + 1));
    engine_options.spec.mode = config.spec;
    if (config.spec != "none") {
      engine_options.spec.draft_max = config.draft_max;
      engine_options.spec.draft_min = 1;
      engine_options.spec.rollback = config.rollback;
      engine_options.spec.adaptive = options.adaptive;
      engine_options.spec.assumed_verify_token = options.assumed_verify_token;
      engine_options.spec.assumed_draft_token = options.assumed_draft_token;
      if (config.spec == "draft") {
        engine_options.spec.draft_model = options.draft_model;
        engine_options.spec.draft_vocab = options.draft_vocab;
      }
      engine_options.spec.oracle_error_rate = options.oracle_error_rate;
      engine_options.spec.ngram_min = options.ngram_min;
      engine_options.spec.ngram_max = options.ngram_max;
      engine_options.spec.tree_nodes = config.tree_nodes;
      engine_options.spec.tree_topk = options.tree_topk;
    }
    ConfigRun run(options, config, n_gen);
    REWIND_ASSIGN_OR_RETURN(run.engine_, Engine::open(engine_options));
    for (size_t i = 0; i < workload.prompts.size(); ++i) {
      REWIND_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                              options.chat ? run.engine_->tokenize_chat({{"user", workload.prompts[i]}})
                                           : run.engine_->tokenize(workload.prompts[i], run.engine_->add_bos_default(),
                                                                   true));
      if (static_cast<int64_t>(ids.size()) + n_gen > options.n_ctx) {
        return Status::errorf("{} prompt {}: {} tokens + {} generated exceed the context of {} (raise --ctx-size)",
                              workload.name, i + 1, ids.size(), n_gen, options.n_ctx);
      }
      run.prompts_.push_back(std::move(ids));
    }
    run.outcome_.info = run.engine_->info();
    return run;
  }

  // Rep 0 warms caches, pages and the policy's cost model on the first prompt (16 tokens), or with
  // `full_warm_up` on every prompt in full, whose output ids() then holds (the plain run's, which the oracle
  // drafts from, before any other configuration's first rep). `oracle_ids`: the plain greedy output per prompt.
  Status run_rep(int rep, bool full_warm_up, const std::vector<std::vector<int32_t>>* oracle_ids) {
    if (config_.spec == "oracle" && !oracle_ids) return Status::error("--spec oracle needs the plain run's output first");
    const bool warm_up = rep == 0;
    const size_t n_requests = warm_up && !full_warm_up ? 1 : prompts_.size();
    std::vector<std::vector<int32_t>> ids(n_requests);
    std::vector<int64_t> request_ids;
    for (size_t i = 0; i < n_requests; ++i) {
      Request request;
      request.prompt_ids = prompts_[i];
      request.max_tokens = warm_up && !full_warm_up ? std::min(n_gen_, 16) : n_gen_;
      request.sampling.temperature = static_cast<float>(options_.temperature);
      request.sampling.seed = options_.seed + i;
      request.ignore_eos = true;
      if (config_.spec == "oracle") request.oracle_ids = (*oracle_ids)[i];
      std::vector<int32_t>* sink = &ids[i];
      REWIND_ASSIGN_OR_RETURN(int64_t id, engine_->submit(std::move(request), [sink](const TokenEvent& event) {
                                if (!event.done) sink->push_back(event.token);
                              }));
      request_ids.push_back(id);
    }
    const Clock::time_point start = Clock::now();
    while (!engine_->idle()) REWIND_RETURN_IF_ERROR(engine_->step());
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (n_requests == prompts_.size()) outcome_.ids = std::move(ids);
    if (warm_up) return Status::ok();
    int64_t generated = 0;
    for (int64_t id : request_ids) {
      const RequestTimings timings = engine_->timings(id);
      generated += timings.n_generated_tokens;
      ttft_ms_.push_back(timings.prompt_seconds * 1e3);
      if (timings.n_generated_tokens > 1) {
        tpot_ms_.push_back(timings.generation_seconds * 1e3 / static_cast<double>(timings.n_generated_tokens - 1));
      }
      add(timings.spec);
    }
    tokens_per_second_.push_back(static_cast<double>(generated) / seconds);
    return Status::ok();
  }

  // The output of the last run of every prompt.
  const std::vector<std::vector<int32_t>>& ids() const { return outcome_.ids; }

  // The configuration's row from its measured reps.
  RunOutcome finish() {
    const SpecStats& spec = spec_;
    json by_position = json::array();
    for (size_t p = 0; p < spec.drafted_by_position.size(); ++p) {
      by_position.push_back(spec.drafted_by_position[p] > 0 ? static_cast<double>(spec.accepted_by_position[p]) /
                                                                 static_cast<double>(spec.drafted_by_position[p])
                                                           : 0.0);
    }
    const bool speculating = config_.spec != "none";
    const auto per_round = [&](double value) {
      return spec.rounds > 0 ? value / static_cast<double>(spec.rounds) : 0.0;
    };
    json& row = outcome_.row;
    row["tokens_per_second"] = {{"median", percentile(tokens_per_second_, 50)},
                                {"min", *std::min_element(tokens_per_second_.begin(), tokens_per_second_.end())},
                                {"max", *std::max_element(tokens_per_second_.begin(), tokens_per_second_.end())}};
    row["tpot_ms"] = {{"p50", percentile(tpot_ms_, 50)}, {"p90", percentile(tpot_ms_, 90)},
                      {"p99", percentile(tpot_ms_, 99)}};
    row["ttft_ms"] = {{"p50", percentile(ttft_ms_, 50)}, {"p90", percentile(ttft_ms_, 90)},
                      {"p99", percentile(ttft_ms_, 99)}};
    row["acceptance_rate"] =
        speculating && spec.drafted > 0 ? json(static_cast<double>(spec.accepted) / static_cast<double>(spec.drafted))
                                        : json(nullptr);
    row["acceptance_by_position"] = by_position;
    row["accepted_per_round"] = speculating && spec.rounds > 0 ? json(per_round(static_cast<double>(spec.accepted)))
                                                               : json(nullptr);
    // Drafted tokens each verify forward checked: the verified-token budget a tree spends on alternatives.
    row["verified_per_round"] = speculating && spec.rounds > 0 ? json(per_round(static_cast<double>(spec.drafted)))
                                                               : json(nullptr);
    row["tree_rounds"] = spec.tree_rounds;
    row["rounds"] = spec.rounds;
    row["drafted"] = spec.drafted;
    row["accepted"] = spec.accepted;
    row["rollbacks"] = spec.rollbacks;
    row["plain_steps"] = spec.plain_steps;
    row["fallbacks"] = spec.fallbacks;
    row["budget_plain_steps"] = spec.budget_plain_steps;
    // A run the policy backed off from is mostly plain decoding: its speed says little about speculation.
    row["mostly_plain"] = speculating && spec.plain_steps > spec.rounds;
    row["state_bytes"] = state_json(engine_->state_report());
    row["rollback_bytes_written_per_round"] = per_round(static_cast<double>(spec.rollback_bytes_written));
    row["rollback_bytes_copied_per_round"] = per_round(static_cast<double>(spec.rollback_bytes_copied));
    return std::move(outcome_);
  }

 private:
  ConfigRun(const BenchSpecOptions& options, const Config& config, int n_gen)
      : options_(options), config_(config), n_gen_(n_gen) {}

  void add(const SpecStats& s) {
    spec_.rounds += s.rounds;
    spec_.drafted += s.drafted;
    spec_.accepted += s.accepted;
    spec_.rollbacks += s.rollbacks;
    spec_.rollback_bytes_written += s.rollback_bytes_written;
    spec_.rollback_bytes_copied += s.rollback_bytes_copied;
    spec_.plain_steps += s.plain_steps;
    spec_.fallbacks += s.fallbacks;
    spec_.budget_plain_steps += s.budget_plain_steps;
    spec_.tree_rounds += s.tree_rounds;
    spec_.tree_nodes += s.tree_nodes;
    if (spec_.drafted_by_position.size() < s.drafted_by_position.size()) {
      spec_.drafted_by_position.resize(s.drafted_by_position.size(), 0);
      spec_.accepted_by_position.resize(s.drafted_by_position.size(), 0);
    }
    for (size_t p = 0; p < s.drafted_by_position.size(); ++p) {
      spec_.drafted_by_position[p] += s.drafted_by_position[p];
      spec_.accepted_by_position[p] += s.accepted_by_position[p];
    }
  }

  const BenchSpecOptions& options_;
  Config config_;
  int n_gen_;
  std::unique_ptr<Engine> engine_;
  std::vector<std::vector<int32_t>> prompts_;
  RunOutcome outcome_;
  std::vector<double> tokens_per_second_, tpot_ms_, ttft_ms_;
  SpecStats spec_;
};

std::string command_line(const BenchSpecOptions& options) {
  std::string command = fmt::format("rewind bench spec -m {} --prompts {} --spec {} --rollback {} --draft-max {} "
                                    "--slots {} --reps {} -n {} -t {} -c {}",
                                    options.model, options.prompts, options.spec, options.rollback, options.draft_max,
                                    options.slots, options.reps, options.n_gen, options.n_threads, options.n_ctx);
  if (!options.draft_model.empty()) command += " --draft-model " + options.draft_model;
  if (options.draft_vocab != SpecOptions::kDraftVocabAuto) {
    command += fmt::format(" --draft-vocab {}", options.draft_vocab);
  }
  if (options.max_prompts > 0) command += fmt::format(" --max-prompts {}", options.max_prompts);
  if (!options.adaptive) command += " --fixed-draft";
  if (options.assumed_verify_token > 0.0) {
    command += fmt::format(" --assume-costs {},{}", options.assumed_verify_token, options.assumed_draft_token);
  }
  if (options.chat) command += " --chat";
  if (options.temperature != 0.0) command += fmt::format(" --temp {} --seed {}", options.temperature, options.seed);
  if (options.quick) command += " --quick";
  if (options.interleave) command += " --interleave";
  if (options.spec.find("oracle") != std::string::npos) {
    command += fmt::format(" --oracle-error-rate {}", options.oracle_error_rate);
  }
  if (options.spec.find("ngram") != std::string::npos) {
    command += fmt::format(" --ngram-min {} --ngram-max {}", options.ngram_min, options.ngram_max);
  }
  if (options.tree_nodes != "0") {
    command += fmt::format(" --draft-tree-nodes {} --draft-tree-topk {}", options.tree_nodes, options.tree_topk);
  }
  if (!options.out.empty()) command += " --out " + options.out;
  return command;
}

int bench_spec(const BenchSpecOptions& options) {
  auto files = split_list("--prompts", options.prompts);
  auto modes = split_list("--spec", options.spec);
  auto policies = split_list("--rollback", options.rollback);
  auto depths = parse_int_list("--draft-max", options.draft_max, 1, 32);
  auto slot_counts = parse_int_list("--slots", options.slots, 1, 64);
  auto tree_budgets = parse_int_list("--draft-tree-nodes", options.tree_nodes, 0, SpecOptions::kMaxTreeNodes);
  for (const Status* status : {&files.status(), &modes.status(), &policies.status(), &depths.status(),
                               &slot_counts.status(), &tree_budgets.status()}) {
    if (!status->is_ok()) return report_error(status->message());
  }
  if (options.reps < 1 || options.n_gen < 2 || options.max_prompts < 0) {
    return report_error("bench spec needs --reps >= 1, -n >= 2 and --max-prompts >= 0");
  }
  if (options.assumed_draft_token > 0.0 && options.assumed_verify_token == 0.0) {
    return report_error(fmt::format("--assume-costs 0,{}: assumed_draft_token {} needs assumed_verify_token above 0",
                                    options.assumed_draft_token, options.assumed_draft_token));
  }
  const bool greedy = options.temperature == 0.0;
  for (const std::string& mode : *modes) {
    if (mode == "none") return report_error("--spec: 'none' is the baseline and always runs; list proposers only");
    if (mode == "oracle" && !greedy) {
      return report_error("--spec oracle drafts the plain greedy output; it needs --temp 0");
    }
    if (mode == "ngram" && (options.ngram_min < 1 || options.ngram_max < options.ngram_min ||
                            options.ngram_max > SpecOptions::kMaxNgram)) {
      return report_error(fmt::format("--ngram-min/--ngram-max must satisfy 1 <= min <= max <= {}, got {} and {}",
                                      SpecOptions::kMaxNgram, options.ngram_min, options.ngram_max));
    }
  }
  int n_gen = options.n_gen;
  int reps = options.reps;
  std::vector<Workload> workloads;
  for (const std::string& file : *files) {
    auto workload = load_workload(file);
    if (!workload) return report_error(workload.status().message());
    if (options.max_prompts > 0 && workload->prompts.size() > static_cast<size_t>(options.max_prompts)) {
      workload->prompts.resize(static_cast<size_t>(options.max_prompts));
    }
    workloads.push_back(std::move(*workload));
  }
  std::vector<int> depth_list = *depths;
  std::vector<int> slot_list = *slot_counts;
  std::vector<std::string> policy_list = *policies;
  if (options.quick) {
    // About a minute on 2 cores for a small model: one slot count, one depth, one policy, two prompts, one rep.
    n_gen = std::min(n_gen, 32);
    reps = 1;
    slot_list.resize(1);
    depth_list = {depth_list[depth_list.size() / 2]};
    policy_list.resize(1);
    for (Workload& workload : workloads) workload.prompts.resize(std::min<size_t>(workload.prompts.size(), 2));
  }

  std::vector<std::pair<size_t, Config>> plan;  // workload index, configuration
  for (size_t w = 0; w < workloads.size(); ++w) {
    for (int slots : slot_list) {
      plan.push_back({w, Config{"none", "-", 0, slots}});
      for (const std::string& mode : *modes) {
        for (const std::string& policy : policy_list) {
          for (int depth : depth_list) {
            for (int tree : *tree_budgets) {
              plan.push_back({w, Config{mode, policy, depth, slots, tree}});
            }
          }
        }
      }
    }
  }
  Progress progress(static_cast<int64_t>(plan.size()) * (reps + 1));

  json results;
  results["command"] = command_line(options);
  results["settings"] = {{"n_gen", n_gen},           {"reps", reps},         {"adaptive", options.adaptive},
                         {"quick", options.quick},   {"n_ctx", options.n_ctx}, {"chat", options.chat},
                         {"temperature", options.temperature}, {"seed", options.seed},
                         {"interleave", options.interleave},
                         {"assumed_costs", options.assumed_verify_token > 0.0
                                               ? json{{"verify_token", options.assumed_verify_token},
                                                      {"draft_token", options.assumed_draft_token}}
                                               : json()}};
  results["rows"] = json::array();
  std::map<std::string, std::vector<std::vector<int32_t>>> reference_ids;  // workload → plain greedy ids
  std::map<std::pair<std::string, int>, double> baseline;                 // (workload, slots) → plain tok/s
  bool all_identical = true;
  const auto reference_for = [&](const Workload& workload) -> const std::vector<std::vector<int32_t>>* {
    const auto found = reference_ids.find(workload.name);
    return found != reference_ids.end() ? &found->second : nullptr;
  };
  const auto record_row = [&](const Workload& workload, const Config& config, Result<RunOutcome> outcome) {
    json row = {{"workload", workload.name}, {"spec", config.spec},   {"rollback", config.rollback},
                {"draft_max", config.draft_max}, {"slots", config.slots}, {"tree_nodes", config.tree_nodes},
                {"error", nullptr}};
    if (!outcome) {
      row["error"] = outcome.status().message();
      results["rows"].push_back(std::move(row));
      return;
    }
    row.update(outcome->row);
    const double tps = row["tokens_per_second"]["median"].get<double>();
    if (config.spec == "none") {
      baseline[{workload.name, config.slots}] = tps;
      if (!reference_ids.count(workload.name)) reference_ids[workload.name] = outcome->ids;
    }
    const std::vector<std::vector<int32_t>>& reference = reference_ids[workload.name];
    const bool identical = outcome->ids == reference;
    if (greedy) all_identical = all_identical && identical;
    const bool is_reference = config.spec == "none" && config.slots == slot_list.front();
    row["identical_to_plain"] = greedy && !is_reference ? json(identical) : json(nullptr);
    const auto base = baseline.find({workload.name, config.slots});
    row["speedup_vs_plain"] = base != baseline.end() && base->second > 0 ? json(tps / base->second) : json(nullptr);
    results["rows"].push_back(std::move(row));
    if (!results.contains("model")) {
      const ModelInfo& info = outcome->info;
      results["model"] = {{"path", options.model}, {"name", info.name}, {"architecture", info.architecture},
                          {"n_params", info.n_params}};
      // Measured in the same run, so the figures compare with the machine as it was.
      results["machine"] = {{"threads", info.n_threads}, {"isa", info.isa},
                            {"read_bandwidth_gbps", measure_read_bandwidth_gbps(info.n_threads)}};
    }
  };
  // Configurations run a group at a time: those of one workload and slot count, the plain run first.
  for (size_t begin = 0; begin < plan.size();) {
    size_t end = begin + 1;
    while (end < plan.size() && plan[end].first == plan[begin].first &&
           plan[end].second.slots == plan[begin].second.slots) {
      ++end;
    }
    const Workload& workload = workloads[plan[begin].first];
    const auto advance = [&](const Config& config, const Status& status) {
      progress.advance(fmt::format("{}: {}{}", workload.name, config_label(config), status ? "" : " (refused)"));
    };
    if (!options.interleave) {
      for (size_t i = begin; i < end; ++i) {
        const Config& config = plan[i].second;
        auto run = ConfigRun::open(options, workload, config, n_gen);
        Status status = run.status();
        int rep = 0;
        for (; rep <= reps && status; ++rep) {
          status = run->run_rep(rep, false, reference_for(workload));
          advance(config, status);
        }
        for (; rep <= reps; ++rep) advance(config, status);
        record_row(workload, config, status ? Result<RunOutcome>(run->finish()) : Result<RunOutcome>(status));
      }
    } else {
      // Every configuration of the group open at once, taking turns rep by rep: a drift of the machine's speed
      // (other load, frequency) lands on all of them alike instead of on whichever ran during it.
      std::vector<std::optional<ConfigRun>> runs(end - begin);
      std::vector<Status> statuses(end - begin);
      for (size_t i = begin; i < end; ++i) {
        auto run = ConfigRun::open(options, workload, plan[i].second, n_gen);
        statuses[i - begin] = run.status();
        if (run) runs[i - begin].emplace(std::move(*run));
      }
      for (int rep = 0; rep <= reps; ++rep) {
        for (size_t i = begin; i < end; ++i) {
          const Config& config = plan[i].second;
          Status& status = statuses[i - begin];
          // The first plain run warms up on every prompt in full: its output is what the oracle drafts from.
          const bool reference_run = config.spec == "none" && !reference_for(workload);
          if (status) status = runs[i - begin]->run_rep(rep, reference_run, reference_for(workload));
          if (status && reference_run) reference_ids[workload.name] = runs[i - begin]->ids();
          advance(config, status);
        }
      }
      for (size_t i = begin; i < end; ++i) {
        const Status& status = statuses[i - begin];
        record_row(workload, plan[i].second,
                   status ? Result<RunOutcome>(runs[i - begin]->finish()) : Result<RunOutcome>(status));
      }
    }
    begin = end;
  }

  if (options.json) {
    std::printf("%s\n", results.dump(1, ' ', false, json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s", bench_table(results).c_str());
  }
  if (!options.out.empty()) {
    const Status written = write_bench_report(results, options.out);
    if (!written) return report_error(written.message());
    std::fprintf(stderr, "bench spec: wrote %s/report.html, results.csv, results.json\n", options.out.c_str());
  }
  if (!all_identical) return report_error("a speculative run's greedy output differed from plain decoding (a bug)");
  return 0;
}

}  // namespace

void register_bench_spec(CLI::App& bench, BenchSpecOptions& options, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand("spec", "speculative decoding grid against plain decoding, with a report");
  cmd->add_option("-m,--model", options.model, "GGUF model file")->required();
  cmd->add_option("--draft-model", options.draft_model, "draft model for --spec draft");
  add_draft_vocab_option(*cmd, options.draft_vocab);
  options.prompts = "bench/prompts/code.jsonl,bench/prompts/prose.jsonl,bench/prompts/knowledge.jsonl";
  cmd->add_option("--prompts", options.prompts, "JSONL prompt files ({\"prompt\": ...} per line), one workload each")
      ->capture_default_str();
  cmd->add_option("--spec", options.spec,
                  "proposers, comma-separated: ngram, draft, mtp, oracle (drafts the plain run's output with errors)")
      ->capture_default_str();
  cmd->add_option("--oracle-error-rate", options.oracle_error_rate,
                  "--spec oracle: probability that a drafted token is wrong (sets acceptance without a draft model)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--ngram-min", options.ngram_min, "--spec ngram: shortest n-gram looked up")->capture_default_str();
  cmd->add_option("--ngram-max", options.ngram_max, "--spec ngram: longest n-gram looked up (tried first)")
      ->capture_default_str();
  cmd->add_option("--rollback", options.rollback, "rollback policies, comma-separated: replay, snapshot, checkpoint, none")
      ->capture_default_str();
  cmd->add_option("--draft-max", options.draft_max, "draft lengths, comma-separated")->capture_default_str();
  cmd->add_option("--draft-tree-nodes", options.tree_nodes,
                  "tree budgets, comma-separated (0: chains; depth up to the draft length)")
      ->capture_default_str();
  cmd->add_option("--draft-tree-topk", options.tree_topk, "tree rows: most alternatives after one token")
      ->capture_default_str();
  cmd->add_option("--slots", options.slots, "slot counts (concurrency), comma-separated")->capture_default_str();
  cmd->add_option("-r,--reps", options.reps, "measured repetitions per configuration (median reported)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", options.n_gen, "tokens generated per prompt")->capture_default_str();
  cmd->add_option("-t,--threads", options.n_threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_option("-c,--ctx-size", options.n_ctx, "context per slot")->capture_default_str();
  cmd->add_option("--max-prompts", options.max_prompts, "use the first N prompts of each workload (0: all)")
      ->capture_default_str();
  cmd->add_flag("!--fixed-draft", options.adaptive, "always draft --draft-max tokens (no adaptive length, no back-off)");
  add_assume_costs_option(*cmd, options.assumed_verify_token, options.assumed_draft_token);
  cmd->add_flag("--chat", options.chat, "format each prompt as a user message with the model's chat template");
  cmd->add_option("--temp", options.temperature,
                  "sampling temperature (0: greedy; otherwise the engine's default top-k/top-p/min-p apply and "
                  "outputs are not compared with plain decoding)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--seed", options.seed, "sampled runs: request i samples from seed + i in every configuration")
      ->capture_default_str();
  cmd->add_flag("--quick", options.quick, "a one-minute subset: one slot count, depth and policy, two prompts, one rep");
  cmd->add_flag("--interleave", options.interleave,
                "run the configurations of each workload and slot count rep by rep in turn rather than one after "
                "another, so a drift of the machine's speed lands on all alike (holds all their engines at once)");
  cmd->add_flag("--json", options.json, "print the results as JSON instead of a table");
  cmd->add_option("--out", options.out, "directory for results.csv, results.json, report.html and its PNG plots");
  cmd->callback([&options, &exit_code] { exit_code = bench_spec(options); });
}

}  // namespace rwd::apps
