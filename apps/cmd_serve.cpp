// `rewind serve`: the OpenAI-compatible HTTP server, with flags in the spirit of llama-server's.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <thread>

#include "commands.h"
#include "rewind/server.h"

namespace rwd::apps {
namespace {

int serve(const ServeOptions& options) {
  server::ServerOptions server_options;
  server_options.engine = options.engine;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.api_key = options.api_key;
  server_options.cors_origin = options.cors_origin;
  server_options.max_queue = options.max_queue;
  server_options.timeout_seconds = options.timeout_seconds;
  server_options.read_timeout_seconds = options.read_timeout_seconds;
  server_options.max_connections = options.max_connections;
  server_options.model_alias = options.alias;
  auto created = server::Server::create(server_options);
  if (!created) return report_error(created.status().message());
  server::Server& server = **created;

  // Every thread the server starts inherits the blocked mask, so SIGINT and SIGTERM reach only sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::atomic<bool> server_stopping{false};
  const Status started = server.start();
  if (!started) return report_error(started.message());
  std::fprintf(stderr, "rewind serve: listening on http://%s:%d (model loading; GET /health says when ready)\n",
               options.host.c_str(), server.port());
  // SIGTERM (what systemd and Kubernetes send) drains: admitted requests finish, new ones get 503 so a load
  // balancer retries them elsewhere, then the server exits; a second signal, or SIGINT, or the drain timeout
  // stops at once, ending open requests with an error.
  std::thread signal_waiter([&] {
    int received = 0;
    sigwait(&stop_signals, &received);
    if (received == SIGTERM && !server_stopping.load()) {
      std::fprintf(stderr, "rewind serve: terminated, draining (up to %d s; send it again to stop now)\n",
                   options.drain_timeout_seconds);
      server.drain();
      const timespec drain_timeout{options.drain_timeout_seconds, 0};
      if (sigtimedwait(&stop_signals, nullptr, &drain_timeout) < 0 && !server_stopping.load()) {
        std::fprintf(stderr, "rewind serve: drain timed out, stopping\n");
      }
    } else if (!server_stopping.load()) {
      std::fprintf(stderr, "rewind serve: %s, stopping\n", received == SIGINT ? "interrupted" : "terminated");
    }
    server.stop();
  });
  const Status ended = server.wait();
  server_stopping = true;
  server.stop();
  // Wake the signal thread if it is still waiting (a drain ended, or the server stopped after a failure).
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  if (!ended) return report_error(ended.message());
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, ServeOptions& options, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with slots and speculative decoding");
  options.engine.n_slots = 4;
  options.engine.cache_ram_mib = 1024;
  cmd->add_option("-m,--model", options.engine.model_path, "GGUF model file")->required();
  cmd->add_option("--host", options.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", options.port, "port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--alias", options.alias, "model id clients see (default: the file name)");
  cmd->add_option("-s,--slots,--parallel", options.engine.n_slots, "requests decoded together")
      ->capture_default_str();
  cmd->add_option("-c,--ctx-size", options.engine.n_ctx, "context size of each slot, in tokens")->capture_default_str();
  cmd->add_option("-t,--threads", options.engine.n_threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_option("-b,--batch-size", options.engine.n_batch,
                  "most tokens per forward: the per-step budget that prompt chunks share with decoding slots")
      ->capture_default_str();
  cmd->add_option("--chat-template", options.engine.chat_template,
                  "built-in chat template instead of the model's own tokenizer.chat_template: chatml, gemma, llama3 "
                  "(a model without one gets ChatML, or Gemma's for Gemma files)");
  cmd->add_option("--cors", options.cors_origin,
                  "allow browser pages from this origin (e.g. https://app.example; \"*\": any page) to call the API; "
                  "default: none");
  cmd->add_option("--api-key", options.api_key, "require Authorization: Bearer KEY on /v1, /metrics and /slots");
  cmd->add_option("--max-queue", options.max_queue, "requests waiting for a slot before answering 429")
      ->capture_default_str();
  cmd->add_option("--timeout", options.timeout_seconds,
                  "seconds a client may go without reading its answer before the connection is dropped")
      ->capture_default_str();
  cmd->add_option("--read-timeout", options.read_timeout_seconds,
                  "seconds a client may go without sending while its request is read (slow senders are cut off)")
      ->capture_default_str();
  cmd->add_option("--max-connections", options.max_connections,
                  "open connections served at once, one thread each; beyond, 503 (raised toward ulimit -n as needed)")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", options.drain_timeout_seconds,
                  "on SIGTERM, seconds to let admitted requests finish before stopping")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  cmd->add_option("--cache-ram", options.engine.cache_ram_mib,
                  "MiB of host memory for prompt reuse: checkpoints of the recurrent state, and archives of "
                  "conversations whose slot went to another (0: none; a slot's own state is reused either way)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", options.engine.checkpoint_every,
                  "with --cache-ram: a checkpoint every N tokens of long prompts, besides one at each prompt's end")
      ->capture_default_str();
  add_speculation_options(*cmd, options.engine, "none, ngram, draft, mtp (requests may turn it off or draft less)");
  add_cache_type_options(*cmd, options.engine);
  cmd->callback([&options, &exit_code] { exit_code = serve(options); });
}

}  // namespace rwd::apps
