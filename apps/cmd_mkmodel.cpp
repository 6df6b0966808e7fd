// `rewind mkmodel`: write a random-weight GGUF model of a preset shape, or (--twin-of) a noisy copy of an
// existing model to serve as a partly agreeing draft model, for tests and benchmarks.
#include <cstdio>

#include "commands.h"
#include "rewind/tools.h"
#include "synthetic/synthetic_model.h"

namespace rwd::apps {
namespace {

// A twin copies its source's architecture, shape and types, so the options that choose those for a
// generated model make no sense beside --twin-of; refusing them beats silently ignoring them.
Status check_mode(const MkModelOptions& options, const CLI::Option* noise, const CLI::Option* preset,
                  const CLI::Option* dtype) {
  if (options.twin_of.empty()) {
    if (options.arch.empty()) return Status::error("mkmodel: --arch or --twin-of is required");
    if (noise->count() > 0) return Status::error("mkmodel: --noise applies only with --twin-of");
    return Status::ok();
  }
  if (!options.arch.empty()) {
    return Status::errorf("mkmodel: --arch {} conflicts with --twin-of: a twin keeps the architecture of {}",
                          options.arch, options.twin_of);
  }
  for (const CLI::Option* option : {preset, dtype}) {
    if (option->count() > 0) {
      return Status::errorf("mkmodel: {} conflicts with --twin-of: a twin keeps the shapes and types of {}",
                            option->get_name(), options.twin_of);
    }
  }
  return Status::ok();
}

}  // namespace

void register_mkmodel(CLI::App& app, MkModelOptions& options, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("mkmodel", "write a random-weight GGUF model, or a noisy twin of a model");
  cmd->add_option("--arch", options.arch, "architecture (required unless --twin-of)");
  auto* preset = cmd->add_option("--preset", options.preset, "tiny | small")->capture_default_str();
  auto* dtype = cmd->add_option("--dtype", options.dtype,
                                "weight type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k")
                    ->capture_default_str();
  cmd->add_option("--twin-of", options.twin_of,
                  "copy this GGUF model with noise on its matrices (a draft that agrees only part of the time)");
  auto* noise = cmd->add_option("--noise", options.noise,
                                "with --twin-of: noise standard deviation relative to each row's RMS, in [0, 10]")
                    ->capture_default_str();
  cmd->add_option("--seed", options.seed, "random seed")->capture_default_str();
  cmd->add_option("-o,--output", options.output, "output file")->required();
  cmd->callback([&options, &exit_code, noise, preset, dtype] {
    Status status = check_mode(options, noise, preset, dtype);
    if (status && !options.twin_of.empty()) {
      status = make_twin_model({options.twin_of, options.noise, options.seed, options.output});
    } else if (status) {
      status = make_synthetic_model({options.arch, options.preset, options.dtype, options.seed, options.output});
    }
    if (!status) {
      exit_code = report_error(status.message());
      return;
    }
    std::fprintf(stderr, "wrote %s\n", options.output.c_str());
    exit_code = 0;
  });
}

}  // namespace rwd::apps
