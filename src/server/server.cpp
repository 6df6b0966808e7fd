#include "rewind/server.h"

#include <httplib.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "server/api.h"
#include "server/chat_page.h"
#include "server/connection_pool.h"
#include "server/engine_loop.h"
#include "server/generation.h"
#include "server/metrics.h"

namespace rwd::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How often a response writes at least something: a keep-alive when no output came, and for a whole (unstreamed)
// response a space even while tokens flow. A failed write is how a client that went away is noticed
// (cpp-httplib does not expose the socket to poll).
constexpr std::chrono::milliseconds kKeepAliveEvery{1000};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) { send_json(res, error.status, error_body(error)); }

bool same_secret(const std::string& a, const std::string& b) {
  // Constant time over the expected key's length, so the comparison does not tell how much of a guess matched.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(i < a.size() ? a[i] ^ b[i] : 1);
  return diff == 0;
}

const char* status_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// Connections the kernel holds for accept(): nginx's default.
constexpr int kListenBacklog = 511;

// Threads that answer the connections beyond the cap with a 503: few, since each answer is immediate.
constexpr size_t kOverflowThreads = 2;

// File descriptors kept free of connections: the model file, the listening socket, logs, the loader's files.
constexpr rlim_t kReservedFds = 64;

// The connection cap the process's file-descriptor limit allows: the soft limit is raised toward the hard one
// when needed, and the cap lowered (with a warning) when even that is too few.
size_t connection_cap(size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return wanted;
  const rlim_t needed = static_cast<rlim_t>(wanted + kOverflowThreads) + kReservedFds;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return wanted;
  const size_t allowed = limit.rlim_cur > kReservedFds + kOverflowThreads + 1
                             ? static_cast<size_t>(limit.rlim_cur - kReservedFds) - kOverflowThreads
                             : 1;
  log_warn("max-connections {} lowered to {}: the process may open {} files (ulimit -n)", wanted, allowed,
           static_cast<uint64_t>(limit.rlim_cur));
  return allowed;
}

// What a draining server answers to new generation requests, and /health's reason while it drains.
constexpr const char* kDrainingMessage = "the server is shutting down: it finishes what it runs, and takes nothing new";

// Held by whatever answers an admitted request; the last holder gives the place back.
class Admission {
 public:
  explicit Admission(std::atomic<int64_t>& in_flight) : in_flight_(in_flight) {}
  ~Admission() { in_flight_.fetch_sub(1); }
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

 private:
  std::atomic<int64_t>& in_flight_;
};

// What one answer needs after the handler returned: the response is written by cpp-httplib's content
// provider, which outlives the handler.
struct Exchange {
  std::shared_ptr<Generation> generation;
  std::shared_ptr<Admission> admission;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool return_tokens = false;
  bool native = false;  // llama-server's POST /completion: its response shape
  int64_t n_prompt = 0;
  std::string id;
  int64_t created = 0;
  std::string model;
  Clock::time_point arrival;
  bool counted = false;  // its outcome is in the metrics (HTTP thread only: the provider and releaser share it)
  // An unstreamed answer's output so far (HTTP thread only).
  std::string text;
  std::vector<GeneratedToken> tokens;
};

// Takes an update's output into an unstreamed exchange; true when it was the last.
bool absorb(Exchange& exchange, GenerationUpdate& update) {
  exchange.text += update.text;
  for (GeneratedToken& token : update.tokens) exchange.tokens.push_back(std::move(token));
  return update.done;
}

class HttpServer final : public Server {
 public:
  explicit HttpServer(const ServerOptions& options) : options_(options) {}
  ~HttpServer() override { stop(); }

  Status start() override;
  int port() const override { return port_; }
  Status wait() override;
  void drain() override;
  void stop() override;

