// `rewind inspect MODEL`: the GGUF header, metadata and tensor directory, and whether rewind can run it.
#include <cstdio>
#include <map>

#include "commands.h"
#include "rewind/tools.h"

namespace rwd::apps {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return text + "]";
}

int inspect(const InspectOptions& options) {
  auto summary = inspect_file(options.model);
  if (!summary) return report_error(summary.status().message());
  std::printf("file: %s\nformat: GGUF v%u, %.2f MiB, %zu metadata keys, %zu tensors\n\nmetadata:\n",
              summary->path.c_str(), summary->version, summary->file_bytes / 1048576.0, summary->metadata.size(),
              summary->tensors.size());
  for (const auto& [key, value] : summary->metadata) std::printf("  %-45s %s\n", key.c_str(), value.c_str());
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;
  std::printf("\ntensors:\n");
  for (const TensorSummary& t : summary->tensors) {
    std::printf("  %-40s %-6s %-20s %10.3f MiB\n", t.name.c_str(), t.type.c_str(), shape_text(t.shape).c_str(),
                t.n_bytes / 1048576.0);
    by_type[t.type].first += 1;
    by_type[t.type].second += t.n_bytes;
  }
  std::printf("\ntensor types:\n");
  for (const auto& [type, count_bytes] : by_type) {
    std::printf("  %-6s %4zu tensors %10.2f MiB\n", type.c_str(), count_bytes.first, count_bytes.second / 1048576.0);
  }
  EngineOptions engine_options;
  engine_options.model_path = options.model;
  engine_options.n_threads = 1;
  engine_options.n_ctx = 64;
  auto engine = Engine::open(engine_options);
  if (!engine) {
    std::printf("\nrunnable: no: %s\n", engine.status().message().c_str());
    return 0;
  }
  const ModelInfo& info = (*engine)->info();
  std::printf("\nrunnable: yes: %s '%s', %lld layers, n_embd %lld, vocab %lld, %.1f M parameters\n",
              info.architecture.c_str(), info.name.c_str(), static_cast<long long>(info.n_layer),
              static_cast<long long>(info.n_embd), static_cast<long long>(info.n_vocab), info.n_params / 1e6);
  std::printf("state per slot: kv %.1f KiB per position, conv %.1f KiB, recurrent %.1f KiB\n",
              info.kv_bytes_per_slot / 64.0 / 1024.0, info.conv_bytes_per_slot / 1024.0,
              info.recurrent_bytes_per_slot / 1024.0);
  std::printf("weights read per decoded token: %.2f MiB\n", info.weight_bytes_per_token / 1048576.0);
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app, InspectOptions& options, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("inspect", "print a GGUF file's metadata and tensors");
  cmd->add_option("model", options.model, "GGUF file")->required();
  cmd->callback([&options, &exit_code] { exit_code = inspect(options); });
}

}  // namespace rwd::apps
