#include "compute/tee_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/check.h"

namespace rwd::compute {
namespace {

// A copy of a view's values, contiguous, and the view of the copy that the secondary writes: in-place ops find
// their old values there, as they would in the real memory.
struct Shadow {
  std::vector<float> values;
  Rows view;
};

Shadow shadow_of(ConstRows of) {
  Shadow shadow;
  shadow.values.resize(static_cast<size_t>(of.size()));
  for (int64_t r = 0; r < of.n_rows; ++r) std::copy_n(of.row(r), of.width, shadow.values.data() + r * of.width);
  shadow.view = Rows{shadow.values.data(), of.n_rows, of.width};
  return shadow;
}

Shadow shadow_of(const float* data, int64_t n) { return shadow_of(ConstRows{data, 1, n}); }

}  // namespace

struct TeeBackend::Impl {
  std::unique_ptr<Backend> primary;
  std::unique_ptr<Backend> secondary;
  double tolerance;
  TeeReport report;

  // Compares what the primary wrote with what the secondary wrote, for one output of the current op.
  void compare(const char* op, ConstRows got, ConstRows want) {
    REWIND_CHECK(got.n_rows == want.n_rows && got.width == want.width, "tee: {}: outputs of two shapes", op);
    double largest = 0.0;
    for (int64_t r = 0; r < want.n_rows; ++r) {
      for (int64_t c = 0; c < want.width; ++c) largest = std::max(largest, std::abs(double{want.row(r)[c]}));
    }
    const double scale = largest > 0.0 ? largest : 1.0;
    bool reported = false;
    for (int64_t r = 0; r < want.n_rows; ++r) {
      for (int64_t c = 0; c < want.width; ++c) {
        const float a = got.row(r)[c];
        const float b = want.row(r)[c];
        if (std::memcmp(&a, &b, sizeof a) == 0) continue;
        const double relative = std::isnan(a) || std::isnan(b) ? INFINITY : std::abs(double{a} - b) / scale;
        if (relative > report.worst) {
          report.worst = relative;
          report.worst_op = op;
        }
        if (relative <= tolerance || reported) continue;
        reported = true;
        ++report.mismatches;
        if (report.first.empty()) {
          report.first_op = op;
          report.first = fmt::format(
              "op '{}' (op {}): value {} of {} is {} against {} (difference {:.3g} of the output's largest |value|, "
              "tolerance {:.3g})",
              op, report.ops, r * want.width + c, want.size(), a, b, relative, tolerance);
        }
      }
    }
  }
  void compare(const char* op, const float* got, const float* want, int64_t n) {
    compare(op, ConstRows{got, 1, n}, ConstRows{want, 1, n});
  }
  void compare_exact(const char* op, std::span<const int32_t> got, std::span<const int32_t> want) {
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == want[i]) continue;
      ++report.mismatches;
      report.worst = INFINITY;
      report.worst_op = op;
      if (report.first.empty()) {
        report.first_op = op;
        report.first = fmt::format("op '{}' (op {}): entry {} of {} is {} against {}", op, report.ops, i, got.size(),
                                   got[i], want[i]);
      }
      return;
    }
  }

  // The common shape: one output view, written (or updated in place) by `run(backend, out)`.
  template <typename Run>
  void one_output(const char* op, Rows out, const Run& run) {
    Shadow shadow = shadow_of(out);
    run(*secondary, shadow.view);
    run(*primary, out);
    compare(op, out, shadow.view);
    ++report.ops;
  }
};

TeeBackend::TeeBackend(std::unique_ptr<Backend> primary, std::unique_ptr<Backend> secondary, double tolerance)
    : impl_(std::make_unique<Impl>(Impl{std::move(primary), std::move(secondary), tolerance, {}})) {
  REWIND_CHECK(impl_->primary != nullptr && impl_->secondary != nullptr, "tee: a backend is missing");
  REWIND_CHECK(tolerance >= 0.0, "tee: tolerance {} is negative", tolerance);
}

TeeBackend::~TeeBackend() = default;

const TeeReport& TeeBackend::report() const { return impl_->report; }

std::string TeeBackend::name() const {
  return fmt::format("tee ({} | {})", impl_->primary->name(), impl_->secondary->name());
}

void TeeBackend::matmul(const tensor::Tensor& weight, ConstRows x, Rows y) {
  impl_->one_output("matmul", y, [&](Backend& b, Rows out) { b.matmul(weight, x, out); });
}

