// The public API of `rewind serve`, the OpenAI-compatible HTTP server (DESIGN §7): cpp-httplib threads parse
// and answer requests, one engine thread decodes every slot together. Admission is bounded (slots + queue, 429 beyond), a client
// that goes away has its request cancelled, and every bad request gets a 4xx with an OpenAI-style error.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "rewind/engine.h"

namespace rwd::server {

struct ServerOptions {
  EngineOptions engine;
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (see Server::port)
  std::string api_key;              // non-empty: /v1, /metrics and /slots need "Authorization: Bearer <key>"
  int max_queue = 64;               // requests waiting for a slot before 429
  int timeout_seconds = 600;        // socket write timeout: a client that stops reading its answer
  int read_timeout_seconds = 30;    // a request's headers and body, per read: slow senders lose the connection
  int max_connections = 1024;       // open connections served at once; beyond, 503 (bounded by the fd limit)
  size_t max_body_bytes = 8 << 20;  // larger bodies get 413
  std::string model_alias;          // the model id clients see; default: the GGUF's name or file name
  std::string cors_origin;          // a web origin allowed to call the API from a browser ("*": any); empty: none
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> create(const ServerOptions& options);
  virtual ~Server() = default;
  // Binds the socket and starts answering; the model loads in the background (/health says 503 meanwhile).
  virtual Status start() = 0;
  virtual int port() const = 0;
  // Blocks until stop(), the end of a drain, or a fatal engine failure; returns what failed, if anything.
  virtual Status wait() = 0;
  // Stops admitting generation requests (503, and /health says "draining" so a load balancer moves away) and
  // lets the admitted ones finish; wait() returns once none is left. Call stop() after, or to cut it short.
  virtual void drain() = 0;
  virtual void stop() = 0;
};

}  // namespace rwd::server
