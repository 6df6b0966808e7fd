// `rewind run`: generate text for one prompt, streamed to stdout, or one JSON object with --json.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"

namespace rwd::apps {
namespace {

Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const size_t begin = item.find_first_not_of(" \t");
    const size_t end = item.find_last_not_of(" \t");
    if (begin == std::string::npos) return Status::errorf("--prompt-ids: empty item in '{}'", text);
    const std::string trimmed = item.substr(begin, end - begin + 1);
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(trimmed, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != trimmed.size() || value < 0 || value > INT32_MAX) {
      return Status::errorf("--prompt-ids: '{}' is not a token id (a non-negative integer)", trimmed);
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  if (ids.empty()) return Status::error("--prompt-ids: no ids given");
  return ids;
}

Result<std::vector<int32_t>> build_prompt(const Engine& engine, const RunOptions& options) {
  if (!options.prompt_ids.empty()) {
    if (!options.prompt.empty() || options.chat) return Status::error("--prompt-ids cannot be combined with -p or --chat");
    return parse_ids(options.prompt_ids);
  }
  if (options.prompt.empty()) return Status::error("no prompt: give -p TEXT or --prompt-ids 1,2,3");
  if (options.chat) {
    std::vector<ChatMessage> messages;
    if (!options.system.empty()) messages.push_back({"system", options.system});
    messages.push_back({"user", options.prompt});
    REWIND_ASSIGN_OR_RETURN(std::string formatted, engine.format_chat(messages));
    // Formatted chats never contain BOS as text; the tokenizer adds it where the model wants one.
    return engine.tokenize(formatted, engine.add_bos_default(), /*parse_special=*/true);
  }
  return engine.tokenize(options.prompt, engine.add_bos_default(), /*parse_special=*/true);
}

const char* finish_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::length: return "length";
    case FinishReason::eos: return "stop";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
    case FinishReason::none: break;
  }
  return "none";
}

int run(RunOptions& options) {
  if (options.n_predict < 1) return report_error(fmt::format("-n must be at least 1, got {}", options.n_predict));
  if (!options.seed_given) options.sampling.seed = std::random_device{}();
  const bool show_progress = !options.json && ::isatty(STDERR_FILENO);
  options.engine.on_load_progress = [show_progress](double fraction) {
    if (!show_progress) return;
    std::fprintf(stderr, "\rloading model: %3.0f%%", fraction * 100.0);
    if (fraction >= 1.0) std::fprintf(stderr, "\n");
  };
  auto opened = Engine::open(options.engine);
  if (!opened) return report_error(opened.status().message());
  Engine& engine = **opened;
  auto prompt = build_prompt(engine, options);
  if (!prompt) return report_error(prompt.status().message());

  Request request;
  request.prompt_ids = *prompt;
  request.max_tokens = options.n_predict;
  request.sampling = options.sampling;
  request.ignore_eos = options.ignore_eos;
  request.top_logprobs = options.top_logprobs;

  std::vector<int32_t> ids;
  std::string text;
  nlohmann::json top_logprobs = nlohmann::json::array();
  FinishReason finish_reason = FinishReason::none;
  const bool stream = !options.json;
  auto submitted = engine.submit(request, [&](const TokenEvent& event) {
    if (event.token >= 0) {
      ids.push_back(event.token);
      if (options.top_logprobs > 0) {
        nlohmann::json step = nlohmann::json::array();
        for (const TokenLogprob& entry : event.top) step.push_back({{"id", entry.id}, {"logprob", entry.logprob}});
        top_logprobs.push_back(step);
      }
    }
    text += event.text;
    if (stream && !event.text.empty()) {
      std::fwrite(event.text.data(), 1, event.text.size(), stdout);
      std::fflush(stdout);
    }
    if (event.done) finish_reason = event.finish_reason;
  });
  if (!submitted) return report_error(submitted.status().message());
  while (!engine.idle()) {
    Status status = engine.step();
    if (!status) return report_error(status.message());
  }
  const RequestTimings timings = engine.timings(*submitted);
  const double prompt_tps = timings.prompt_seconds > 0 ? timings.n_prompt_tokens / timings.prompt_seconds : 0.0;
  const double gen_tps = timings.generation_seconds > 0 && timings.n_generated_tokens > 1
                             ? (timings.n_generated_tokens - 1) / timings.generation_seconds
                             : 0.0;
  if (options.json) {
    nlohmann::json out;
    out["model"] = {{"architecture", engine.info().architecture}, {"name", engine.info().name}};
    out["prompt_ids"] = request.prompt_ids;
    out["ids"] = ids;
    out["text"] = text;
    out["finish_reason"] = finish_name(finish_reason);
    out["seed"] = options.sampling.seed;
    out["timings"] = {{"prompt_tokens", timings.n_prompt_tokens},
                      {"prompt_seconds", timings.prompt_seconds},
                      {"prompt_tokens_per_second", prompt_tps},
                      {"generated_tokens", timings.n_generated_tokens},
                      {"generation_seconds", timings.generation_seconds},
                      {"generation_tokens_per_second", gen_tps}};
    out["state"] = {{"kv", engine.info().kv_bytes_per_slot},
                    {"conv", engine.info().conv_bytes_per_slot},
                    {"recurrent", engine.info().recurrent_bytes_per_slot}};
    if (options.top_logprobs > 0) out["top_logprobs"] = top_logprobs;
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    std::fflush(stdout);  // the text ends before the timing line when both go to one terminal or pipe
    std::fprintf(stderr, "prompt: %lld tokens, %.1f tokens/s | generation: %lld tokens, %.1f tokens/s | %s\n",
                 static_cast<long long>(timings.n_prompt_tokens), prompt_tps,
                 static_cast<long long>(timings.n_generated_tokens), gen_tps, finish_name(finish_reason));
  }
  return 0;
}

}  // namespace

