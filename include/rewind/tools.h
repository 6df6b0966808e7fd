// Helpers behind the CLI's inspect, mkmodel --twin-of and bench subcommands, kept behind the public API so the
// apps never touch GGUF, tensors or kernels directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace rwd {

struct TensorSummary {
  std::string name;
  std::string type;
  std::vector<int64_t> shape;  // outermost first
  uint64_t n_bytes = 0;
};

struct FileSummary {
  std::string path;
  uint32_t version = 0;
  uint64_t file_bytes = 0;
  std::vector<std::pair<std::string, std::string>> metadata;  // key, rendered value
  std::vector<TensorSummary> tensors;
};

// Reads a GGUF file's metadata and tensor directory (no model is built).
Result<FileSummary> inspect_file(const std::string& path);

struct TwinModelOptions {
  std::string source_path;
  float noise = 0.1f;  // standard deviation of the added noise, relative to each row's RMS; [0, 10]
  uint64_t seed = 1;
  std::string output_path;
};

// Writes a copy of a GGUF model whose matrices (2+ dims) carry seeded Gaussian noise, w + noise * rms(row) * N(0,1),
// and whose metadata, tokenizer, tensor names, types, shapes and 1-D tensors are unchanged. A draft model made
// this way shares the target's vocabulary and agrees with it only part of the time, which is what the
// speculative-decoding tests need and what a real small model of the same family cannot be tuned to do.
// Quantized matrices are dequantized, perturbed and requantized to their own type; noise 0 copies the bytes.
Status make_twin_model(const TwinModelOptions& options);

// The cost of a speculative verify round against a plain decode step, per rollback policy: after a prompt,
// each slot alternately decodes one token plainly, or verifies 1 + k tokens in a transaction and keeps the
// first (the worst case: the whole draft rejected). Both advance the sequence by one token, so the ratio is
// what a round costs over a step. Medians of reps.
struct VerifyCostOptions {
  std::string model_path;
  int n_threads = 0;
  int n_slots = 1;
  int n_prompt = 64;
  std::vector<int> draft_lengths{1, 2, 4, 8};
  std::vector<std::string> policies{"replay", "snapshot", "checkpoint"};
  int reps = 20;
  // > 0: also time each k as a tree of k drafted tokens, each node with up to this many children (a complete
  // tree laid out depth first), beside the chain of k; policies that refuse trees (checkpoint) skip it.
  int tree_branching = 0;
};

struct VerifyCost {
  std::string policy;
  int draft_length = 0;              // k: the verify batch has 1 + k tokens per slot
  int tree_branching = 0;            // 0: the k tokens are a chain; else a tree with this branching
  double plain_seconds = 0.0;        // one plain step of all slots
  double round_seconds = 0.0;        // one verify round of all slots (forward + commit)
  size_t bytes_written_per_round = 0;  // by the rollback machinery, all slots
  size_t bytes_copied_per_round = 0;   // of which full-state copies
  size_t state_bytes = 0;            // recurrent state + what the policy keeps beside it, all slots
};

Result<std::vector<VerifyCost>> measure_verify_cost(const VerifyCostOptions& options);

// Streams a buffer much larger than the caches with n_threads readers and returns GB/s (1e9 bytes/s):
// the ceiling a memory-bound decode step can reach on this machine.
double measure_read_bandwidth_gbps(int n_threads);

}  // namespace rwd
