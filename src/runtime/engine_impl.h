// EngineImpl: the Engine of the public API for plain decoding. One step = schedule (a token budget over
// busy slots: prompt chunks and single decode tokens) → forward → sample → emit. Requests beyond the
// slots wait in a queue. Speculation plugs in at the sample stage (later issues).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "rewind/engine.h"
#include "runtime/slot.h"
#include "state/model_state.h"
#include "tokenizer/tokenizer.h"

namespace rwd::runtime {

class EngineImpl final : public Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& options);

  const ModelInfo& info() const override { return info_; }
  Result<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos, bool parse_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  Result<std::string> format_chat(const std::vector<ChatMessage>& messages) const override;
  bool add_bos_default() const override;

  Result<int64_t> submit(Request request, std::function<void(const TokenEvent&)> on_token) override;
  Status step() override;
  bool idle() const override;
  void cancel(int64_t request_id) override;
  RequestTimings timings(int64_t request_id) const override;

 private:
  struct Pending {
    int64_t id;
    Request request;
    std::function<void(const TokenEvent&)> on_token;
  };

  EngineImpl() = default;
  void assign_pending();
  void finish(Slot& slot, FinishReason reason);
  void handle_logits(Slot& slot, const float* logits);

  EngineOptions options_;
  ModelInfo info_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<state::ModelState> state_;
  std::unique_ptr<model::ForwardContext> forward_;
  std::vector<Slot> slots_;
  std::deque<Pending> pending_;
  std::map<int64_t, RequestTimings> finished_timings_;
  int64_t next_request_id_ = 1;
  model::Batch batch_;
  std::vector<float> logits_;
  std::vector<float> logprob_scratch_;
};

}  // namespace rwd::runtime