void register_run(CLI::App& app, RunOptions& options, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  cmd->add_option("-m,--model", options.engine.model_path, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", options.prompt, "prompt text");
  cmd->add_option("--prompt-ids", options.prompt_ids, "prompt as comma-separated token ids (no BOS added)");
  cmd->add_option("--system", options.system, "system message for --chat");
  cmd->add_option("-n,--n-predict", options.n_predict, "tokens to generate")->capture_default_str();
  cmd->add_option("--temp", options.sampling.temperature, "temperature (0 = greedy)")->capture_default_str()
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", options.sampling.top_k, "top-k (0 = off)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", options.sampling.top_p, "top-p (1 = off)")->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", options.sampling.min_p, "min-p (0 = off)")->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", options.sampling.repetition_penalty, "repetition penalty (1 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", options.sampling.repeat_last_n, "tokens the penalty looks back over")
      ->capture_default_str();
  auto* seed = cmd->add_option("--seed", options.sampling.seed, "sampling seed (default: random)");
  cmd->add_flag("--ignore-eos", options.ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_option("-t,--threads", options.engine.n_threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_option("-c,--ctx-size", options.engine.n_ctx, "context size in tokens")->capture_default_str();
  cmd->add_option("-b,--batch-size", options.engine.n_batch, "most tokens per forward")->capture_default_str();
  cmd->add_flag("--chat", options.chat, "apply the model's chat template to the prompt");
  cmd->add_option("--chat-template", options.engine.chat_template,
                  "chat format when the model has none or another is wanted: chatml, gemma, llama3");
  cmd->add_flag("--json", options.json, "print one JSON object with ids, text and timings");
  cmd->add_option("--top-logprobs", options.top_logprobs, "report the K most likely tokens per step")
      ->check(CLI::Range(0, 100));
  cmd->callback([&options, &exit_code, seed] {
    options.seed_given = seed->count() > 0;
    exit_code = run(options);
  });
}

}  // namespace rwd::apps