 private:
  void routes();
  // llama-server's own endpoints, so its clients work unchanged: /tokenize, /detokenize, /apply-template, /props.
  void native_routes();
  std::optional<ApiError> not_ready() const;
  // chat: /v1/chat/completions; native: llama-server's /completion (its defaults and response shape).
  void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat, bool native = false);
  json native_final(const Exchange& exchange, const GenerationUpdate& final, const std::string& text,
                    const std::vector<GeneratedToken>& tokens) const;
  void invalid(httplib::Response& res, const ApiError& error) {
    metrics_.count(Outcome::invalid);
    send_error(res, error);
  }
  json chunk(const Exchange& exchange, const std::string& text, const std::vector<GeneratedToken>& tokens,
             bool first, const std::string& finish_reason, int64_t& text_offset) const;
  json full_response(const Exchange& exchange, const GenerationUpdate& final, const std::string& text,
                     const std::vector<GeneratedToken>& tokens) const;
  void record_end(Exchange& exchange, const GenerationUpdate& final);
  // The client went away: cancels the request in the engine and counts it as cancelled, unless its outcome
  // was counted already.
  void abandon(Exchange& exchange);
  bool stream_events(Exchange& exchange, httplib::DataSink& sink);
  bool write_whole(Exchange& exchange, httplib::DataSink& sink);
  // An unstreamed answer that is ready within the first keep-alive interval goes out whole, with its real status
  // (a failed step is a 500); a longer one is written by write_whole, whose status is 200 once the first
  // keep-alive byte has gone out (a failure then comes as an error body).
  bool answer_within_a_keep_alive(Exchange& exchange, httplib::Response& res);
  // An unstreamed request's status and body once its generation ended (its outcome counted).
  std::pair<int, json> final_answer(Exchange& exchange, const GenerationUpdate& final);
  std::string piece_of(int32_t id) const { return loop_->engine().detokenize({id}); }

  ServerOptions options_;
  httplib::Server http_;
  std::unique_ptr<EngineLoop> loop_;
  Metrics metrics_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> draining_{false};
  socket_t listening_socket_ = -1;
  size_t max_connections_ = 0;  // the cap in force: --max-connections, lowered when the fd limit is too low
  std::atomic<int64_t> next_id_{1};
  std::thread listen_thread_;
  int port_ = 0;
  std::string model_id_;
  int64_t started_at_ = 0;
  std::mutex stop_mutex_;
  std::condition_variable stop_changed_;
  bool stopped_ = false;
  std::mt19937_64 seed_source_{std::random_device{}()};
  std::mutex seed_mutex_;
};

Status HttpServer::start() {
  // A client that closes its socket mid-response must give a failed write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  model_id_ = !options_.model_alias.empty() ? options_.model_alias
                                             : std::filesystem::path(options_.engine.model_path).stem().string();
  started_at_ = static_cast<int64_t>(std::time(nullptr));
  routes();
  max_connections_ = connection_cap(static_cast<size_t>(options_.max_connections));
  http_.new_task_queue = [cap = max_connections_] { return new ConnectionPool(cap, kOverflowThreads); };
  http_.set_read_timeout(options_.read_timeout_seconds, 0);
  http_.set_write_timeout(options_.timeout_seconds, 0);
  http_.set_payload_max_length(options_.max_body_bytes);
  http_.set_tcp_nodelay(true);  // tokens go out one small write at a time
  // Replaces cpp-httplib's socket options, which add SO_REUSEPORT: with it a second server would bind the same
  // port silently and take half the connections. The socket is kept to widen its backlog after bind.
  http_.set_socket_options([this](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening_socket_ = sock;
  });
  if (options_.port == 0) {
    port_ = http_.bind_to_any_port(options_.host);
    if (port_ <= 0) return Status::errorf("cannot listen on {} (any port)", options_.host);
  } else {
    if (!http_.bind_to_port(options_.host, options_.port)) {
      return Status::errorf("cannot listen on {}:{} (in use, or not an address of this machine?)", options_.host,
                            options_.port);
    }
    port_ = options_.port;
  }
  // cpp-httplib listens with a backlog of 5: a burst of connections (a client pool warming up, or many idle
  // ones) overflows it and each connection beyond waits a second for its SYN to be sent again. Linux lets
  // listen() be called again to change the backlog.
  if (listening_socket_ >= 0) ::listen(listening_socket_, kListenBacklog);
  loop_ = std::make_unique<EngineLoop>(options_.engine);
  loop_->start();
  listen_thread_ = std::thread([this] { http_.listen_after_bind(); });
  return Status::ok();
}

Status HttpServer::wait() {
  std::unique_lock lock(stop_mutex_);
  while (!stopped_) {
    stop_changed_.wait_for(lock, std::chrono::milliseconds(200));
    if (loop_ && loop_->phase() == EngineLoop::Phase::failed) return Status::error(loop_->failure());
    if (draining_ && in_flight_.load() == 0) break;
  }
  return Status::ok();
}

void HttpServer::drain() {
  draining_ = true;
  stop_changed_.notify_all();
}

