// A backend that runs every op on two backends and names the first op whose outputs differ beyond a tolerance:
// how a new backend (a kernel set, later Vulkan) is checked against a trusted one inside whole forwards, where
// a test of each kernel alone cannot reach (the shapes, aliasing and state a model really hands them).
//
// Per op, the secondary runs first on copies of the op's outputs (and of any state it updates in place), then
// the primary on the real memory, then the two are compared. The forward goes on with the primary's values, so
// every op is compared on the same inputs and a difference is named where it starts rather than where it has
// grown; the outputs of a forward through a tee are bit-identical to the primary's alone. Both backends must
// address host memory (the CPU backend's kernel sets).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "compute/backend.h"

namespace rwd::compute {

struct TeeReport {
  int64_t ops = 0;         // ops compared
  int64_t mismatches = 0;  // of them, those beyond the tolerance
  // The first mismatch: "op 'rms_norm' (op 12): value 3 of 256 is 1.25 against 1.5 (difference 0.2 of the
  // output's largest |value|, tolerance 0.001)"; empty when there was none.
  std::string first;
  std::string first_op;
  // The largest difference seen, relative to its output's largest |value|, and its op.
  double worst = 0.0;
  std::string worst_op;
};

class TeeBackend final : public Backend {
 public:
  // tolerance: the largest |primary - secondary| allowed in an output, relative to the largest |value| the
  // secondary wrote there (0: bit for bit; integer outputs, the routed experts, always must agree exactly).
  TeeBackend(std::unique_ptr<Backend> primary, std::unique_ptr<Backend> secondary, double tolerance);
  ~TeeBackend() override;

  const TeeReport& report() const;

  std::string name() const override;
  void matmul(const tensor::Tensor& weight, ConstRows x, Rows y) override;
  void matmul_shared_input(std::initializer_list<MatmulOutput> outputs, ConstRows x) override;
  void rms_norm(ConstRows x, const float* weight, Rows y, float eps) override;
  void l2_norm(ConstRows x, Rows y, float eps) override;
  void gated_rms_norm(ConstRows x, ConstRows z, const float* weight, Rows y, float eps,
                      ops::GateActivation activation) override;
  void rope(Rows x, std::span<const int32_t> positions, const ops::RopeParams& params) override;
  void swiglu(ConstRows gate, ConstRows up, Rows out) override;
  void geglu(ConstRows gate, ConstRows up, Rows out) override;
  void silu(ConstRows x, Rows out) override;
  void relu_sqr(Rows x) override;
  void sigmoid(Rows x) override;
  void sigmoid_mul(Rows x, ConstRows gate) override;
  void embed(const tensor::Tensor& table, std::span<const int32_t> tokens, float scale, Rows out) override;
  void gather_rows(ConstRows src, std::span<const int64_t> rows, Rows dst) override;
  void copy(ConstRows src, Rows dst) override;
  void add(Rows acc, ConstRows delta) override;
  void mul(ConstRows a, ConstRows b, Rows out) override;
  void scale(Rows x, float factor) override;
  void softcap(Rows x, float cap) override;
  void add_bias(Rows x, const float* bias) override;
  void softplus_bias(ConstRows x, const float* bias, Rows out) override;
  void mul_groups(ConstRows x, const float* factors, int64_t group, Rows out) override;
  void add_mul_groups(Rows acc, ConstRows x, const float* factors, int64_t group) override;
  void route_experts(ConstRows logits, const ops::RouterParams& params, int64_t n_used, std::span<int32_t> experts,
                     std::span<float> weights) override;
  void moe_experts(ConstRows x, std::span<const int32_t> experts, int64_t n_used, const ops::ExpertWeights& weights,
                   Rows routed) override;
  void moe_mix(ConstRows routed, std::span<const float> weights, int64_t n_used, Rows out, bool accumulate) override;
  void sigmoid_dot_scale(Rows rows, ConstRows x, const float* gate) override;
  void store_kv(ConstRows src, const ops::KvStore& dst, std::span<const int32_t> rows) override;
  void attention_sequences(std::span<const ops::AttentionCall> calls, const ops::AttentionParams& params) override;
  void gated_delta_rules(std::span<const ops::GatedDeltaCall> calls, const ops::GatedDeltaParams& params) override;
  void gated_delta_decay(const float* g, float* decay, int64_t n) override;
  void fold_delta_records(float* state, const ops::GatedDeltaRecords& records,
                          const ops::GatedDeltaParams& params) override;
  void causal_conv1d(ConstRows x, const float* weight, int64_t d_conv, const float* bias, float* window,
                     Rows out) override;
  void causal_conv1d_tree(ConstRows x, const int32_t* parents, const float* weight, int64_t d_conv,
                          const float* bias, const float* window, float* scratch, Rows out) override;
  void advance_conv_window(ConstRows x, int64_t d_conv, float* window) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rwd::compute
