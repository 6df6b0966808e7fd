// refgen: greedy reference continuations (top-5 log-probabilities, margins, optional full logits)
// computed by libllama, written as JSON for rewind's tests.
//
// Not part of rewind's build: it links llama.cpp, the independent implementation the references come from.
// Build against a built llama.cpp checkout (the references here: llama.cpp@0c1e57098 as vendored in
// llama-cpp-python 0.3.36, built with -DGGML_NATIVE=ON):
//   L=$LLAMA_CPP_DIR
//   g++ -std=c++20 -O2 -o refgen tools/refgen/refgen.cpp -I$L/include -I$L/ggml/include -L$L/build/bin \
//       -Wl,-rpath,$L/build/bin -lllama -lggml -lggml-base
//
// Usage:
//   refgen -m MODEL -n N [-t 2] -o OUT.json
//          (--text TEXT | --chat USER_MESSAGE [--template NAME] | --ids 1,2,3 | --prompt-ids-from GOLDEN.json)
//          [--full K] [--model-name NAME]
//   refgen -m MODEL --tokenize STRINGS.json -o OUT.json     (raw tokenization: add_special/parse_special false)
//
//   --text    tokenize TEXT with the model's add_bos default (add_special true, parse_special false)
//   --chat    apply the model's chat template (or --template NAME, a llama.cpp built-in name) through
//             llama_chat_apply_template with add_generation_prompt true; tokenize with add_special and
//             parse_special true
//   --ids     the prompt as explicit token ids
//   --prompt-ids-from  take prompt.ids (and prompt.text) from a golden JSON file and write the golden schema
//             (tokenizer round-trip fields, full_logits of the first --full steps, default 4)
//   --full K  full logit vectors of the first K generated tokens (default 0; 4 for --prompt-ids-from)
//   --model-name NAME  the "model" field (default: the model file's base name)
//
// Settings: CPU only, n_threads threads, f32 K/V cache, flash attention off, the whole prompt in one
// llama_decode (n_batch = n_ubatch = max(32, prompt length)), then one token per call; EOS does not stop.
// n_ctx = prompt + n_predict + 16 (llama.cpp pads it to a multiple of 256: settings.n_ctx_actual).

#include "llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using ojson = nlohmann::ordered_json;

static const char * kCommit = "0c1e57098";

static void quiet_log(enum ggml_log_level level, const char * text, void *) {
  if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

[[noreturn]] static void die(const std::string & msg) {
  fprintf(stderr, "refgen: %s\n", msg.c_str());
  exit(1);
}

static std::string base_name(const std::string & p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// The value a float prints as with 9 significant digits (enough to round-trip a float), as a double.
static double f9(float x) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.9g", (double)x);
  return strtod(buf, nullptr);
}

static std::string sha256_file(const std::string & path) {
  std::string cmd = "sha256sum '" + path + "'";
  FILE * p = popen(cmd.c_str(), "r");
  if (!p) die("cannot run sha256sum");
  char buf[256] = {0};
  if (!fgets(buf, sizeof buf, p)) die("sha256sum gave nothing");
  pclose(p);
  std::string s(buf);
  return s.substr(0, s.find(' '));
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special,
                                         bool parse_special) {
  int n = -llama_tokenize(vocab, text.data(), (int32_t)text.size(), nullptr, 0, add_special, parse_special);
  if (n <= 0) {
    n = llama_tokenize(vocab, text.data(), (int32_t)text.size(), nullptr, 0, add_special, parse_special);
    if (n < 0) n = -n;
  }
  std::vector<llama_token> ids(n + 8);
  int got = llama_tokenize(vocab, text.data(), (int32_t)text.size(), ids.data(), (int32_t)ids.size(), add_special,
                           parse_special);
  if (got < 0) die("tokenize failed");
  ids.resize(got);
  return ids;
}

static std::string piece(const llama_vocab * vocab, llama_token id) {
  std::vector<char> buf(256);
  int n = llama_token_to_piece(vocab, id, buf.data(), (int32_t)buf.size(), 0, true);
  if (n < 0) {
    buf.resize(-n);
    n = llama_token_to_piece(vocab, id, buf.data(), (int32_t)buf.size(), 0, true);
  }
  return std::string(buf.data(), n);
}

static std::string detokenize(const llama_vocab * vocab, const std::vector<llama_token> & ids, bool unparse_special) {
  std::vector<char> buf(ids.size() * 16 + 64);
  int n = llama_detokenize(vocab, ids.data(), (int32_t)ids.size(), buf.data(), (int32_t)buf.size(), false,
                           unparse_special);
  if (n < 0) {
    buf.resize(-n);
    n = llama_detokenize(vocab, ids.data(), (int32_t)ids.size(), buf.data(), (int32_t)buf.size(), false,
                         unparse_special);
  }
  return std::string(buf.data(), n);
}

static std::vector<llama_token> parse_ids(const std::string & s) {
  std::vector<llama_token> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) ids.push_back((llama_token)std::stol(item));
  }
  return ids;
}