void HttpServer::stop() {
  {
    std::lock_guard lock(stop_mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_changed_.notify_all();
  http_.stop();  // no new connections; does not wait
  // Open requests end now, with an error: the listener's join waits for every response to be written, and a
  // response waits for its generation, which would otherwise run to max_tokens.
  if (loop_) loop_->stop();
  if (listen_thread_.joinable()) listen_thread_.join();
}

std::optional<ApiError> HttpServer::not_ready() const {
  switch (loop_->phase()) {
    case EngineLoop::Phase::ready: return std::nullopt;
    case EngineLoop::Phase::loading:
      return ApiError{503, fmt::format("the model is loading ({:.0f}%)", 100.0 * loop_->load_progress()), "",
                      "unavailable_error"};
    case EngineLoop::Phase::failed: break;
  }
  return ApiError{500, loop_->failure(), "", "server_error"};
}

void HttpServer::routes() {
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (ConnectionPool::serving_overflow()) {
      metrics_.count(Outcome::rejected);
      res.set_header("Connection", "close");
      res.set_header("Retry-After", "1");
      send_error(res, {503, fmt::format("too many open connections: the server serves {} at once "
                                        "(--max-connections); retry later", max_connections_),
                       "", "unavailable_error"});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (options_.api_key.empty() || req.path == "/" || req.path == "/health" || req.method == "OPTIONS") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (header.compare(0, prefix.size(), prefix) == 0 && same_secret(header.substr(prefix.size()), options_.api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    metrics_.count(Outcome::unauthorized);
    send_error(res, {401, header.empty() ? "missing API key: send the header Authorization: Bearer <key>"
                                         : "invalid API key",
                     "", "authentication_error"});
    return httplib::Server::HandlerResponse::Handled;
  });
  http_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                   httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    if (res.status == 404) {
      message = fmt::format("no route for {} {}", req.method, req.path);
    } else if (res.status == 413) {
      message = "the request body is too large";
    } else {
      message = fmt::format("HTTP {} for {} {}", res.status, req.method, req.path);
    }
    send_error(res, {res.status, message, "", status_type(res.status)});
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    std::string what = "unknown exception";
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_error("request failed: {}", what);
    metrics_.count(Outcome::failed);
    send_error(res, {500, "internal error: " + what, "", "server_error"});
  });
  // Cross-origin pages are refused unless --cors names their origin: with "*", any page a user visits could
  // use a server on their machine (and its API key, if the browser holds one).
  if (!options_.cors_origin.empty()) {
    http_.set_default_headers({{"Access-Control-Allow-Origin", options_.cors_origin}, {"Vary", "Origin"}});
  }
  http_.Options(".*", [this](const httplib::Request&, httplib::Response& res) {
    if (!options_.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    }
    res.status = 204;
  });

  http_.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      send_json(res, 503, {{"status", "draining"},
                           {"error", {{"message", kDrainingMessage}, {"type", "unavailable_error"}}},
                           {"in_flight", in_flight_.load()}});
      return;
    }
    if (auto error = not_ready()) {
      json body = error_body(*error);
      body["status"] = loop_->phase() == EngineLoop::Phase::loading ? "loading" : "error";
      body["progress"] = loop_->load_progress();
      send_json(res, error->status, body);
      return;
    }
    const EngineSnapshot snapshot = loop_->snapshot();
    int64_t busy = 0;
    for (const SlotStatus& slot : snapshot.status.slots) busy += slot.busy;
    send_json(res, 200, {{"status", "ok"},
                         {"slots_idle", static_cast<int64_t>(snapshot.status.slots.size()) - busy},
                         {"slots_busy", busy},
                         {"queue_length", snapshot.status.n_queued}});
  });
  const auto models = [this](const httplib::Request&, httplib::Response& res) {
    json model = {{"id", model_id_}, {"object", "model"}, {"created", started_at_}, {"owned_by", "rewind"}};
    if (loop_->phase() == EngineLoop::Phase::ready) {
      const ModelInfo& info = loop_->engine().info();
      model["meta"] = {{"architecture", info.architecture}, {"name", info.name},
                       {"n_params", info.n_params},         {"n_vocab", info.n_vocab},
                       {"n_ctx", info.n_ctx},               {"n_ctx_train", info.n_ctx_train},
                       {"n_slots", options_.engine.n_slots}, {"speculative", options_.engine.spec.mode},
                       {"draft_max", options_.engine.spec.draft_max}, {"rollback", options_.engine.spec.rollback}};
    }
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  };
  http_.Get("/v1/models", models);
  http_.Get("/models", models);
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::optional<EngineSnapshot> snapshot;
    if (loop_->phase() == EngineLoop::Phase::ready) snapshot = loop_->snapshot();
    res.set_content(metrics_.render(snapshot ? &*snapshot : nullptr, in_flight_.load()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  http_.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
    if (auto error = not_ready()) {
      send_error(res, *error);
      return;
    }
    json slots = json::array();
    for (const SlotStatus& slot : loop_->snapshot().status.slots) {
      // n_cached: tokens of the slot's state a request with the same prefix starts from.
      json entry = {{"id", slot.index}, {"busy", slot.busy}, {"n_cached", slot.n_cached}};
      if (slot.busy) {
        entry["request_id"] = slot.request_id;
        entry["n_prompt"] = slot.n_prompt;
        entry["n_computed"] = slot.n_computed;
        entry["n_generated"] = slot.n_generated;
        entry["speculating"] = slot.speculating;
        entry["spec_backed_off"] = slot.backed_off;
        entry["drafted"] = slot.drafted;
        entry["accepted"] = slot.accepted;
        entry["acceptance_rate"] = slot.drafted > 0 ? static_cast<double>(slot.accepted) / slot.drafted : 0.0;
        entry["acceptance_estimate"] = slot.acceptance_estimate;
      }
      slots.push_back(std::move(entry));
    }
    send_json(res, 200, slots);
  });
  native_routes();
  http_.Post("/completion", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, false, /*native=*/true);
  });
  for (const char* path : {"/v1/completions", "/completions"}) {
    http_.Post(path, [this](const httplib::Request& req, httplib::Response& res) { handle_completion(req, res, false); });
  }
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
    http_.Post(path, [this](const httplib::Request& req, httplib::Response& res) { handle_completion(req, res, true); });
  }
}