void TeeBackend::matmul_shared_input(std::initializer_list<MatmulOutput> outputs, ConstRows x) {
  std::vector<Shadow> shadows;
  std::vector<MatmulOutput> redirected;
  for (const MatmulOutput& output : outputs) {
    shadows.push_back(shadow_of(output.y, x.n_rows * output.weight->ne[1]));
  }
  for (size_t i = 0; i < outputs.size(); ++i) redirected.push_back({outputs.begin()[i].weight, shadows[i].values.data()});
  // The interface takes an initializer list: the secondary's products one by one, each its own matmul's bits.
  for (const MatmulOutput& output : redirected) {
    impl_->secondary->matmul(*output.weight, x, {output.y, x.n_rows, output.weight->ne[1]});
  }
  impl_->primary->matmul_shared_input(outputs, x);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const MatmulOutput& output = outputs.begin()[i];
    impl_->compare("matmul_shared_input", output.y, shadows[i].values.data(), x.n_rows * output.weight->ne[1]);
  }
  ++impl_->report.ops;
}

void TeeBackend::rms_norm(ConstRows x, const float* weight, Rows y, float eps) {
  impl_->one_output("rms_norm", y, [&](Backend& b, Rows out) { b.rms_norm(x, weight, out, eps); });
}

void TeeBackend::l2_norm(ConstRows x, Rows y, float eps) {
  impl_->one_output("l2_norm", y, [&](Backend& b, Rows out) { b.l2_norm(x, out, eps); });
}

void TeeBackend::gated_rms_norm(ConstRows x, ConstRows z, const float* weight, Rows y, float eps,
                                ops::GateActivation activation) {
  impl_->one_output("gated_rms_norm", y,
                    [&](Backend& b, Rows out) { b.gated_rms_norm(x, z, weight, out, eps, activation); });
}

void TeeBackend::rope(Rows x, std::span<const int32_t> positions, const ops::RopeParams& params) {
  impl_->one_output("rope", x, [&](Backend& b, Rows out) { b.rope(out, positions, params); });
}

void TeeBackend::swiglu(ConstRows gate, ConstRows up, Rows out) {
  impl_->one_output("swiglu", out, [&](Backend& b, Rows o) { b.swiglu(gate, up, o); });
}

void TeeBackend::geglu(ConstRows gate, ConstRows up, Rows out) {
  impl_->one_output("geglu", out, [&](Backend& b, Rows o) { b.geglu(gate, up, o); });
}

void TeeBackend::silu(ConstRows x, Rows out) {
  impl_->one_output("silu", out, [&](Backend& b, Rows o) { b.silu(x, o); });
}

void TeeBackend::relu_sqr(Rows x) {
  impl_->one_output("relu_sqr", x, [&](Backend& b, Rows o) { b.relu_sqr(o); });
}

void TeeBackend::sigmoid(Rows x) {
  impl_->one_output("sigmoid", x, [&](Backend& b, Rows o) { b.sigmoid(o); });
}

void TeeBackend::sigmoid_mul(Rows x, ConstRows gate) {
  impl_->one_output("sigmoid_mul", x, [&](Backend& b, Rows o) { b.sigmoid_mul(o, gate); });
}

void TeeBackend::embed(const tensor::Tensor& table, std::span<const int32_t> tokens, float scale, Rows out) {
  impl_->one_output("embed", out, [&](Backend& b, Rows o) { b.embed(table, tokens, scale, o); });
}

void TeeBackend::gather_rows(ConstRows src, std::span<const int64_t> rows, Rows dst) {
  impl_->one_output("gather_rows", dst, [&](Backend& b, Rows o) { b.gather_rows(src, rows, o); });
}

void TeeBackend::copy(ConstRows src, Rows dst) {
  impl_->one_output("copy", dst, [&](Backend& b, Rows o) { b.copy(src, o); });
}

void TeeBackend::add(Rows acc, ConstRows delta) {
  impl_->one_output("add", acc, [&](Backend& b, Rows o) { b.add(o, delta); });
}

void TeeBackend::mul(ConstRows a, ConstRows b_rows, Rows out) {
  impl_->one_output("mul", out, [&](Backend& b, Rows o) { b.mul(a, b_rows, o); });
}

void TeeBackend::scale(Rows x, float factor) {
  impl_->one_output("scale", x, [&](Backend& b, Rows o) { b.scale(o, factor); });
}

