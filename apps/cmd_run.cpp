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

std::vector<ChatMessage> chat_messages(const RunOptions& options) {
  std::vector<ChatMessage> messages;
  if (!options.system.empty()) messages.push_back({"system", options.system});
  messages.push_back({"user", options.prompt});
  return messages;
}

// The text -p (and --chat) asks for, special tokens spelled out.
Result<std::string> prompt_text(const Engine& engine, const RunOptions& options) {
  if (!options.chat) return options.prompt;
  return engine.format_chat(chat_messages(options));
}

Result<std::vector<int32_t>> build_prompt(const Engine& engine, const RunOptions& options) {
  if (!options.prompt_ids.empty()) {
    if (!options.prompt.empty() || options.chat) return Status::error("--prompt-ids cannot be combined with -p or --chat");
    return parse_ids(options.prompt_ids);
  }
  if (options.prompt.empty()) return Status::error("no prompt: give -p TEXT or --prompt-ids 1,2,3");
  // --chat: a control token spelled in -p or --system stays text, as in the server's chats; a plain -p is the
  // whole prompt and may spell them.
  if (options.chat) return engine.tokenize_chat(chat_messages(options));
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

// One prompt's request and what came back for it.
struct Output {
  Request request;
  int64_t id = 0;
  std::vector<int32_t> ids;
  std::string text;
  nlohmann::json top_logprobs = nlohmann::json::array();
  FinishReason finish_reason = FinishReason::none;
};

Result<std::vector<std::vector<int32_t>>> build_prompts(const Engine& engine, RunOptions& options) {
  if (options.prompts_file.empty()) {
    REWIND_ASSIGN_OR_RETURN(std::vector<int32_t> ids, build_prompt(engine, options));
    return std::vector<std::vector<int32_t>>{std::move(ids)};
  }
  if (!options.prompt.empty() || !options.prompt_ids.empty()) {
    return Status::error("--prompts-file cannot be combined with -p or --prompt-ids");
  }
  std::ifstream file(options.prompts_file);
  if (!file) return Status::errorf("--prompts-file: cannot open '{}'", options.prompts_file);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  int line_number = 0;
  while (std::getline(file, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    options.prompt = line;
    auto ids = build_prompt(engine, options);
    if (!ids) return ids.status().with_context(fmt::format("{} line {}", options.prompts_file, line_number));
    prompts.push_back(std::move(*ids));
  }
  options.prompt.clear();
  if (prompts.empty()) return Status::errorf("--prompts-file: '{}' has no prompts (one per line)", options.prompts_file);
  return prompts;
}

nlohmann::json spec_json(const SpecStats& spec, const RunOptions& options) {
  nlohmann::json out;
  out["mode"] = options.engine.spec.mode;
  out["rollback"] = options.engine.spec.rollback;
  out["rounds"] = spec.rounds;
  out["drafted"] = spec.drafted;
  out["accepted"] = spec.accepted;
  out["acceptance_rate"] = spec.drafted > 0 ? static_cast<double>(spec.accepted) / spec.drafted : 0.0;
  nlohmann::json by_position = nlohmann::json::array();
  for (size_t i = 0; i < spec.drafted_by_position.size(); ++i) {
    const int64_t drafted = spec.drafted_by_position[i];
    by_position.push_back({{"drafted", drafted},
                           {"accepted", spec.accepted_by_position[i]},
                           {"rate", drafted > 0 ? static_cast<double>(spec.accepted_by_position[i]) / drafted : 0.0}});
  }
  out["acceptance_by_position"] = by_position;
  out["rollbacks"] = spec.rollbacks;
  out["rollback_bytes_written"] = spec.rollback_bytes_written;
  out["rollback_bytes_copied"] = spec.rollback_bytes_copied;
  const SpecOptions& spec_options = options.engine.spec;
  out["policy"] = {{"adaptive", spec_options.adaptive},
                   {"assumed_costs", spec_options.assumed_verify_token > 0.0
                                         ? nlohmann::json{{"verify_token", spec_options.assumed_verify_token},
                                                {"draft_token", spec_options.assumed_draft_token}}
                                         : nlohmann::json()},
                   {"plain_steps", spec.plain_steps},
                   {"fallbacks", spec.fallbacks},
                   {"budget_plain_steps", spec.budget_plain_steps},
                   {"budget_balance", spec.budget_balance},
                   {"rounds_by_length", spec.rounds_by_length},
                   {"final_acceptance_estimate", spec.final_acceptance_estimate}};
  return out;
}

nlohmann::json state_json(const StateReport& state) {
  return {{"rollback", state.rollback},
          {"slots", state.n_slots},
          {"draft_max", state.max_draft},
          {"kv", state.kv},
          {"conv", state.conv},
          {"recurrent", state.recurrent},
          {"records", state.records},
          {"snapshots", state.snapshots},
          {"checkpoint_copies", state.checkpoint_copies},
          {"scratch", state.scratch},
          {"rewind", state.rewind},
          {"draft_model", state.draft_model},
          {"tree_nodes", state.tree_nodes},
          {"bytes_per_node", state.bytes_per_node},
          {"full_state_per_node", state.full_state_per_node}};
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
  // Several prompts decode together, one slot each, unless fewer slots are asked for (the rest then queue).
  // The prompts are counted before the engine opens, so each gets a slot.
  if (!options.prompts_file.empty() && options.engine.n_slots == 0) {
    std::ifstream file(options.prompts_file);
    std::string line;
    int n = 0;
    while (std::getline(file, line)) n += line.find_first_not_of(" \t\r") != std::string::npos ? 1 : 0;
    options.engine.n_slots = std::max(n, 1);
  }
  if (options.engine.n_slots == 0) options.engine.n_slots = 1;
  auto opened = Engine::open(options.engine);
  if (!opened) return report_error(opened.status().message());
  Engine& engine = **opened;
  auto prompts = build_prompts(engine, options);
  if (!prompts) return report_error(prompts.status().message());

  // The oracle drafts the target's own output: a first pass decodes it (no drafts), the measured pass follows.
  const bool oracle = options.engine.spec.mode == "oracle";
  std::vector<Output> outputs(prompts->size());
  for (int pass = oracle ? 0 : 1; pass < 2; ++pass) {
    const bool stream = !options.json && prompts->size() == 1 && pass == 1;
    std::vector<Output> previous = std::move(outputs);
    outputs.assign(prompts->size(), Output{});
    for (size_t i = 0; i < prompts->size(); ++i) {
      Output& output = outputs[i];
      output.request.prompt_ids = (*prompts)[i];
      output.request.max_tokens = options.n_predict;
      output.request.sampling = options.sampling;
      output.request.ignore_eos = options.ignore_eos;
      output.request.top_logprobs = options.top_logprobs;
      if (pass == 1 && oracle) output.request.oracle_ids = previous[i].ids;
      auto submitted = engine.submit(output.request, [&output, &options, stream](const TokenEvent& event) {
        if (event.token >= 0) {
          output.ids.push_back(event.token);
          if (options.top_logprobs > 0) {
            nlohmann::json step = nlohmann::json::array();
            for (const TokenLogprob& entry : event.top) step.push_back({{"id", entry.id}, {"logprob", entry.logprob}});
            output.top_logprobs.push_back(step);
          }
        }
        output.text += event.text;
        if (stream && !event.text.empty()) {
          std::fwrite(event.text.data(), 1, event.text.size(), stdout);
          std::fflush(stdout);
        }
        if (event.done) output.finish_reason = event.finish_reason;
      });
      if (!submitted) {
        return report_error(prompts->size() == 1 ? submitted.status().message()
                                                 : fmt::format("prompt {}: {}", i + 1, submitted.status().message()));
      }
      output.id = *submitted;
    }
    while (!engine.idle()) {
      Status status = engine.step();
      if (!status) return report_error(status.message());
    }
  }
  const bool stream = !options.json && prompts->size() == 1;
  const StateReport state = engine.state_report();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Output& output = outputs[i];
    const RequestTimings timings = engine.timings(output.id);
    const double prompt_tps = timings.prompt_seconds > 0 ? timings.n_prompt_tokens / timings.prompt_seconds : 0.0;
    const double gen_tps = timings.generation_seconds > 0 && timings.n_generated_tokens > 1
                               ? (timings.n_generated_tokens - 1) / timings.generation_seconds
                               : 0.0;
    if (options.json) {
      nlohmann::json out;
      out["model"] = {{"architecture", engine.info().architecture}, {"name", engine.info().name}};
      if (outputs.size() > 1) out["prompt_index"] = i;
      out["prompt_ids"] = output.request.prompt_ids;
      // The prompt as text, special tokens spelled out, so another engine can be handed the same prompt (with
      // --chat, prompt_ids is the exact one where -p or --system spells a control token as text).
      if (outputs.size() == 1 && !options.prompt.empty()) out["prompt_text"] = *prompt_text(engine, options);
      out["ids"] = output.ids;
      out["text"] = output.text;
      out["finish_reason"] = finish_name(output.finish_reason);
      out["seed"] = options.sampling.seed;
      out["timings"] = {{"prompt_tokens", timings.n_prompt_tokens},
                        {"prompt_seconds", timings.prompt_seconds},
                        {"prompt_tokens_per_second", prompt_tps},
                        {"generated_tokens", timings.n_generated_tokens},
                        {"generation_seconds", timings.generation_seconds},
                        {"generation_tokens_per_second", gen_tps},
                        {"seconds_per_output_token",
                         timings.n_generated_tokens > 1 ? timings.generation_seconds / (timings.n_generated_tokens - 1)
                                                        : 0.0}};
      if (options.engine.spec.mode != "none") out["spec"] = spec_json(timings.spec, options);
      out["state"] = state_json(state);
      if (options.top_logprobs > 0) out["top_logprobs"] = output.top_logprobs;
      std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      continue;
    }
    if (stream) {
      std::printf("\n");
    } else {
      std::printf("--- prompt %zu ---\n%s\n", i + 1, output.text.c_str());
    }
    std::fflush(stdout);  // the text ends before the timing line when both go to one terminal or pipe
    std::string spec_line;
    if (options.engine.spec.mode != "none") {
      const SpecStats& spec = timings.spec;
      spec_line = fmt::format(" | spec {}: {} of {} drafted accepted ({:.0f}%)", options.engine.spec.mode,
                              spec.accepted, spec.drafted,
                              spec.drafted > 0 ? 100.0 * static_cast<double>(spec.accepted) / spec.drafted : 0.0);
    }
    std::fprintf(stderr, "prompt: %lld tokens, %.1f tokens/s | generation: %lld tokens, %.1f tokens/s | %s%s\n",
                 static_cast<long long>(timings.n_prompt_tokens), prompt_tps,
                 static_cast<long long>(timings.n_generated_tokens), gen_tps, finish_name(output.finish_reason),
                 spec_line.c_str());
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
                  "built-in chat template instead of the model's own tokenizer.chat_template: chatml, gemma, llama3 "
                  "(a model without one gets ChatML, or Gemma's for Gemma files)");
  cmd->add_flag("--json", options.json, "print one JSON object with ids, text and timings");
  cmd->add_option("--top-logprobs", options.top_logprobs, "report the K most likely tokens per step")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--prompts-file", options.prompts_file,
                  "several prompts, one per line, each in its own slot and decoded together");
  options.engine.n_slots = 0;  // 0 until given: one per prompt
  cmd->add_option("-s,--slots", options.engine.n_slots, "slots decoded together (default: one per prompt)");
  add_speculation_options(*cmd, options.engine, "none, ngram, draft, mtp, oracle");
  add_cache_type_options(*cmd, options.engine);
  cmd->add_option("--oracle-error-rate", options.engine.spec.oracle_error_rate,
                  "--spec oracle: probability that a drafted token is wrong (the oracle drafts the greedy output)")
      ->capture_default_str();
  cmd->callback([&options, &exit_code, seed] {
    options.seed_given = seed->count() > 0;
    exit_code = run(options);
  });
}

}  // namespace rwd::apps