void HttpServer::native_routes() {
  // The body as JSON, or a 4xx already sent; the model must be loaded (the tokenizer is the engine's).
  const auto read_body = [this](const httplib::Request& req, httplib::Response& res) -> std::optional<json> {
    if (auto error = not_ready()) {
      send_error(res, *error);
      return std::nullopt;
    }
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
      invalid(res, {400, "the request body is not valid JSON", ""});
      return std::nullopt;
    }
    return body;
  };
  http_.Post("/tokenize", [this, read_body](const httplib::Request& req, httplib::Response& res) {
    const std::optional<json> body = read_body(req, res);
    if (!body) return;
    TokenizeParams params;
    if (auto error = parse_tokenize_request(*body, params)) {
      invalid(res, *error);
      return;
    }
    const Engine& engine = loop_->engine();
    auto ids = engine.tokenize(params.content, params.add_special && engine.add_bos_default(), params.parse_special);
    if (!ids) {
      invalid(res, {400, "content: " + ids.status().message(), "content"});
      return;
    }
    json tokens = json::array();
    for (int32_t id : *ids) {
      tokens.push_back(params.with_pieces ? json{{"id", id}, {"piece", piece_of(id)}} : json(id));
    }
    send_json(res, 200, {{"tokens", std::move(tokens)}});
  });
  http_.Post("/detokenize", [this, read_body](const httplib::Request& req, httplib::Response& res) {
    const std::optional<json> body = read_body(req, res);
    if (!body) return;
    std::vector<int32_t> ids;
    if (auto error = parse_detokenize_request(*body, loop_->engine().info().n_vocab, ids)) {
      invalid(res, *error);
      return;
    }
    send_json(res, 200, {{"content", loop_->engine().detokenize(ids)}});
  });
  http_.Post("/apply-template", [this, read_body](const httplib::Request& req, httplib::Response& res) {
    const std::optional<json> body = read_body(req, res);
    if (!body) return;
    std::vector<ChatMessage> messages;
    if (auto error = parse_template_request(*body, messages)) {
      invalid(res, *error);
      return;
    }
    Result<std::string> prompt = loop_->engine().format_chat(messages);
    if (!prompt) {
      invalid(res, {400, "messages: " + prompt.status().message(), "messages"});
      return;
    }
    send_json(res, 200, {{"prompt", *prompt}});
  });
  http_.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
    if (auto error = not_ready()) {
      send_error(res, *error);
      return;
    }
    const ModelInfo& info = loop_->engine().info();
    const SamplingParams defaults;
    send_json(res, 200,
              {{"default_generation_settings",
                {{"n_ctx", info.n_ctx},
                 {"params", {{"n_predict", -1}, {"temperature", defaults.temperature}, {"top_k", defaults.top_k},
                             {"top_p", defaults.top_p}, {"min_p", defaults.min_p},
                             {"repeat_penalty", defaults.repetition_penalty}, {"cache_prompt", true}}}}},
               {"total_slots", options_.engine.n_slots},
               {"model_alias", model_id_},
               {"model_path", options_.engine.model_path},
               {"architecture", info.architecture},
               {"n_vocab", info.n_vocab},
               {"speculative", options_.engine.spec.mode},
               {"rewind_depth", options_.engine.rewind_depth},
               {"cache_ram_mib", options_.engine.cache_ram_mib}});
  });
}

