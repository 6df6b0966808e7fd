// `rewind bench`: prompt-processing and generation tokens/s for a model and thread counts, with the weight
// bytes a decode step reads and the machine's measured read bandwidth side by side: how close decoding
// runs to the memory-bandwidth ceiling. Medians of --reps runs after one warm-up.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "rewind/tools.h"

namespace rwd::apps {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  if (values.empty()) return 0.0;
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

Result<RequestTimings> time_request(Engine& engine, const std::vector<int32_t>& prompt, int n_gen) {
  Request request;
  request.prompt_ids = prompt;
  request.max_tokens = n_gen;
  request.sampling.temperature = 0.0f;
  request.ignore_eos = true;
  REWIND_ASSIGN_OR_RETURN(int64_t id, engine.submit(request, nullptr));
  while (!engine.idle()) REWIND_RETURN_IF_ERROR(engine.step());
  return engine.timings(id);
}

Result<std::vector<int>> parse_threads(const std::string& text) {
  std::vector<int> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    try {
      size_t used = 0;
      const int value = std::stoi(item, &used);
      if (used != item.size() || value < 0 || value > 1024) throw std::out_of_range(item);
      values.push_back(value);
    } catch (const std::exception&) {
      return Status::errorf("--threads: '{}' is not a thread count in [0, 1024]", item);
    }
  }
  if (values.empty()) return Status::error("--threads: no thread count given");
  return values;
}

Result<std::vector<int>> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    try {
      size_t used = 0;
      values.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return Status::errorf("{}: '{}' is not an integer", flag, item);
    }
  }
  if (values.empty()) return Status::errorf("{}: no value given", flag);
  return values;
}