void TeeBackend::softcap(Rows x, float cap) {
  impl_->one_output("softcap", x, [&](Backend& b, Rows o) { b.softcap(o, cap); });
}

void TeeBackend::add_bias(Rows x, const float* bias) {
  impl_->one_output("add_bias", x, [&](Backend& b, Rows o) { b.add_bias(o, bias); });
}

void TeeBackend::softplus_bias(ConstRows x, const float* bias, Rows out) {
  impl_->one_output("softplus_bias", out, [&](Backend& b, Rows o) { b.softplus_bias(x, bias, o); });
}

void TeeBackend::mul_groups(ConstRows x, const float* factors, int64_t group, Rows out) {
  impl_->one_output("mul_groups", out, [&](Backend& b, Rows o) { b.mul_groups(x, factors, group, o); });
}

void TeeBackend::add_mul_groups(Rows acc, ConstRows x, const float* factors, int64_t group) {
  impl_->one_output("add_mul_groups", acc, [&](Backend& b, Rows o) { b.add_mul_groups(o, x, factors, group); });
}

void TeeBackend::route_experts(ConstRows logits, const ops::RouterParams& params, int64_t n_used,
                               std::span<int32_t> experts, std::span<float> weights) {
  std::vector<int32_t> shadow_experts(experts.size());
  std::vector<float> shadow_weights(weights.size());
  impl_->secondary->route_experts(logits, params, n_used, shadow_experts, shadow_weights);
  impl_->primary->route_experts(logits, params, n_used, experts, weights);
  impl_->compare_exact("route_experts", experts, shadow_experts);
  impl_->compare("route_experts", weights.data(), shadow_weights.data(), static_cast<int64_t>(weights.size()));
  ++impl_->report.ops;
}

void TeeBackend::moe_experts(ConstRows x, std::span<const int32_t> experts, int64_t n_used,
                             const ops::ExpertWeights& weights, Rows routed) {
  impl_->one_output("moe_experts", routed, [&](Backend& b, Rows o) { b.moe_experts(x, experts, n_used, weights, o); });
}

void TeeBackend::moe_mix(ConstRows routed, std::span<const float> weights, int64_t n_used, Rows out, bool accumulate) {
  impl_->one_output("moe_mix", out, [&](Backend& b, Rows o) { b.moe_mix(routed, weights, n_used, o, accumulate); });
}

void TeeBackend::sigmoid_dot_scale(Rows rows, ConstRows x, const float* gate) {
  impl_->one_output("sigmoid_dot_scale", rows, [&](Backend& b, Rows o) { b.sigmoid_dot_scale(o, x, gate); });
}

void TeeBackend::store_kv(ConstRows src, const ops::KvStore& dst, std::span<const int32_t> rows) {
  // The secondary stores into rows of its own, which are then read back as floats beside the primary's.
  const int32_t last = rows.empty() ? -1 : *std::max_element(rows.begin(), rows.end());
  std::vector<uint8_t> shadow(static_cast<size_t>(last + 1) * dst.row_bytes);
  const ops::KvStore shadow_store{shadow.data(), dst.type, dst.row_bytes, last + 1};
  impl_->secondary->store_kv(src, shadow_store, rows);
  impl_->primary->store_kv(src, dst, rows);
  const auto& traits = tensor::dtype_traits(dst.type);
  std::vector<float> got(static_cast<size_t>(src.width));
  std::vector<float> want(static_cast<size_t>(src.width));
  for (const int32_t row : rows) {
    traits.to_float(static_cast<const uint8_t*>(dst.data) + static_cast<size_t>(row) * dst.row_bytes, got.data(),
                    src.width);
    traits.to_float(shadow.data() + static_cast<size_t>(row) * dst.row_bytes, want.data(), src.width);
    impl_->compare("store_kv", got.data(), want.data(), src.width);
  }
  ++impl_->report.ops;
}

void TeeBackend::attention_sequences(std::span<const ops::AttentionCall> calls, const ops::AttentionParams& params) {
  const int64_t width = params.n_head * params.head_dim;
  std::vector<Shadow> shadows;
  std::vector<ops::AttentionCall> redirected(calls.begin(), calls.end());
  for (ops::AttentionCall& call : redirected) {
    shadows.push_back(shadow_of(call.out, call.n_tokens * width));
    call.out = shadows.back().values.data();
  }
  impl_->secondary->attention_sequences(redirected, params);
  impl_->primary->attention_sequences(calls, params);
  for (size_t i = 0; i < calls.size(); ++i) {
    impl_->compare("attention_sequences", calls[i].out, shadows[i].values.data(), calls[i].n_tokens * width);
  }
  ++impl_->report.ops;
}

