// HTTP helpers for the tests that talk to `rewind serve` (in process, or a replica process behind a load
// balancer): one-shot requests with cpp-httplib's client, a raw socket that can vanish or idle, server-sent
// events, Prometheus values and polling with a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace rwd::test {

using nlohmann::json;

struct Reply {
  int status = 0;  // 0: no HTTP response at all
  std::string body;
  std::string content_type;
  httplib::Headers headers;

  json parsed() const { return json::parse(body, nullptr, /*allow_exceptions=*/false); }
};

inline httplib::Client client_for(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(60, 0);
  client.set_write_timeout(10, 0);
  return client;
}

inline Reply to_reply(const httplib::Result& result) {
  Reply reply;
  if (!result) return reply;
  reply.status = result->status;
  reply.body = result->body;
  reply.content_type = result->get_header_value("Content-Type");
  reply.headers = result->headers;
  return reply;
}

inline Reply get(int port, const std::string& path, const httplib::Headers& headers = {}) {
  httplib::Client client = client_for(port);
  return to_reply(client.Get(path, headers));
}

inline Reply post_raw(int port, const std::string& path, const std::string& body, const httplib::Headers& headers = {}) {
  httplib::Client client = client_for(port);
  return to_reply(client.Post(path, headers, body, "application/json"));
}

inline Reply post(int port, const std::string& path, const json& body, const httplib::Headers& headers = {}) {
  return post_raw(port, path, body.dump(), headers);
}

// A client that can vanish: a plain TCP connection, closed whenever the test says.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }

  bool send_post(const std::string& path, const json& body) {
    const std::string payload = body.dump();
    return send_text("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                     "Content-Length: " + std::to_string(payload.size()) + "\r\n\r\n" + payload);
  }

  // Any bytes, e.g. the start of a request that never ends.
  bool send_text(const std::string& text) {
    for (size_t sent = 0; sent < text.size();) {
      const ssize_t n = ::send(fd_, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until `needle` has arrived; false when the deadline passes or the server closes first.
  bool read_until(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (received_.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd entry{fd_, POLLIN, 0};
      if (::poll(&entry, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }

  const std::string& received() const { return received_; }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

// The events of a text/event-stream body, in order; "[DONE]" must be the last.
struct EventStream {
  std::vector<json> chunks;
  bool done = false;
  bool well_formed = true;
};

inline EventStream parse_events(const std::string& body) {
  EventStream out;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(at, end - at);
    at = end + 2;
    if (event.empty() || event[0] == ':') continue;  // keep-alive comments
    if (event.rfind("data: ", 0) != 0 || out.done) {
      out.well_formed = false;
      continue;
    }
    const std::string payload = event.substr(6);
    if (payload == "[DONE]") {
      out.done = true;
      continue;
    }
    json chunk = json::parse(payload, nullptr, false);
    if (chunk.is_discarded()) out.well_formed = false;
    out.chunks.push_back(std::move(chunk));
  }
  return out;
}

// The text of a stream: completions' `text` or chat's `delta.content`, concatenated.
inline std::string stream_text(const EventStream& events) {
  std::string text;
  for (const json& chunk : events.chunks) {
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice.contains("text")) text += choice["text"].get<std::string>();
    if (choice.contains("delta") && choice["delta"].contains("content")) {
      text += choice["delta"]["content"].get<std::string>();
    }
  }
  return text;
}

// Value of one series in Prometheus text, e.g. `rewind_requests_total{outcome="cancelled"}`; NaN when absent.
inline double metric(const std::string& exposition, const std::string& series) {
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nan("");
}

inline double metric(int port, const std::string& series, const httplib::Headers& headers = {}) {
  return metric(get(port, "/metrics", headers).body, series);
}


inline bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

}  // namespace rwd::test
