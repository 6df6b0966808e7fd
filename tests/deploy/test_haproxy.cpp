// Two `rewind serve` replicas behind HAProxy with deploy/haproxy.cfg as shipped, on loopback ports: a
// conversation keeps reaching the replica that holds its prefix (its reuse counters prove it), a replica drained
// by SIGTERM loses no request (the load balancer retries its 503s elsewhere), and after a replica is killed
// its open requests fail visibly while new ones reach the survivor at once. Needs Debian's haproxy.
// links: rewind_app PkgConfig::HTTPLIB nlohmann_json::nlohmann_json
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.h"
#include "common/http_client.h"

namespace rwd::test {
namespace {

using namespace std::chrono_literals;

const std::filesystem::path kSourceRoot = std::filesystem::path(REWIND_TEST_DATA).parent_path().parent_path();

std::string haproxy_binary() {
  for (const char* candidate : {"/usr/sbin/haproxy", "/usr/bin/haproxy", "/usr/local/sbin/haproxy"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return "";
}

std::string log_dir() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("rewind_deploy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

struct Replica {
  int port = 0;
  std::unique_ptr<ChildProcess> process;
};

// The replicas and the load balancer, started fresh for each test.
class Deployment : public ::testing::Test {
 protected:
  void SetUp() override {
    haproxy_ = haproxy_binary();
    ASSERT_FALSE(haproxy_.empty()) << "haproxy is not installed: scripts/setup.sh installs Debian's package";
    for (Replica& replica : replicas_) {
      replica.port = free_port();
      start_replica(replica);
    }
    for (Replica& replica : replicas_) ASSERT_TRUE(healthy(replica)) << replica.process->log();
    lb_port_ = free_port();
    const std::string address = "127.0.0.1:";
    balancer_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{haproxy_, "-db", "-f", (kSourceRoot / "deploy" / "haproxy.cfg").string()},
        logs_ + "/haproxy.log",
        std::vector<std::string>{"REWIND_LB_BIND=" + address + std::to_string(lb_port_),
                                 "REWIND_REPLICA_1=" + address + std::to_string(replicas_[0].port),
                                 "REWIND_REPLICA_2=" + address + std::to_string(replicas_[1].port)});
    ASSERT_TRUE(balancer_->started());
    // Up once both replicas pass their health checks (rise 2 × inter 1 s).
    ASSERT_TRUE(eventually([&] { return both_replicas_answer(); }, 20s)) << balancer_->log();
  }

  void start_replica(Replica& replica) {
    replica.process = std::make_unique<ChildProcess>(
        std::vector<std::string>{REWIND_BINARY, "serve", "-m", std::string(REWIND_TEST_DATA) + "/qwen35-tiny-f32.gguf",
                                 "--port", std::to_string(replica.port), "-t", "1", "-s", "2", "-c", "8192",
                                 "--chat-template", "chatml"},
        logs_ + "/replica" + std::to_string(replica.port) + ".log");
    ASSERT_TRUE(replica.process->started());
  }

  bool healthy(const Replica& replica) {
    return eventually([&] { return get(replica.port, "/health").status == 200; }, 60s);
  }

  double completed(const Replica& replica) {
    return metric(replica.port, "rewind_requests_total{outcome=\"completed\"}");
  }

  // Keyless requests go by least connections; while one replica is still marked down, all go to the other.
  bool both_replicas_answer() {
    const double before[2] = {completed(replicas_[0]), completed(replicas_[1])};
    for (int i = 0; i < 4; ++i) {
      std::vector<std::thread> clients;
      for (int j = 0; j < 2; ++j) clients.emplace_back([&] { post(lb_port_, "/v1/completions", short_body()); });
      for (std::thread& client : clients) client.join();
    }
    return completed(replicas_[0]) > before[0] && completed(replicas_[1]) > before[1];
  }

  static json short_body() { return {{"prompt", "ping"}, {"max_tokens", 4}, {"temperature", 0}}; }

  // The replica that answers requests with this X-Session-Id.
  int replica_of(const std::string& session) {
    const double before[2] = {completed(replicas_[0]), completed(replicas_[1])};
    const Reply reply = post(lb_port_, "/v1/completions", short_body(), {{"X-Session-Id", session}});
    EXPECT_EQ(reply.status, 200) << reply.body;
    if (completed(replicas_[0]) > before[0]) return 0;
    if (completed(replicas_[1]) > before[1]) return 1;
    return -1;
  }

  std::string haproxy_;
  std::string logs_ = log_dir();
  Replica replicas_[2];
  std::unique_ptr<ChildProcess> balancer_;
  int lb_port_ = 0;
};

TEST_F(Deployment, ConversationsKeepReachingTheReplicaThatHoldsThem) {
  struct Conversation {
    std::string key;
    bool in_header;  // X-Session-Id, or the body's "user"
    std::string history;
    int64_t n_previous_prompt = 0;
  };
  std::vector<Conversation> conversations;
  for (int i = 0; i < 8; ++i) {
    conversations.push_back({"conversation-" + std::to_string(i), i % 2 == 0,
                             "Conversation " + std::to_string(i) + " begins with its own words. ", 0});
  }
  double reported_cached = 0;
  for (int turn = 0; turn < 3; ++turn) {
    for (Conversation& conversation : conversations) {
      conversation.history += "Turn " + std::to_string(turn) + ": tell me more.";
      json body = {{"prompt", conversation.history}, {"max_tokens", 8}, {"temperature", 0}};
      httplib::Headers headers;
      if (conversation.in_header) {
        headers.emplace("X-Session-Id", conversation.key);
      } else {
        body["user"] = conversation.key;
      }
      const Reply reply = post(lb_port_, "/v1/completions", body, headers);
      ASSERT_EQ(reply.status, 200) << reply.body;
      const json response = reply.parsed();
      const int64_t cached = response["usage"]["prompt_tokens_details"]["cached_tokens"];
      const int64_t prompt = response["usage"]["prompt_tokens"];
      // Only the replica that ran the previous turn holds the previous prompt and reply: at least the previous
      // prompt is reused. (Another replica would share at most the first word.)
      if (turn > 0) {
        EXPECT_GE(cached, conversation.n_previous_prompt)
            << conversation.key << " turn " << turn << " reached a replica without it";
      }
      conversation.n_previous_prompt = prompt;
      reported_cached += static_cast<double>(cached);
      conversation.history += response["choices"][0]["text"].get<std::string>();
    }
  }
  // The replicas' own counters agree with what the responses said, and both replicas held conversations.
  const double counted[2] = {metric(replicas_[0].port, "rewind_prompt_tokens_cached_total"),
                             metric(replicas_[1].port, "rewind_prompt_tokens_cached_total")};
  EXPECT_EQ(counted[0] + counted[1], reported_cached);
  EXPECT_GT(counted[0], 0.0);
  EXPECT_GT(counted[1], 0.0);
}

TEST_F(Deployment, DrainedReplicaLosesNoRequest) {
  std::atomic<bool> sending{true};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::atomic<int> n_answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; sending; ++i) {
        // Half keyed (hashed to a replica, maybe the drained one), half by least connections.
        httplib::Headers headers;
        if (c % 2 == 0) headers.emplace("X-Session-Id", "drain-" + std::to_string(c) + "-" + std::to_string(i % 5));
        const json body = {{"prompt", "Count to a hundred: 1 2 3"}, {"max_tokens", 48}, {"temperature", 0},
                           {"ignore_eos", true}};
        const Reply reply = post(lb_port_, "/v1/completions", body, headers);
        const json response = reply.parsed();
        if (reply.status != 200 || response["usage"]["completion_tokens"] != 48) {
          std::lock_guard lock(failures_mutex);
          failures.push_back(std::to_string(reply.status) + " " + reply.body.substr(0, 200));
        }
        ++n_answered;
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return n_answered >= 20; }, 30s));
  replicas_[0].process->signal(SIGTERM);
  // It finishes its admitted requests and exits on its own, cleanly.
  const std::optional<int> exit_status = replicas_[0].process->wait_exit(30s);
  const int answered_at_exit = n_answered;
  EXPECT_EQ(exit_status, std::optional<int>(0)) << replicas_[0].process->log();
  // Requests go on, all to the survivor.
  EXPECT_TRUE(eventually([&] { return n_answered >= answered_at_exit + 20; }, 30s));
  sending = false;
  for (std::thread& client : clients) client.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " requests failed, the first: " << failures.front();
  EXPECT_NE(replicas_[0].process->log().find("draining"), std::string::npos) << replicas_[0].process->log();
}

TEST_F(Deployment, KilledReplicaFailsItsOpenRequestsAndTheSurvivorTakesOver) {
  // A conversation key that lives on replica 0, the one to be killed.
  std::string session;
  for (int i = 0; i < 32 && session.empty(); ++i) {
    if (replica_of("victim-" + std::to_string(i)) == 0) session = "victim-" + std::to_string(i);
  }
  ASSERT_FALSE(session.empty()) << "no key out of 32 hashed to replica 0";

  // A streamed request that runs for many seconds on replica 0; the kill comes once tokens flow.
  RawConnection open_request(lb_port_);
  ASSERT_TRUE(open_request.connected());
  const std::string body = json{{"prompt", "Go on forever"}, {"max_tokens", 8000}, {"temperature", 0},
                                {"ignore_eos", true}, {"stream", true}}.dump();
  ASSERT_TRUE(open_request.send_text("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Session-Id: " + session +
                                     "\r\nContent-Type: application/json\r\nContent-Length: " +
                                     std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(open_request.read_until("data: {", 30s)) << open_request.received();
  replicas_[0].process->signal(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  // The load balancer closes the client's connection: the stream ends without its end marker or a finish
  // reason, which is how a streaming client tells a cut answer. (The headers had gone out; nothing else can
  // be said.)
  EXPECT_FALSE(open_request.read_until("[DONE]", 10s)) << open_request.received().substr(0, 300);
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 5s) << "the cut connection was not closed";
  EXPECT_EQ(open_request.received().find("\"finish_reason\":\"length\""), std::string::npos);

  // The same conversation goes on at the survivor: the refused connection is retried there at once, before
  // the health checks (fall 2 × inter 1 s) even mark the dead replica down.
  for (int i = 0; i < 5; ++i) {
    const Reply reply = post(lb_port_, "/v1/completions", short_body(), {{"X-Session-Id", session}});
    EXPECT_EQ(reply.status, 200) << reply.body;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(seconds, 2.0) << "the survivor took over only after " << seconds << " s";
  EXPECT_GE(completed(replicas_[1]), 5.0);
}

}  // namespace
}  // namespace rwd::test