void TeeBackend::gated_delta_rules(std::span<const ops::GatedDeltaCall> calls, const ops::GatedDeltaParams& params) {
  const int64_t state_floats = params.n_head_v * params.head_v_dim * params.head_k_dim;
  const int64_t v_width = params.n_head_v * params.head_v_dim;
  // Calls on one state share its shadow (they run in order on it); out and u_out have one each.
  std::map<float*, Shadow> states;
  std::vector<Shadow> outs;
  std::vector<Shadow> us;
  std::vector<ops::GatedDeltaCall> redirected(calls.begin(), calls.end());
  for (ops::GatedDeltaCall& call : redirected) {
    if (!states.contains(call.state)) states.emplace(call.state, shadow_of(call.state, state_floats));
    float* state = call.state;
    call.state = states.at(state).values.data();
    outs.push_back(shadow_of(call.out, call.out != nullptr ? call.n_tokens * v_width : 0));
    us.push_back(shadow_of(call.u_out, call.u_out != nullptr ? call.n_tokens * v_width : 0));
    if (call.out != nullptr) call.out = outs.back().values.data();
    if (call.u_out != nullptr) call.u_out = us.back().values.data();
  }
  impl_->secondary->gated_delta_rules(redirected, params);
  impl_->primary->gated_delta_rules(calls, params);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].out != nullptr) {
      impl_->compare("gated_delta_rules", calls[i].out, outs[i].values.data(), calls[i].n_tokens * v_width);
    }
    if (calls[i].u_out != nullptr) {
      impl_->compare("gated_delta_rules", calls[i].u_out, us[i].values.data(), calls[i].n_tokens * v_width);
    }
  }
  for (const auto& [state, shadow] : states) impl_->compare("gated_delta_rules", state, shadow.values.data(), state_floats);
  ++impl_->report.ops;
}

void TeeBackend::gated_delta_decay(const float* g, float* decay, int64_t n) {
  impl_->one_output("gated_delta_decay", {decay, 1, n}, [&](Backend& b, Rows o) { b.gated_delta_decay(g, o.data, n); });
}

void TeeBackend::fold_delta_records(float* state, const ops::GatedDeltaRecords& records,
                                    const ops::GatedDeltaParams& params) {
  const int64_t n = params.n_head_v * params.head_v_dim * params.head_k_dim;
  impl_->one_output("fold_delta_records", {state, 1, n},
                    [&](Backend& b, Rows o) { b.fold_delta_records(o.data, records, params); });
}

void TeeBackend::causal_conv1d(ConstRows x, const float* weight, int64_t d_conv, const float* bias, float* window,
                               Rows out) {
  const int64_t window_floats = (d_conv - 1) * x.width;
  Shadow shadow_window = shadow_of(window, window_floats);
  Shadow shadow_out = shadow_of(out);
  impl_->secondary->causal_conv1d(x, weight, d_conv, bias, shadow_window.values.data(), shadow_out.view);
  impl_->primary->causal_conv1d(x, weight, d_conv, bias, window, out);
  impl_->compare("causal_conv1d", out, shadow_out.view);
  impl_->compare("causal_conv1d", window, shadow_window.values.data(), window_floats);
  ++impl_->report.ops;
}

void TeeBackend::causal_conv1d_tree(ConstRows x, const int32_t* parents, const float* weight, int64_t d_conv,
                                    const float* bias, const float* window, float* scratch, Rows out) {
  std::vector<float> own_scratch(static_cast<size_t>((d_conv - 1) * x.width));
  impl_->one_output("causal_conv1d_tree", out, [&](Backend& b, Rows o) {
    b.causal_conv1d_tree(x, parents, weight, d_conv, bias, window, &b == impl_->primary.get() ? scratch : own_scratch.data(), o);
  });
}

void TeeBackend::advance_conv_window(ConstRows x, int64_t d_conv, float* window) {
  impl_->one_output("advance_conv_window", {window, 1, (d_conv - 1) * x.width},
                    [&](Backend& b, Rows o) { b.advance_conv_window(x, d_conv, o.data); });
}

}  // namespace rwd::compute