// --verify: the cost of a verify round of 1 + k tokens against a plain step, per rollback policy.
int bench_verify(const BenchOptions& options) {
  auto lengths = parse_int_list("--verify", options.verify);
  if (!lengths) return report_error(lengths.status().message());
  auto threads = parse_threads(options.threads);
  if (!threads) return report_error(threads.status().message());
  VerifyCostOptions verify;
  verify.model_path = options.model;
  verify.n_threads = threads->front();
  verify.n_slots = options.slots;
  verify.n_prompt = options.n_prompt;
  verify.draft_lengths = *lengths;
  verify.reps = std::max(options.reps, 5);
  verify.policies.clear();
  std::stringstream stream(options.rollback);
  std::string item;
  while (std::getline(stream, item, ',')) verify.policies.push_back(item);
  auto costs = measure_verify_cost(verify);
  if (!costs) return report_error(costs.status().message());
  nlohmann::json rows = nlohmann::json::array();
  if (!options.json) {
    std::printf("| policy | slots | k | plain step ms | verify round ms | round / step | written KiB/round | copied KiB/round | state MiB |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (const VerifyCost& cost : *costs) {
    rows.push_back({{"policy", cost.policy},
                    {"slots", options.slots},
                    {"draft_length", cost.draft_length},
                    {"plain_seconds", cost.plain_seconds},
                    {"round_seconds", cost.round_seconds},
                    {"round_over_step", cost.round_seconds / cost.plain_seconds},
                    {"bytes_written_per_round", cost.bytes_written_per_round},
                    {"bytes_copied_per_round", cost.bytes_copied_per_round},
                    {"state_bytes", cost.state_bytes}});
    if (!options.json) {
      std::printf("| %s | %d | %d | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f |\n", cost.policy.c_str(), options.slots,
                  cost.draft_length, cost.plain_seconds * 1e3, cost.round_seconds * 1e3,
                  cost.round_seconds / cost.plain_seconds, cost.bytes_written_per_round / 1024.0,
                  cost.bytes_copied_per_round / 1024.0, cost.state_bytes / 1048576.0);
      std::fflush(stdout);
    }
  }
  if (options.json) std::printf("%s\n", rows.dump(1).c_str());
  return 0;
}

int bench(const BenchOptions& options) {
  if (!options.verify.empty()) return bench_verify(options);
  if (options.n_prompt < 1 || options.n_gen < 2 || options.reps < 1) {
    return report_error("bench needs -p >= 1, -n >= 2 and --reps >= 1");
  }
  auto threads = parse_threads(options.threads);
  if (!threads) return report_error(threads.status().message());
  nlohmann::json rows = nlohmann::json::array();
  if (!options.json) {
    std::printf("| model | threads | isa | pp%d tok/s | tg%d tok/s | weights MiB/token | weight GB/s | read GB/s | of ceiling |\n",
                options.n_prompt, options.n_gen);
    std::printf("|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  }
  for (int n_threads : *threads) {
    EngineOptions engine_options;
    engine_options.model_path = options.model;
    engine_options.n_threads = n_threads;
    engine_options.n_ctx = options.n_prompt + options.n_gen + 8;
    engine_options.n_batch = std::max(options.n_prompt, 1);
    auto opened = Engine::open(engine_options);
    if (!opened) return report_error(opened.status().message());
    Engine& engine = **opened;
    const ModelInfo& info = engine.info();
    std::vector<int32_t> prompt(static_cast<size_t>(options.n_prompt));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 11) % info.n_vocab);

    std::vector<double> pp, tg;
    for (int rep = 0; rep <= options.reps; ++rep) {  // rep 0 warms caches and pages
      auto prompt_run = time_request(engine, prompt, 1);
      if (!prompt_run) return report_error(prompt_run.status().message());
      auto gen_run = time_request(engine, {prompt[0]}, options.n_gen);
      if (!gen_run) return report_error(gen_run.status().message());
      if (rep == 0) continue;
      pp.push_back(prompt_run->n_prompt_tokens / prompt_run->prompt_seconds);
      tg.push_back((gen_run->n_generated_tokens - 1) / gen_run->generation_seconds);
    }
    const double bandwidth = measure_read_bandwidth_gbps(info.n_threads);
    const double pp_tps = median(pp);
    const double tg_tps = median(tg);
    const double weight_gbps = tg_tps * static_cast<double>(info.weight_bytes_per_token) / 1e9;
    const double spread_tg = tg.size() > 1 ? (*std::max_element(tg.begin(), tg.end()) - *std::min_element(tg.begin(), tg.end())) : 0.0;
    nlohmann::json row = {{"model", options.model},         {"architecture", info.architecture},
                          {"threads", info.n_threads},       {"isa", info.isa},
                          {"n_prompt", options.n_prompt},    {"n_gen", options.n_gen},
                          {"pp_tokens_per_second", pp_tps},  {"tg_tokens_per_second", tg_tps},
                          {"tg_spread", spread_tg},          {"weight_bytes_per_token", info.weight_bytes_per_token},
                          {"weight_gbps", weight_gbps},      {"read_bandwidth_gbps", bandwidth},
                          {"fraction_of_ceiling", bandwidth > 0 ? weight_gbps / bandwidth : 0.0}};
    rows.push_back(row);
    if (!options.json) {
      std::printf("| %s | %d | %s | %.1f | %.1f ± %.1f | %.1f | %.2f | %.2f | %.0f %% |\n", info.name.c_str(),
                  info.n_threads, info.isa.c_str(), pp_tps, tg_tps, spread_tg / 2, info.weight_bytes_per_token / 1048576.0,
                  weight_gbps, bandwidth, bandwidth > 0 ? 100.0 * weight_gbps / bandwidth : 0.0);
      std::fflush(stdout);
    }
  }
  if (options.json) std::printf("%s\n", rows.dump(1).c_str());
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, BenchOptions& options, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("bench", "measure prompt and generation speed against the memory ceiling");
  cmd->add_option("-m,--model", options.model, "GGUF model file")->required();
  cmd->add_option("-t,--threads", options.threads, "thread counts, comma-separated (0 = all cores)")->capture_default_str();
  cmd->add_option("-p,--n-prompt", options.n_prompt, "prompt tokens")->capture_default_str();
  cmd->add_option("-n,--n-gen", options.n_gen, "generated tokens")->capture_default_str();
  cmd->add_option("-r,--reps", options.reps, "repetitions (median reported)")->capture_default_str();
  cmd->add_flag("--json", options.json, "print JSON instead of a table");
  cmd->add_option("--verify", options.verify,
                  "draft lengths k, comma-separated: measure a verify round of 1 + k tokens against a plain step");
  cmd->add_option("--rollback", options.rollback, "rollback policies for --verify, comma-separated")
      ->capture_default_str();
  cmd->add_option("--slots", options.slots, "slots verified together for --verify")->capture_default_str();
  cmd->callback([&options, &exit_code] { exit_code = bench(options); });
}

}  // namespace rwd::apps