void HttpServer::handle_completion(const httplib::Request& req, httplib::Response& res, bool chat, bool native) {
  const Clock::time_point arrival = Clock::now();
  if (auto error = not_ready()) {
    send_error(res, *error);
    return;
  }
  // Admitted before any costly work (parsing and tokenizing a body of up to max_body_bytes): a full server
  // answers 429 at once. The slot is given back when the answer ends or the request is refused.
  const int64_t limit = options_.engine.n_slots + options_.max_queue;
  if (in_flight_.fetch_add(1) >= limit) {
    in_flight_.fetch_sub(1);
    metrics_.count(Outcome::rejected);
    res.set_header("Retry-After", "1");
    send_error(res, {429, fmt::format("the server is busy: {} requests are decoding or queued, the most it takes; "
                                      "retry later", limit),
                     "", "rate_limit_error"});
    return;
  }
  auto admission = std::make_shared<Admission>(in_flight_);
  // Checked after taking a place, so that a drain either sees this request in flight or this request sees the
  // drain: none slips in after the drain found the server empty.
  if (draining_) {
    metrics_.count(Outcome::rejected);
    res.set_header("Connection", "close");
    send_error(res, {503, std::string(kDrainingMessage) + "; send the request to another replica", "",
                     "unavailable_error"});
    return;
  }
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    invalid(res, {400, fmt::format("the request body is not valid JSON: {}", e.what()), ""});
    return;
  }
  CompletionParams params;
  if (auto error = parse_completion_request(body, chat, params)) {
    invalid(res, *error);
    return;
  }
  const SpecOptions& spec = options_.engine.spec;
  if (params.spec_type && *params.spec_type != "none" && *params.spec_type != spec.mode) {
    invalid(res, {400,
                  spec.mode == "none"
                      ? fmt::format("speculative.type '{}' is not available: the server runs without speculation "
                                    "(start it with --spec)", *params.spec_type)
                      : fmt::format("speculative.type '{}' is not available: the server speculates with '{}' (or "
                                    "'none')", *params.spec_type, spec.mode),
                  "speculative.type"});
    return;
  }
  const bool speculating = spec.mode != "none" && params.spec_type.value_or(spec.mode) != "none";
  if (params.spec_draft_max > 0 && speculating && params.spec_draft_max > spec.draft_max) {
    invalid(res, {400, fmt::format("speculative.draft_max must be in [1, {}] (the server's --draft-max), got {}",
                                   spec.draft_max, params.spec_draft_max),
                  "speculative.draft_max"});
    return;
  }
  if (params.spec_tree_nodes > 0 && speculating && params.spec_tree_nodes > spec.tree_nodes) {
    invalid(res, {400,
                  spec.tree_nodes == 0
                      ? fmt::format("speculative.tree {} was asked for but the server drafts chains (start it with "
                                    "--draft-tree-nodes)", params.spec_tree_nodes)
                      : fmt::format("speculative.tree must be in [0, {}] (the server's --draft-tree-nodes), got {}",
                                    spec.tree_nodes, params.spec_tree_nodes),
                  "speculative.tree"});
    return;
  }

  const Engine& engine = loop_->engine();
  const std::string prompt_field = chat ? "messages" : "prompt";
  std::vector<int32_t> ids;
  if (chat) {
    // Control-token spellings in message text stay text (no forged turns); a raw prompt, below, is the
    // caller's whole and parses them, as llama-server does.
    auto tokens = engine.tokenize_chat(params.messages);
    if (!tokens) {
      invalid(res, {400, "messages: " + tokens.status().message(), "messages"});
      return;
    }
    ids = std::move(*tokens);
  } else if (!params.prompt_ids.empty()) {
    ids = params.prompt_ids;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= engine.info().n_vocab) {
        invalid(res, {400, fmt::format("prompt[{}]: token id {} is outside the vocabulary [0, {})", i, ids[i],
                                       engine.info().n_vocab),
                      "prompt"});
        return;
      }
    }
  } else {
    auto tokens = engine.tokenize(params.prompt, engine.add_bos_default(), /*parse_special=*/true);
    if (!tokens) {
      invalid(res, {400, "prompt: " + tokens.status().message(), "prompt"});
      return;
    }
    ids = std::move(*tokens);
  }
  if (ids.empty()) {
    invalid(res, {400, prompt_field + " is empty: it gives no tokens", prompt_field});
    return;
  }
  const int64_t n_ctx = engine.info().n_ctx;
  const int64_t n_prompt = static_cast<int64_t>(ids.size());
  if (n_prompt >= n_ctx) {
    invalid(res, {400, fmt::format("the prompt has {} tokens but the context holds {} positions per slot, and at "
                                   "least one is needed for output",
                                   n_prompt, n_ctx),
                  prompt_field});
    return;
  }
  const int64_t room = n_ctx - n_prompt;
  const int64_t max_tokens = params.max_tokens.value_or(chat || native ? room : std::min<int64_t>(16, room));
  if (max_tokens > room) {
    invalid(res, {400, fmt::format("max_tokens {} and the prompt's {} tokens exceed the context of {} positions "
                                   "(at most {} new tokens fit)",
                                   max_tokens, n_prompt, n_ctx, room),
                  "max_tokens"});
    return;
  }

  auto exchange = std::make_shared<Exchange>();
  exchange->admission = std::move(admission);
  exchange->chat = chat;
  exchange->stream = params.stream;
  exchange->include_usage = params.include_usage;
  exchange->logprobs = params.logprobs;
  exchange->top_logprobs = params.top_logprobs;
  exchange->return_tokens = params.return_tokens;
  exchange->native = native;
  exchange->n_prompt = n_prompt;
  exchange->id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id_.fetch_add(1));
  exchange->created = static_cast<int64_t>(std::time(nullptr));
  exchange->model = model_id_;
  exchange->arrival = arrival;

  Request request;
  request.prompt_ids = std::move(ids);
  request.max_tokens = static_cast<int>(max_tokens);
  request.sampling = params.sampling;
  if (!params.seed_given) {
    std::lock_guard lock(seed_mutex_);
    request.sampling.seed = seed_source_();
  }
  request.ignore_eos = params.ignore_eos;
  request.cache_prompt = params.cache_prompt;
  request.logprobs = params.logprobs;
  request.top_logprobs = params.top_logprobs;
  if (params.spec_type) request.spec.mode = *params.spec_type;
  if (speculating) {
    request.spec.draft_max = params.spec_draft_max;
    request.spec.tree_nodes = params.spec_tree_nodes;
  }
  exchange->generation = std::make_shared<Generation>(params.stop, params.logprobs || params.return_tokens || native);
  loop_->submit(std::move(request), exchange->generation, params.logprobs);
  const Status accepted = exchange->generation->wait_accepted();
  if (!accepted) {
    if (loop_->accepting()) {
      invalid(res, {400, accepted.message(), ""});
    } else {
      send_error(res, {503, accepted.message(), "", "unavailable_error"});
    }
    return;
  }

  // Runs when cpp-httplib drops the response; `written` is false when the client went away before the whole
  // response was written, even before the provider ran (whether the generation finished says nothing of that).
  const auto release = [this, exchange](bool written) {
    if (!written) abandon(*exchange);
  };
  if (params.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, exchange](size_t, httplib::DataSink& sink) { return stream_events(*exchange, sink); }, release);
  } else if (!answer_within_a_keep_alive(*exchange, res)) {
    res.set_chunked_content_provider(
        "application/json",
        [this, exchange](size_t, httplib::DataSink& sink) { return write_whole(*exchange, sink); }, release);
  }
}

