// Subcommand registration for the rewind binary. Each register_* adds a CLI11 subcommand whose callback
// runs the command and stores the process exit status in `exit_code`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "rewind/engine.h"

namespace rwd::apps {

struct RunOptions {
  rwd::EngineOptions engine;
  std::string prompt;
  std::string prompt_ids;
  std::string system;
  int n_predict = 128;
  rwd::SamplingParams sampling;
  bool seed_given = false;
  bool ignore_eos = false;
  bool chat = false;
  bool json = false;
  int top_logprobs = 0;
  std::string prompts_file;
};
void register_run(CLI::App& app, RunOptions& options, int& exit_code);

struct InspectOptions {
  std::string model;
  bool all_metadata = false;
};
void register_inspect(CLI::App& app, InspectOptions& options, int& exit_code);

struct MkModelOptions {
  std::string arch;      // a generated model's architecture; empty with twin_of
  std::string preset = "tiny";
  std::string dtype = "f32";
  std::string twin_of;   // non-empty: copy this model with noise instead of generating one
  float noise = 0.1f;
  uint64_t seed = 1;
  std::string output;
};
void register_mkmodel(CLI::App& app, MkModelOptions& options, int& exit_code);

// `rewind bench spec`: the speculative-decoding grid (workloads × slots × proposers × policies × draft lengths).
struct BenchSpecOptions {
  std::string model;
  std::string draft_model;
  int64_t draft_vocab = rwd::SpecOptions::kDraftVocabAuto;
  std::string prompts;                                // JSONL files, comma-separated: one workload each
  std::string spec = "ngram";                         // proposers, comma-separated
  std::string rollback = "replay,snapshot,checkpoint";
  std::string draft_max = "1,3,7";
  std::string tree_nodes = "0";  // tree budgets, comma-separated (0: chains)
  int tree_topk = SpecOptions{}.tree_topk;
  std::string slots = "1,4";
  int reps = 3;
  int n_gen = 64;
  int n_threads = 0;
  int n_ctx = 2048;
  int max_prompts = 0;  // 0: every prompt of each workload
  double oracle_error_rate = 0.3;
  int ngram_min = SpecOptions{}.ngram_min;
  int ngram_max = SpecOptions{}.ngram_max;
  double temperature = 0.0;  // 0: greedy, and every speculative output must equal the plain one
  uint64_t seed = 1;         // sampled runs: request i of every configuration samples from seed + i
  bool adaptive = true;
  double assumed_verify_token = 0.0;  // --assume-costs (SpecOptions::assumed_verify_token)
  double assumed_draft_token = 0.0;
  bool chat = false;
  bool quick = false;
  bool interleave = false;  // the configurations of a workload and slot count take turns rep by rep
  bool json = false;
  std::string out;
};
void register_bench_spec(CLI::App& bench, BenchSpecOptions& options, int& exit_code);

// `rewind bench [decode]`, `rewind bench kernels`; `spec` carries the speculative grid's options.
struct BenchOptions {
  std::string model;
  std::string threads = "0";
  int n_prompt = 64;
  int n_gen = 64;
  int depth = 0;  // context tokens before generation is timed (llama-bench's -d)
  int reps = 3;
  bool json = false;
  std::string verify;
  int verify_tree = 0;  // --verify-tree B: also tree rounds of B children per node
  std::string rollback = "replay,snapshot,checkpoint";
  int slots = 1;
  std::vector<std::string> kernel_args;  // `rewind bench kernels -- ARGS`: passed to rewind_bench_kernels
  BenchSpecOptions spec;
};
void register_bench(CLI::App& app, BenchOptions& options, int& exit_code);

struct ServeOptions {
  rwd::EngineOptions engine;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int max_queue = 64;
  int timeout_seconds = 600;
  int read_timeout_seconds = 30;
  int max_connections = 1024;
  int drain_timeout_seconds = 600;
  std::string alias;
  std::string cors_origin;
};
void register_serve(CLI::App& app, ServeOptions& options, int& exit_code);

// The comma-separated items of a flag's value; an empty item, or none, is an error naming the flag.
Result<std::vector<std::string>> split_list(const std::string& flag, const std::string& text);
// The same for integers, each in [min, max].
Result<std::vector<int>> parse_int_list(const std::string& flag, const std::string& text, int min, int max);
// The p-th percentile (p in [0, 100]), interpolating linearly between closest ranks as numpy does by default;
// 0 for no values. percentile(v, 50) is the median.
double percentile(std::vector<double> values, double p);

// The speculation flags `run` and `serve` share: --spec (choices: `modes`), --draft-model, --draft-max,
// --draft-min, --rollback, --ngram-min/max, --fixed-draft, --assume-costs and --rewind-depth.
void add_speculation_options(CLI::App& cmd, rwd::EngineOptions& engine, const std::string& modes);
// --draft-vocab N|auto into SpecOptions::draft_vocab (auto: SpecOptions::kDraftVocabAuto).
void add_draft_vocab_option(CLI::App& cmd, int64_t& draft_vocab);
// --assume-costs VERIFY[,DRAFT] into SpecOptions::assumed_verify_token and assumed_draft_token.
void add_assume_costs_option(CLI::App& cmd, double& verify_token, double& draft_token);
// --cache-type-k/-v, defaulting to f16.
void add_cache_type_options(CLI::App& cmd, rwd::EngineOptions& engine);

// Prints "rewind: <message>" to stderr and returns exit status 1.
int report_error(const std::string& message);

}  // namespace rwd::apps