int main(int argc, char ** argv) {
  std::string model_path, out_path, text, chat, tmpl_name, ids_arg, golden_path, model_name, tokenize_path;
  int n_predict = 32, n_threads = 2, n_full = -1;
  enum { NONE, TEXT, CHAT, IDS, GOLDEN, TOKENIZE } mode = NONE;
  std::string command = "refgen";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    std::string v;
    if (a == "-m") { v = base_name(model_path = next()); }
    else if (a == "-o") { v = base_name(out_path = next()); }
    else if (a == "-n") { v = next(); n_predict = std::stoi(v); }
    else if (a == "-t") { v = next(); n_threads = std::stoi(v); }
    else if (a == "--text") { v = text = next(); mode = TEXT; }
    else if (a == "--chat") { v = chat = next(); mode = CHAT; }
    else if (a == "--template") { v = tmpl_name = next(); }
    else if (a == "--ids") { v = ids_arg = next(); mode = IDS; }
    else if (a == "--prompt-ids-from") { v = base_name(golden_path = next()); mode = GOLDEN; }
    else if (a == "--tokenize") { v = base_name(tokenize_path = next()); mode = TOKENIZE; }
    else if (a == "--full") { v = next(); n_full = std::stoi(v); }
    else if (a == "--model-name") { v = model_name = next(); }
    else die("unknown option " + a);
    command += " " + a + " " + v;
  }
  if (model_path.empty() || out_path.empty() || mode == NONE) {
    fprintf(stderr,
            "usage: refgen -m MODEL -n N [-t 2] -o OUT.json (--text TEXT | --chat MSG [--template NAME] | --ids 1,2 |"
            " --prompt-ids-from GOLDEN.json) [--full K] [--model-name NAME]\n"
            "       refgen -m MODEL --tokenize STRINGS.json -o OUT.json\n");
    return 2;
  }
  if (n_full < 0) n_full = mode == GOLDEN ? 4 : 0;
  if (model_name.empty()) model_name = base_name(model_path);

  llama_log_set(quiet_log, nullptr);
  llama_backend_init();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.vocab_only = (mode == TOKENIZE);
  mp.progress_callback = [](float, void *) { return true; };
  llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) die("cannot load " + model_path);
  const llama_vocab * vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  if (mode == TOKENIZE) {
    std::ifstream in(tokenize_path);
    ojson strings = ojson::parse(in);
    ojson list = ojson::array();
    for (const auto & s : strings) {
      std::string t = s.get<std::string>();
      auto ids = tokenize(vocab, t, false, false);
      ojson pieces = ojson::array();
      for (auto id : ids) pieces.push_back(piece(vocab, id));
      list.push_back({{"text", t}, {"ids", ids}, {"pieces", pieces}, {"roundtrip", detokenize(vocab, ids, false) == t}});
    }
    ojson out;
    out["model"] = model_name;
    out["sha256"] = sha256_file(model_path);
    out["llama_cpp_commit"] = kCommit;
    out["refgen_command"] = command;
    out["how"] = "llama_tokenize(vocab, text, add_special=false, parse_special=false) through libllama (" + command + ")";
    out["strings"] = list;
    std::ofstream(out_path) << out.dump(1, ' ', false, ojson::error_handler_t::replace) << "\n";
    llama_model_free(model);
    return 0;
  }

  // ---- prompt
  ojson prompt;
  std::vector<llama_token> prompt_ids;
  ojson golden;
  if (mode == TEXT) {
    prompt_ids = tokenize(vocab, text, true, false);
    prompt["mode"] = "text";
    prompt["text"] = text;
    prompt["tokenize_add_special"] = true;
    prompt["tokenize_parse_special"] = false;
  } else if (mode == CHAT) {
    const char * tmpl = nullptr;
    std::string tmpl_src;
    if (!tmpl_name.empty()) {
      tmpl = tmpl_name.c_str();
    } else {
      tmpl = llama_model_chat_template(model, nullptr);
      if (!tmpl) die("model has no chat template; pass --template NAME");
    }
    llama_chat_message msg = {"user", chat.c_str()};
    std::vector<char> buf(chat.size() * 4 + 1024);
    int n = llama_chat_apply_template(tmpl, &msg, 1, true, buf.data(), (int32_t)buf.size());
    if (n < 0) die("llama_chat_apply_template failed (template not supported?)");
    if (n > (int)buf.size()) {
      buf.resize(n);
      n = llama_chat_apply_template(tmpl, &msg, 1, true, buf.data(), (int32_t)buf.size());
    }
    text = std::string(buf.data(), n);
    prompt_ids = tokenize(vocab, text, true, true);
    prompt["mode"] = "chat";
    prompt["text"] = text;
    prompt["chat_user_message"] = chat;
    prompt["add_generation_prompt"] = true;
    prompt["chat_template"] = std::string(tmpl);
    prompt["chat_template_source"] =
        tmpl_name.empty() ? "model metadata (tokenizer.chat_template)" : "--template (llama.cpp built-in name)";
    prompt["tokenize_add_special"] = true;
    prompt["tokenize_parse_special"] = true;
  } else if (mode == IDS) {
    prompt_ids = parse_ids(ids_arg);
    prompt["mode"] = "ids";
    prompt["text"] = detokenize(vocab, prompt_ids, true);
  } else {  // GOLDEN
    std::ifstream in(golden_path);
    if (!in) die("cannot read " + golden_path);
    golden = ojson::parse(in);
    prompt_ids = golden.at("prompt").at("ids").get<std::vector<llama_token>>();
    if (golden["prompt"].contains("text")) text = golden["prompt"]["text"].get<std::string>();
    else text = detokenize(vocab, prompt_ids, true);
  }
  const int n_prompt = (int)prompt_ids.size();
  if (n_prompt == 0) die("empty prompt");
  for (auto id : prompt_ids)
    if (id < 0 || id >= n_vocab) die("prompt id out of range");
  if (mode != GOLDEN) {
    prompt["n"] = n_prompt;
    prompt["ids"] = prompt_ids;
    ojson pieces = ojson::array();
    for (auto id : prompt_ids) pieces.push_back(piece(vocab, id));
    prompt["pieces"] = pieces;
  }

  // ---- context
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(n_prompt + n_predict + 16);
  cp.n_batch = (uint32_t)std::max(32, n_prompt);
  cp.n_ubatch = cp.n_batch;
  cp.n_seq_max = 1;
  cp.n_threads = n_threads;
  cp.n_threads_batch = n_threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.offload_kqv = false;
  cp.op_offload = false;
  cp.no_perf = true;
  llama_context * ctx = llama_init_from_model(model, cp);
  if (!ctx) die("cannot create context");

  // n_ctx: what was asked for (prompt + n_predict + 16); llama.cpp pads the context to a multiple of 256,
  // recorded as n_ctx_actual.
  ojson settings = {{"n_threads", n_threads},  {"n_ctx", cp.n_ctx},     {"n_ctx_actual", llama_n_ctx(ctx)},
                    {"n_batch", cp.n_batch},   {"n_ubatch", cp.n_ubatch}, {"type_k", "f32"},
                    {"type_v", "f32"},         {"flash_attn", false},   {"n_gpu_layers", 0},
                    {"prompt_in_one_decode", true}};

  // ---- greedy loop
  ojson steps = ojson::array();
  ojson full_values = ojson::array();
  std::vector<llama_token> gen;
  std::string gen_text;
  double min_margin = INFINITY;
  float min_margin_f = INFINITY;
  int distinct = 0;
  std::vector<char> seen(n_vocab, 0);

  std::vector<llama_token> cur = prompt_ids;
  for (int i = 0; i < n_predict; ++i) {
    llama_batch batch = llama_batch_get_one(cur.data(), (int32_t)cur.size());
    if (llama_decode(ctx, batch) != 0) die("llama_decode failed at step " + std::to_string(i));
    const float * logits = llama_get_logits_ith(ctx, -1);
    if (!logits) die("no logits");

    // top-5 by logit (ties: lower id first), log-softmax in double
    std::vector<int> order(n_vocab);
    for (int k = 0; k < n_vocab; ++k) order[k] = k;
    std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) {
      if (logits[a] != logits[b]) return logits[a] > logits[b];
      return a < b;
    });
    double mx = logits[order[0]];
    double sum = 0.0;
    for (int k = 0; k < n_vocab; ++k) sum += std::exp((double)logits[k] - mx);
    const double lse = mx + std::log(sum);
    const llama_token id = order[0];
    const float margin = logits[order[0]] - logits[order[1]];

    ojson top = ojson::array();
    for (int k = 0; k < 5; ++k) {
      top.push_back({order[k], (double)logits[order[k]] - lse});
    }
    std::string pc = piece(vocab, id);
    ojson step;
    step["i"] = i;
    step["id"] = id;
    step["piece"] = pc;
    step["top"] = top;
    step["margin"] = f9(margin);
    steps.push_back(step);
    if (margin < min_margin_f) { min_margin_f = margin; min_margin = f9(margin); }

    if (i < n_full) {
      ojson v = ojson::array();
      for (int k = 0; k < n_vocab; ++k) v.push_back(f9(logits[k]));
      full_values.push_back({{"id", id}, {"logits", v}});
    }
    if (!seen[id]) { seen[id] = 1; ++distinct; }
    gen.push_back(id);
    gen_text += pc;
    cur.assign(1, id);
  }

  ojson greedy;
  greedy["n_predict"] = n_predict;
  greedy["ids"] = gen;
  greedy["text"] = gen_text;

  ojson out;
  out["model"] = model_name;
  out["sha256"] = sha256_file(model_path);
  out["llama_cpp_commit"] = kCommit;
  out["refgen_command"] = command;
  if (mode == GOLDEN && golden.contains("generator")) out["generator"] = golden["generator"];
  out["n_vocab"] = n_vocab;
  out["add_bos_metadata"] = llama_vocab_get_add_bos(vocab);
  out["settings"] = settings;

  if (mode == GOLDEN) {
    // tokenizer round-trip fields of the golden schema
    ojson tok;
    std::string bytes_of_ids;
    bool is_bytes = true;
    for (size_t k = 0; k < prompt_ids.size() && k < text.size(); ++k)
      if (prompt_ids[k] != (llama_token)(unsigned char)text[k]) is_bytes = false;
    if (prompt_ids.size() != text.size()) is_bytes = false;
    tok["prompt_is_utf8_bytes"] = is_bytes;
    tok["prompt_tokenizes_to_ids"] = tokenize(vocab, text, false, false) == prompt_ids;
    tok["prompt_roundtrip"] = detokenize(vocab, prompt_ids, false) == text;
    std::string probe = "h\xc3\xa9llo w\xc3\xb6rld \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x99\x82\n\ttab";
    if (golden.contains("tokenizer") && golden["tokenizer"].contains("unicode_probe"))
      probe = golden["tokenizer"]["unicode_probe"]["text"].get<std::string>();
    auto pids = tokenize(vocab, probe, false, false);
    tok["unicode_probe"] = {{"text", probe}, {"ids", pids}, {"roundtrip", detokenize(vocab, pids, false) == probe}};
    std::string sprobe = "<|im_start|>hi<|im_end|>";
    if (golden.contains("tokenizer") && golden["tokenizer"].contains("special_probe"))
      sprobe = golden["tokenizer"]["special_probe"]["text"].get<std::string>();
    tok["special_probe"] = {{"text", sprobe}, {"parse_special", true}, {"ids", tokenize(vocab, sprobe, false, true)}};
    out["tokenizer"] = tok;
    out["prompt"] = {{"mode", "ids"}, {"text", text}, {"ids", prompt_ids}, {"n", n_prompt}};
    greedy["distinct_tokens"] = distinct;
    greedy["sampled_equals_top1"] = true;
  } else {
    out["prompt"] = prompt;
  }
  out["greedy"] = greedy;
  out["steps"] = steps;
  out["min_margin"] = min_margin;
  if (n_full > 0) {
    out["full_logits"] = {{"steps", n_full},
                          {"note", "raw logits from llama_get_logits_ith for the first steps, full vocab"},
                          {"values", full_values}};
  }
  if (mode == GOLDEN) {
    out["notes"] = ojson::array();
    out["peer"] = {{"name", "llama.cpp"},
                   {"commit", kCommit},
                   {"settings", "libllama C API via refgen: whole prompt in one llama_decode, then one token per call;"
                                " greedy, CPU, flash attention off, f32 KV cache"}};
  }

  std::ofstream f(out_path);
  if (!f) die("cannot write " + out_path);
  f << out.dump(0, ' ', false, ojson::error_handler_t::replace) << "\n";
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