bool HttpServer::answer_within_a_keep_alive(Exchange& exchange, httplib::Response& res) {
  const Clock::time_point deadline = Clock::now() + kKeepAliveEvery;
  GenerationUpdate update;
  while (Clock::now() < deadline) {
    if (!exchange.generation->take(update, std::chrono::duration_cast<std::chrono::milliseconds>(
                                               deadline - Clock::now()))) {
      continue;
    }
    if (!absorb(exchange, update)) continue;
    const auto [status, body] = final_answer(exchange, update);
    send_json(res, status, body);
    return true;
  }
  return false;
}

std::pair<int, json> HttpServer::final_answer(Exchange& exchange, const GenerationUpdate& final) {
  record_end(exchange, final);
  if (final.finish_reason == "error") return {500, error_body({500, final.error, "", "server_error"})};
  return {200, exchange.native ? native_final(exchange, final, exchange.text, exchange.tokens)
                               : full_response(exchange, final, exchange.text, exchange.tokens)};
}

json HttpServer::chunk(const Exchange& exchange, const std::string& text, const std::vector<GeneratedToken>& tokens,
                       bool first, const std::string& finish_reason, int64_t& text_offset) const {
  if (exchange.native) {
    json ids = json::array();
    for (const GeneratedToken& token : tokens) ids.push_back(token.id);
    return {{"content", text}, {"tokens", std::move(ids)}, {"stop", false}};
  }
  json choice = {{"index", 0}};
  const PieceOf piece = [this](int32_t id) { return piece_of(id); };
  if (exchange.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = exchange.logprobs && !tokens.empty()
                             ? chat_logprobs_json(tokens, piece, exchange.top_logprobs > 0)
                             : json(nullptr);
  } else {
    choice["text"] = text;
    choice["logprobs"] =
        exchange.logprobs && !tokens.empty() ? completion_logprobs_json(tokens, piece, text_offset) : json(nullptr);
  }
  for (const GeneratedToken& token : tokens) text_offset += static_cast<int64_t>(token.piece.size());
  if (exchange.return_tokens) {
    json ids = json::array();
    for (const GeneratedToken& token : tokens) ids.push_back(token.id);
    choice["tokens"] = std::move(ids);
  }
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  return {{"id", exchange.id},
          {"object", exchange.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", exchange.created},
          {"model", exchange.model},
          {"choices", json::array({std::move(choice)})}};
}

json HttpServer::native_final(const Exchange& exchange, const GenerationUpdate& final, const std::string& text,
                              const std::vector<GeneratedToken>& tokens) const {
  json ids = json::array();
  for (const GeneratedToken& token : tokens) ids.push_back(token.id);
  std::string stop_type = "none";
  if (final.finish_reason == "length") stop_type = "limit";
  if (final.finish_reason == "stop") stop_type = final.stopped_by_string ? "word" : "eos";
  return {{"content", text},
          {"tokens", std::move(ids)},
          {"stop", true},
          {"model", exchange.model},
          {"stop_type", stop_type},
          {"tokens_predicted", final.n_generated},
          {"tokens_evaluated", exchange.n_prompt},
          {"tokens_cached", final.timings.n_cached_tokens},
          {"truncated", false},
          {"timings", timings_json(final.timings, final.time_per_output_token)}};
}

json HttpServer::full_response(const Exchange& exchange, const GenerationUpdate& final, const std::string& text,
                               const std::vector<GeneratedToken>& tokens) const {
  const PieceOf piece = [this](int32_t id) { return piece_of(id); };
  json choice = {{"index", 0}};
  if (exchange.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    choice["logprobs"] =
        exchange.logprobs ? chat_logprobs_json(tokens, piece, exchange.top_logprobs > 0) : json(nullptr);
  } else {
    choice["text"] = text;
    choice["logprobs"] = exchange.logprobs ? completion_logprobs_json(tokens, piece, 0) : json(nullptr);
  }
  if (exchange.return_tokens) {
    json ids = json::array();
    for (const GeneratedToken& token : tokens) ids.push_back(token.id);
    choice["tokens"] = std::move(ids);
  }
  choice["finish_reason"] = final.finish_reason;
  return {{"id", exchange.id},
          {"object", exchange.chat ? "chat.completion" : "text_completion"},
          {"created", exchange.created},
          {"model", exchange.model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_json(exchange.n_prompt, final.n_generated, final.timings.n_cached_tokens)},
          {"timings", timings_json(final.timings, final.time_per_output_token)}};
}

void HttpServer::record_end(Exchange& exchange, const GenerationUpdate& final) {
  exchange.counted = true;
  if (final.finish_reason == "error") {
    metrics_.count(Outcome::failed);
    return;
  }
  metrics_.count(final.finish_reason == "cancelled" ? Outcome::cancelled : Outcome::completed);
  metrics_.finished(final, exchange.n_prompt);
  metrics_.observe_duration(std::chrono::duration<double>(Clock::now() - exchange.arrival).count());
}

void HttpServer::abandon(Exchange& exchange) {
  if (exchange.counted) return;
  exchange.counted = true;
  loop_->cancel(exchange.generation);
  metrics_.count(Outcome::cancelled);
}

bool HttpServer::stream_events(Exchange& exchange, httplib::DataSink& sink) {
  const auto send = [&](const std::string& payload) {
    const std::string event = "data: " + payload + "\n\n";
    return sink.write(event.data(), event.size());
  };
  const auto gone = [&] {
    abandon(exchange);
    return false;
  };
  bool first = true;
  int64_t text_offset = 0;
  while (true) {
    GenerationUpdate update;
    if (!exchange.generation->take(update, kKeepAliveEvery)) {
      static const std::string kComment = ": keep-alive\n\n";
      if (!sink.write(kComment.data(), kComment.size())) return gone();
      continue;
    }
    if (!update.text.empty() || !update.tokens.empty() || (first && exchange.chat)) {
      if (!send(dump(chunk(exchange, update.text, update.tokens, first, "", text_offset)))) return gone();
      first = false;
    }
    if (!update.done) continue;
    record_end(exchange, update);
    if (update.finish_reason == "error") {
      send(dump(error_body({500, update.error, "", "server_error"})));
    } else if (exchange.native) {
      // llama-server ends its /completion stream with the stop: true object, no [DONE].
      const bool sent = send(dump(native_final(exchange, update, "", {})));
      sink.done();
      return sent;
    } else {
      json last = chunk(exchange, "", {}, false, update.finish_reason, text_offset);
      last["usage"] = usage_json(exchange.n_prompt, update.n_generated, update.timings.n_cached_tokens);
      last["timings"] = timings_json(update.timings, update.time_per_output_token);
      if (!send(dump(last))) return false;
      if (exchange.include_usage) {
        json usage = {{"id", exchange.id},
                      {"object", exchange.chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", exchange.created},
                      {"model", exchange.model},
                      {"choices", json::array()},
                      {"usage", usage_json(exchange.n_prompt, update.n_generated, update.timings.n_cached_tokens)}};
        if (!send(dump(usage))) return false;
      }
    }
    send("[DONE]");
    sink.done();
    return true;
  }
}

bool HttpServer::write_whole(Exchange& exchange, httplib::DataSink& sink) {
  Clock::time_point last_write = Clock::now();
  while (true) {
    GenerationUpdate update;
    const bool got = exchange.generation->take(update, kKeepAliveEvery);
    // Leading whitespace is valid JSON; it lets a write fail when the client has gone. Written on a clock, not
    // only when output stalls: while tokens flow, nothing else is written until the end.
    if (!got || Clock::now() - last_write >= kKeepAliveEvery) {
      if (!sink.write(" ", 1)) {
        abandon(exchange);
        return false;
      }
      last_write = Clock::now();
      if (!got) continue;
    }
    if (!absorb(exchange, update)) continue;
    const std::string body = dump(final_answer(exchange, update).second);
    sink.write(body.data(), body.size());
    sink.done();
    return true;
  }
}

}  // namespace

Result<std::unique_ptr<Server>> Server::create(const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535) return Status::errorf("port must be in [0, 65535], got {}", options.port);
  if (options.max_queue < 0 || options.max_queue > 1024) {
    return Status::errorf("max-queue must be in [0, 1024], got {}", options.max_queue);
  }
  if (options.timeout_seconds < 1) return Status::errorf("timeout must be at least 1 second, got {}", options.timeout_seconds);
  if (options.read_timeout_seconds < 1 || options.read_timeout_seconds > options.timeout_seconds) {
    return Status::errorf("read-timeout must be in [1, timeout = {}] seconds, got {}", options.timeout_seconds,
                          options.read_timeout_seconds);
  }
  // Every admitted request holds its connection while it waits or decodes; a full queue must leave
  // connections over for /health and for the 429s.
  const int64_t n_admitted = static_cast<int64_t>(options.engine.n_slots) + options.max_queue;
  if (options.max_connections <= n_admitted || options.max_connections > 1'000'000) {
    return Status::errorf("max-connections must be in [slots + max-queue + 1 = {}, 1000000], got {}", n_admitted + 1,
                          options.max_connections);
  }
  if (options.engine.n_slots < 1 || options.engine.n_slots > 256) {
    return Status::errorf("slots must be in [1, 256], got {}", options.engine.n_slots);
  }
  if (!std::filesystem::exists(options.engine.model_path)) {
    return Status::errorf("{}: no such model file", options.engine.model_path);
  }
  return std::unique_ptr<Server>(new HttpServer(options));
}

}  // namespace rwd::server
