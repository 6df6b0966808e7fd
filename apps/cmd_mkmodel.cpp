// `rewind mkmodel`: write a random-weight GGUF model of a preset shape, for tests and benchmarks.
#include <cstdio>

#include "commands.h"
#include "rewind/tools.h"

namespace rwd::apps {

void register_mkmodel(CLI::App& app, MkModelOptions& options, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("mkmodel", "write a random-weight GGUF model for tests and benchmarks");
  cmd->add_option("--arch", options.arch, "architecture")->required();
  cmd->add_option("--preset", options.preset, "tiny | small")->capture_default_str();
  cmd->add_option("--dtype", options.dtype, "weight type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k")
      ->capture_default_str();
  cmd->add_option("--seed", options.seed, "random seed")->capture_default_str();
  cmd->add_option("-o,--output", options.output, "output file")->required();
  cmd->callback([&options, &exit_code] {
    SyntheticModelOptions synthetic{options.arch, options.preset, options.dtype, options.seed, options.output};
    Status status = make_synthetic_model(synthetic);
    if (!status) {
      exit_code = report_error(status.message());
      return;
    }
    std::fprintf(stderr, "wrote %s\n", options.output.c_str());
    exit_code = 0;
  });
}

}  // namespace rwd::apps
