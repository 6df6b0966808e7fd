// `rewind bench`: measurements that answer a deployer's questions, one subcommand each.
//   decode (also plain `rewind bench -m MODEL`): prompt-processing and generation tokens/s per thread count;
//     prefill also as achieved GFLOP/s, counting 2·n_params FLOPs per token (a multiply-add per weight, as if
//     every tensor were a dense matmul: the embedding table and all MoE experts counted, attention scores not);
//     decode also as the weight bytes a step reads per second next to the machine's read bandwidth, measured in
//     the same run: how close decoding runs to the memory ceiling.
//     Medians of --reps runs after one warm-up. --verify prices a verify round against a plain step instead
//     (--verify-tree B: each k also as a tree of k tokens, B children per node, beside the chain).
//   kernels: runs the Google Benchmark binary rewind_bench_kernels (bench/) with the arguments after `--`.
//   spec: the speculative-decoding grid (cmd_bench_spec.cpp).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "rewind/tools.h"

namespace rwd::apps {
namespace {

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

// --verify: the cost of a verify round of 1 + k tokens against a plain step, per rollback policy.
int bench_verify(const BenchOptions& options) {
  auto lengths = parse_int_list("--verify", options.verify, 1, 32);
  if (!lengths) return report_error(lengths.status().message());
  auto threads = parse_int_list("--threads", options.threads, 0, 1024);
  if (!threads) return report_error(threads.status().message());
  VerifyCostOptions verify;
  verify.model_path = options.model;
  verify.n_threads = threads->front();
  verify.n_slots = options.slots;
  verify.n_prompt = options.n_prompt;
  verify.draft_lengths = *lengths;
  verify.reps = std::max(options.reps, 5);
  auto policies = split_list("--rollback", options.rollback);
  if (!policies) return report_error(policies.status().message());
  verify.policies = *policies;
  if (options.verify_tree < 0 || options.verify_tree > 8) {
    return report_error(fmt::format("--verify-tree must be in [0, 8] (children per node; 0: chains only), got {}",
                                    options.verify_tree));
  }
  verify.tree_branching = options.verify_tree;
  auto costs = measure_verify_cost(verify);
  if (!costs) return report_error(costs.status().message());
  nlohmann::json rows = nlohmann::json::array();
  if (!options.json) {
    std::printf("| policy | slots | k | shape | plain step ms | verify round ms | round / step | written KiB/round | copied KiB/round | state MiB |\n");
    std::printf("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
  }
  for (const VerifyCost& cost : *costs) {
    rows.push_back({{"policy", cost.policy},
                    {"slots", options.slots},
                    {"draft_length", cost.draft_length},
                    {"tree_branching", cost.tree_branching},
                    {"plain_seconds", cost.plain_seconds},
                    {"round_seconds", cost.round_seconds},
                    {"round_over_step", cost.round_seconds / cost.plain_seconds},
                    {"bytes_written_per_round", cost.bytes_written_per_round},
                    {"bytes_copied_per_round", cost.bytes_copied_per_round},
                    {"state_bytes", cost.state_bytes}});
    if (!options.json) {
      const std::string shape = cost.tree_branching > 0 ? fmt::format("tree ({} per node)", cost.tree_branching)
                                                        : std::string("chain");
      std::printf("| %s | %d | %d | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f |\n", cost.policy.c_str(),
                  options.slots, cost.draft_length, shape.c_str(), cost.plain_seconds * 1e3, cost.round_seconds * 1e3,
                  cost.round_seconds / cost.plain_seconds, cost.bytes_written_per_round / 1024.0,
                  cost.bytes_copied_per_round / 1024.0, cost.state_bytes / 1048576.0);
      std::fflush(stdout);
    }
  }
  if (options.json) std::printf("%s\n", rows.dump(1).c_str());
  return 0;
}

int bench_decode(const BenchOptions& options) {
  if (options.model.empty()) {
    return report_error("bench decode needs -m MODEL; `rewind bench --help` lists the other subcommands");
  }
  if (!options.verify.empty()) return bench_verify(options);
  if (options.n_prompt < 1 || options.n_gen < 2 || options.reps < 1 || options.depth < 0) {
    return report_error("bench needs -p >= 1, -n >= 2, --reps >= 1 and --depth >= 0");
  }
  auto threads = parse_int_list("--threads", options.threads, 0, 1024);
  if (!threads) return report_error(threads.status().message());
  nlohmann::json rows = nlohmann::json::array();
  for (int n_threads : *threads) {
    EngineOptions engine_options;
    engine_options.model_path = options.model;
    engine_options.n_threads = n_threads;
    engine_options.n_ctx = std::max(options.n_prompt, options.depth) + options.n_gen + 8;
    engine_options.n_batch = std::max(options.n_prompt, 1);
    auto opened = Engine::open(engine_options);
    if (!opened) return report_error(opened.status().message());
    if (!options.json && rows.empty()) {  // once the model has opened: no empty table before an error
      const std::string at_depth = options.depth > 0 ? fmt::format(" @ d{}", options.depth) : "";
      std::printf("| model | threads | isa | pp%d tok/s | pp GFLOP/s (2·params/token) | tg%d%s tok/s | weights MiB/token "
                  "| weight GB/s | read GB/s | of ceiling |\n",
                  options.n_prompt, options.n_gen, at_depth.c_str());
      std::printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    Engine& engine = **opened;
    const ModelInfo& info = engine.info();
    std::vector<int32_t> prompt(static_cast<size_t>(std::max(options.n_prompt, options.depth)));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 11) % info.n_vocab);
    // Generation starts after `depth` tokens of context (at least one: the first token), untimed.
    const std::vector<int32_t> context(prompt.begin(), prompt.begin() + std::max(options.depth, 1));
    prompt.resize(static_cast<size_t>(options.n_prompt));

    std::vector<double> pp, tg;
    for (int rep = 0; rep <= options.reps; ++rep) {  // rep 0 warms caches and pages
      auto prompt_run = time_request(engine, prompt, 1);
      if (!prompt_run) return report_error(prompt_run.status().message());
      auto gen_run = time_request(engine, context, options.n_gen);
      if (!gen_run) return report_error(gen_run.status().message());
      if (rep == 0) continue;
      pp.push_back(prompt_run->n_prompt_tokens / prompt_run->prompt_seconds);
      tg.push_back((gen_run->n_generated_tokens - 1) / gen_run->generation_seconds);
    }
    // The ceiling, measured now with the engine's thread count, on the machine as loaded during the run above.
    const double bandwidth = measure_read_bandwidth_gbps(info.n_threads);
    const double pp_tps = percentile(pp, 50);
    const double tg_tps = percentile(tg, 50);
    const double pp_gflops = pp_tps * 2.0 * static_cast<double>(info.n_params) / 1e9;
    const double weight_gbps = tg_tps * static_cast<double>(info.weight_bytes_per_token) / 1e9;
    const double spread_tg = tg.size() > 1 ? (*std::max_element(tg.begin(), tg.end()) - *std::min_element(tg.begin(), tg.end())) : 0.0;
    nlohmann::json row = {{"model", options.model},
                          {"architecture", info.architecture},
                          {"threads", info.n_threads},
                          {"isa", info.isa},
                          {"n_prompt", options.n_prompt},
                          {"n_gen", options.n_gen},
                          {"depth", options.depth},
                          {"n_params", info.n_params},
                          {"pp_tokens_per_second", pp_tps},
                          {"pp_gflops_2_params_per_token", pp_gflops},
                          {"tg_tokens_per_second", tg_tps},
                          {"tg_spread", spread_tg},
                          {"weight_bytes_per_token", info.weight_bytes_per_token},
                          {"weight_gbps", weight_gbps},
                          {"read_bandwidth_gbps", bandwidth},
                          {"fraction_of_ceiling", bandwidth > 0 ? weight_gbps / bandwidth : 0.0}};
    rows.push_back(row);
    if (!options.json) {
      std::printf("| %s | %d | %s | %.1f | %.1f | %.1f ± %.1f | %.1f | %.2f | %.2f | %.0f %% |\n", info.name.c_str(),
                  info.n_threads, info.isa.c_str(), pp_tps, pp_gflops, tg_tps, spread_tg / 2,
                  info.weight_bytes_per_token / 1048576.0, weight_gbps, bandwidth,
                  bandwidth > 0 ? 100.0 * weight_gbps / bandwidth : 0.0);
      std::fflush(stdout);
    }
  }
  if (options.json) std::printf("%s\n", rows.dump(1).c_str());
  return 0;
}

// Where rewind_bench_kernels may be: $REWIND_BENCH_KERNELS, then beside the rewind binary (an install), then
// ../bench/ from it (the build tree: build/apps/rewind, build/bench/rewind_bench_kernels).
std::vector<std::filesystem::path> kernel_bench_candidates() {
  std::vector<std::filesystem::path> paths;
  if (const char* env = std::getenv("REWIND_BENCH_KERNELS"); env != nullptr && *env != '\0') {
    paths.emplace_back(env);
    return paths;  // an explicit choice is not second-guessed
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return paths;
  paths.push_back(self.parent_path() / "rewind_bench_kernels");
  paths.push_back((self.parent_path().parent_path() / "bench" / "rewind_bench_kernels").lexically_normal());
  return paths;
}

// Runs the kernels binary in a child process with the arguments after `--` and returns its exit status
// (128 + signal if it was killed, as a shell reports it).
int bench_kernels(const BenchOptions& options) {
  const std::vector<std::filesystem::path> candidates = kernel_bench_candidates();
  std::string binary;
  for (const std::filesystem::path& path : candidates) {
    if (::access(path.c_str(), X_OK) == 0) {
      binary = path.string();
      break;
    }
  }
  if (binary.empty()) {
    std::string tried;
    for (const std::filesystem::path& path : candidates) tried += (tried.empty() ? "" : ", ") + path.string();
    if (tried.empty()) tried = "none (cannot read /proc/self/exe)";
    return report_error("bench kernels: no executable rewind_bench_kernels; tried " + tried +
                        ". Build it (cmake -DREWIND_BUILD_BENCH=ON, target rewind_bench_kernels) or set "
                        "REWIND_BENCH_KERNELS to its path");
  }
  std::vector<char*> argv;
  argv.push_back(binary.data());
  std::vector<std::string> args = options.kernel_args;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) return report_error(std::string("bench kernels: fork failed: ") + std::strerror(errno));
  if (child == 0) {
    ::execv(binary.c_str(), argv.data());
    std::fprintf(stderr, "rewind: bench kernels: cannot run %s: %s\n", binary.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return report_error(std::string("bench kernels: waitpid failed: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "rewind: bench kernels: %s killed by signal %d\n", binary.c_str(), WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return 1;
}

// The decode options, on both `bench` (so `rewind bench -m MODEL` keeps working) and `bench decode`, bound to
// the same variables. -m is checked when the measurement runs rather than marked required, because `bench`
// itself also fronts the kernels and spec subcommands, which take no model or their own.
void add_decode_options(CLI::App& cmd, BenchOptions& options) {
  cmd.add_option("-m,--model", options.model, "GGUF model file (required)");
  cmd.add_option("-t,--threads", options.threads, "thread counts, comma-separated (0 = all cores)")
      ->capture_default_str();
  cmd.add_option("-p,--n-prompt", options.n_prompt, "prompt tokens")->capture_default_str();
  cmd.add_option("-n,--n-gen", options.n_gen, "generated tokens")->capture_default_str();
  cmd.add_option("-d,--depth", options.depth, "tokens of context before generation is timed (tg N @ dD)")
      ->capture_default_str();
  cmd.add_option("-r,--reps", options.reps, "repetitions (median reported)")->capture_default_str();
  cmd.add_flag("--json", options.json, "print JSON instead of a table");
  cmd.add_option("--verify", options.verify,
                 "draft lengths k, comma-separated: measure a verify round of 1 + k tokens against a plain step");
  cmd.add_option("--verify-tree", options.verify_tree,
                 "with --verify: also time each k as a complete tree of k drafted tokens with this many children per "
                 "node (0: chains only)")
      ->capture_default_str();
  cmd.add_option("--rollback", options.rollback, "rollback policies for --verify, comma-separated")
      ->capture_default_str();
  cmd.add_option("--slots", options.slots, "slots verified together for --verify")->capture_default_str();
}

}  // namespace

void register_bench(CLI::App& app, BenchOptions& options, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "measure speed against the machine's ceilings: decode (the default, given -m), kernels, spec");
  cmd->require_subcommand(0, 1);
  add_decode_options(*cmd, options);
  cmd->footer(
      "`rewind bench -m MODEL [options]` with no subcommand runs `bench decode`.\n"
      "  rewind bench decode -m model.gguf -t 1,2           tokens/s, prefill GFLOP/s, decode GB/s vs read bandwidth\n"
      "  rewind bench decode -m model.gguf --verify 1,3     verify round vs plain step, per rollback policy\n"
      "  rewind bench decode -m model.gguf --verify 8 --verify-tree 2   a tree of 8 beside a chain of 8\n"
      "  rewind bench kernels -- --benchmark_filter=Matmul  kernel GB/s vs read bandwidth (Google Benchmark)\n"
      "  rewind bench spec --help                           the speculative-decoding grid");

  CLI::App* decode = cmd->add_subcommand(
      "decode",
      "prompt and generation tokens/s per thread count; prefill GFLOP/s (2·params/token) and decode weight GB/s "
      "against the read bandwidth measured in the same run (what `rewind bench -m MODEL` runs)");
  add_decode_options(*decode, options);
  decode->callback([&options, &exit_code] { exit_code = bench_decode(options); });

  CLI::App* kernels = cmd->add_subcommand(
      "kernels",
      "run the Google Benchmark kernels (matmul GB/s against the measured read bandwidth, prefill FLOP/s, "
      "gated delta); arguments after `--` go to it, e.g. -- --benchmark_filter=Matmul");
  kernels->add_option("args", options.kernel_args, "arguments for rewind_bench_kernels (after --)");
  kernels->callback([&options, &exit_code] { exit_code = bench_kernels(options); });

  register_bench_spec(*cmd, options.spec, exit_code);

  // Runs after any subcommand's callback; with none given, `bench` is `bench decode`.
  cmd->callback([cmd, &options, &exit_code] {
    if (cmd->get_subcommands().empty()) exit_code = bench_decode(options);
  });
}

}  // namespace rwd::apps
