// rewind: one binary, subcommands run, serve, inspect, mkmodel, bench. Each subcommand lives in its own file
// and uses only the public API (include/rewind).
#include <CLI/CLI.hpp>

#include <string_view>
#include <vector>

#include "commands.h"

int main(int argc, char** argv) {
  // llama.cpp's multi-letter single-dash flags, which CLI11 cannot name: spelled as the long options they are.
  std::vector<char*> args(argv, argv + argc);
  for (char*& arg : args) {
    if (std::string_view(arg) == "-ctk") arg = const_cast<char*>("--cache-type-k");
    if (std::string_view(arg) == "-ctv") arg = const_cast<char*>("--cache-type-v");
  }
  argv = args.data();
  CLI::App app{"rewind: exact, fast speculative decoding for hybrid attention/recurrent LLMs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "rewind 0.1.0");
  int exit_code = 0;
  rwd::apps::RunOptions run_options;
  rwd::apps::register_run(app, run_options, exit_code);
  rwd::apps::InspectOptions inspect_options;
  rwd::apps::register_inspect(app, inspect_options, exit_code);
  rwd::apps::MkModelOptions mkmodel_options;
  rwd::apps::register_mkmodel(app, mkmodel_options, exit_code);
  rwd::apps::ServeOptions serve_options;
  rwd::apps::register_serve(app, serve_options, exit_code);
  rwd::apps::BenchOptions bench_options;
  rwd::apps::register_bench(app, bench_options, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return exit_code;
}
