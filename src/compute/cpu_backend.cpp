#include "compute/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "base/check.h"
#include "base/thread_pool.h"
#include "compute/cpu_moe.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/gated_rms_norm.h"
#include "kernels/cpu/glu.h"
#include "kernels/cpu/l2_norm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_impl.h"

namespace rwd::compute {
namespace {

// The fused kernels take contiguous rows; views with a stride reach only the small ops.
void check_contiguous(const char* op, int64_t n_rows, int64_t width, int64_t stride) {
  REWIND_CHECK(stride == width || n_rows <= 1, "{}: rows of {} values {} apart; the kernel needs them contiguous", op,
               width, stride);
}
template <typename T>
void check_contiguous(const char* op, const RowsOf<T>& rows) {
  check_contiguous(op, rows.n_rows, rows.width, rows.stride);
}
template <typename A, typename B>
void check_same_shape(const char* op, const RowsOf<A>& a, const RowsOf<B>& b) {
  REWIND_CHECK(a.n_rows == b.n_rows && a.width == b.width, "{}: a [{}, {}] view against a [{}, {}] one", op,
               a.n_rows, a.width, b.n_rows, b.width);
}

// Calls fn(row of each view) for every row; the views have the same shape.
template <typename Fn, typename... Views>
void for_each_row(const Fn& fn, const Views&... views) {
  const auto& first = std::get<0>(std::tie(views...));
  for (int64_t r = 0; r < first.n_rows; ++r) fn(views.row(r)...);
}

float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

namespace cpu_detail = kernels::cpu::detail;

// The kernels one CPU backend runs: the float kernels' scalar or AVX2 path, and the matmul's set (dispatched:
// the public entry points, which are what every other caller runs).
struct KernelTable {
  bool dispatched = true;
  kernels::cpu::KernelIsa isa = kernels::cpu::KernelIsa::scalar;
  decltype(&cpu_detail::rms_norm_scalar) rms_norm;
  decltype(&cpu_detail::l2_norm_scalar) l2_norm;
  decltype(&cpu_detail::gated_rms_norm_scalar) gated_rms_norm;
  decltype(&cpu_detail::swiglu_scalar) swiglu;
  decltype(&cpu_detail::geglu_scalar) geglu;
  decltype(&cpu_detail::silu_scalar) silu;
  cpu_detail::CausalConv1dFn conv;
  cpu_detail::AttentionGroupFn attention_group;
  cpu_detail::GatedDeltaRowsFn delta_rows;
  cpu_detail::ApplyRecordRowsFn apply_record_rows;
  decltype(&cpu_detail::gated_delta_decay_scalar) delta_decay;
};

std::optional<kernels::cpu::KernelIsa> isa_of(CpuKernels kernels) {
  using kernels::cpu::KernelIsa;
  switch (kernels) {
    case CpuKernels::dispatched: return std::nullopt;
    case CpuKernels::scalar: return KernelIsa::scalar;
    case CpuKernels::avx2: return KernelIsa::avx2;
    case CpuKernels::avxvnni: return KernelIsa::avxvnni;
    case CpuKernels::avx512vnni: return KernelIsa::avx512vnni;
    case CpuKernels::vnni_emulated: return KernelIsa::vnni_emulated;
  }
  return std::nullopt;
}

KernelTable kernel_table(CpuKernels kernels) {
  const std::optional<kernels::cpu::KernelIsa> isa = isa_of(kernels);
  // Every set but scalar runs the float kernels' AVX2 path, as dispatch does.
  const bool avx2 = isa.has_value() ? *isa != kernels::cpu::KernelIsa::scalar : kernels::cpu::has_avx2_fma();
  KernelTable table;
  table.dispatched = !isa.has_value();
  table.isa = isa.value_or(kernels::cpu::kernel_isa());
  table.rms_norm = avx2 ? cpu_detail::rms_norm_avx2 : cpu_detail::rms_norm_scalar;
  table.l2_norm = avx2 ? cpu_detail::l2_norm_avx2 : cpu_detail::l2_norm_scalar;
  table.gated_rms_norm = avx2 ? cpu_detail::gated_rms_norm_avx2 : cpu_detail::gated_rms_norm_scalar;
  table.swiglu = avx2 ? cpu_detail::swiglu_avx2 : cpu_detail::swiglu_scalar;
  table.geglu = avx2 ? cpu_detail::geglu_avx2 : cpu_detail::geglu_scalar;
  table.silu = avx2 ? cpu_detail::silu_avx2 : cpu_detail::silu_scalar;
  table.conv = avx2 ? cpu_detail::causal_conv1d_avx2 : cpu_detail::causal_conv1d_scalar;
  table.attention_group = avx2 ? cpu_detail::attention_group_avx2 : cpu_detail::attention_group_scalar;
  table.delta_rows = avx2 ? cpu_detail::gated_delta_rows_avx2 : cpu_detail::gated_delta_rows_scalar;
  table.apply_record_rows = avx2 ? cpu_detail::apply_record_rows_avx2 : cpu_detail::apply_record_rows_scalar;
  table.delta_decay = avx2 ? cpu_detail::gated_delta_decay_avx2 : cpu_detail::gated_delta_decay_scalar;
  return table;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(ThreadPool* pool, CpuKernels kernels) : pool_(pool), kernels_(kernel_table(kernels)) {}

  std::string name() const override {
    return fmt::format("cpu {}, {} threads", kernels::cpu::isa_name(kernels_.isa),
                       pool_ != nullptr ? pool_->n_threads() : 1);
  }

  void matmul(const tensor::Tensor& weight, ConstRows x, Rows y) override {
    check_contiguous("matmul", x);
    check_contiguous("matmul", y);
    if (kernels_.dispatched) return kernels::cpu::matmul(weight, x.data, x.n_rows, y.data, scratch_, pool());
    kernels::cpu::matmul(kernels_.isa, weight, x.data, x.n_rows, y.data, scratch_, pool());
  }

  void matmul_shared_input(std::initializer_list<MatmulOutput> outputs, ConstRows x) override {
    check_contiguous("matmul_shared_input", x);
    if (!kernels_.dispatched) {  // each weight's results are those of its own matmul
      for (const MatmulOutput& output : outputs) {
        kernels::cpu::matmul(kernels_.isa, *output.weight, x.data, x.n_rows, output.y, scratch_, pool());
      }
      return;
    }
    // The kernel's own list type: the same two pointers.
    switch (outputs.size()) {
      case 1: return shared(outputs, x, std::make_index_sequence<1>{});
      case 2: return shared(outputs, x, std::make_index_sequence<2>{});
      case 3: return shared(outputs, x, std::make_index_sequence<3>{});
      case 4: return shared(outputs, x, std::make_index_sequence<4>{});
      case 5: return shared(outputs, x, std::make_index_sequence<5>{});
      case 6: return shared(outputs, x, std::make_index_sequence<6>{});
      default: REWIND_CHECK(false, "matmul_shared_input: {} weights, at most 6", outputs.size());
    }
  }

  // Norms are per row: a view with a stride runs row by row, with the bits of one call over contiguous rows.
  void rms_norm(ConstRows x, const float* weight, Rows y, float eps) override {
    check_same_shape("rms_norm", x, y);
    if (x.contiguous() && y.contiguous()) return kernels_.rms_norm(x.data, weight, y.data, x.n_rows, x.width, eps);
    for_each_row([&](const float* in, float* out) { kernels_.rms_norm(in, weight, out, 1, x.width, eps); }, x, y);
  }

  void l2_norm(ConstRows x, Rows y, float eps) override {
    check_same_shape("l2_norm", x, y);
    if (x.contiguous() && y.contiguous()) return kernels_.l2_norm(x.data, y.data, x.n_rows, x.width, eps);
    for_each_row([&](const float* in, float* out) { kernels_.l2_norm(in, out, 1, x.width, eps); }, x, y);
  }

  void gated_rms_norm(ConstRows x, ConstRows z, const float* weight, Rows y, float eps,
                      ops::GateActivation activation) override {
    check_same_shape("gated_rms_norm", x, z);
    check_same_shape("gated_rms_norm", x, y);
    if (x.contiguous() && z.contiguous() && y.contiguous()) {
      return kernels_.gated_rms_norm(x.data, z.data, weight, y.data, x.n_rows, x.width, eps, activation);
    }
    for_each_row([&](const float* in, const float* gate, float* out) {
      kernels_.gated_rms_norm(in, gate, weight, out, 1, x.width, eps, activation);
    }, x, z, y);
  }

  void rope(Rows x, std::span<const int32_t> positions, const ops::RopeParams& params) override {
    check_contiguous("rope", x);
    REWIND_CHECK(static_cast<int64_t>(positions.size()) == x.n_rows, "rope: {} positions for {} rows",
                 positions.size(), x.n_rows);
    kernels::cpu::rope(x.data, x.n_rows, positions.data(), params);
  }

  void swiglu(ConstRows gate, ConstRows up, Rows out) override { glu(kernels_.swiglu, gate, up, out); }
  void geglu(ConstRows gate, ConstRows up, Rows out) override { glu(kernels_.geglu, gate, up, out); }

  void silu(ConstRows x, Rows out) override {
    check_same_shape("silu", x, out);
    if (x.contiguous() && out.contiguous()) return kernels_.silu(x.data, out.data, x.size());
    for_each_row([&](const float* in, float* o) { kernels_.silu(in, o, x.width); }, x, out);
  }

  void relu_sqr(Rows x) override {
    for_each_row([&](float* row) {
      for (int64_t i = 0; i < x.width; ++i) {
        const float r = row[i] > 0.0f ? row[i] : 0.0f;
        row[i] = r * r;
      }
    }, x);
  }

  void sigmoid(Rows x) override {
    for_each_row([&](float* row) {
      for (int64_t i = 0; i < x.width; ++i) row[i] = 1.0f / (1.0f + std::exp(-row[i]));
    }, x);
  }

  void sigmoid_mul(Rows x, ConstRows gate) override {
    check_same_shape("sigmoid_mul", x, gate);
    for_each_row([&](float* row, const float* g) {
      for (int64_t i = 0; i < x.width; ++i) row[i] *= 1.0f / (1.0f + std::exp(-g[i]));
    }, x, gate);
  }

  void embed(const tensor::Tensor& table, std::span<const int32_t> tokens, float scale, Rows out) override {
    REWIND_CHECK(static_cast<int64_t>(tokens.size()) == out.n_rows && table.n_cols() == out.width,
                 "embed: {} tokens of {} values into a [{}, {}] view", tokens.size(), table.n_cols(), out.n_rows,
                 out.width);
    // One token at a time: a token reads only its own row.
    const auto& traits = tensor::dtype_traits(table.dtype);
    for (int64_t t = 0; t < out.n_rows; ++t) {
      float* row = out.row(t);
      traits.to_float(table.row(tokens[t]), row, out.width);
      if (scale != 1.0f) {
        for (int64_t j = 0; j < out.width; ++j) row[j] *= scale;
      }
    }
  }

  void gather_rows(ConstRows src, std::span<const int64_t> rows, Rows dst) override {
    REWIND_CHECK(static_cast<int64_t>(rows.size()) == dst.n_rows && src.width == dst.width,
                 "gather_rows: {} rows of {} values into a [{}, {}] view", rows.size(), src.width, dst.n_rows,
                 dst.width);
    for (int64_t r = 0; r < dst.n_rows; ++r) std::copy_n(src.row(rows[r]), dst.width, dst.row(r));
  }

  void copy(ConstRows src, Rows dst) override {
    check_same_shape("copy", src, dst);
    if (src.contiguous() && dst.contiguous()) {
      std::copy_n(src.data, src.size(), dst.data);
      return;
    }
    for_each_row([&](const float* s, float* d) { std::copy_n(s, src.width, d); }, src, dst);
  }

  void add(Rows acc, ConstRows delta) override {
    check_same_shape("add", acc, delta);
    for_each_row([&](float* a, const float* d) {
      for (int64_t i = 0; i < acc.width; ++i) a[i] += d[i];
    }, acc, delta);
  }

  void mul(ConstRows a, ConstRows b, Rows out) override {
    check_same_shape("mul", a, b);
    check_same_shape("mul", a, out);
    for_each_row([&](const float* x, const float* y, float* o) {
      for (int64_t i = 0; i < a.width; ++i) o[i] = x[i] * y[i];
    }, a, b, out);
  }

  void scale(Rows x, float factor) override {
    for_each_row([&](float* row) {
      for (int64_t i = 0; i < x.width; ++i) row[i] *= factor;
    }, x);
  }

  void softcap(Rows x, float cap) override {
    for_each_row([&](float* row) {
      for (int64_t i = 0; i < x.width; ++i) row[i] = cap * std::tanh(row[i] / cap);
    }, x);
  }

  void add_bias(Rows x, const float* bias) override {
    for_each_row([&](float* row) {
      for (int64_t i = 0; i < x.width; ++i) row[i] += bias[i];
    }, x);
  }

  void softplus_bias(ConstRows x, const float* bias, Rows out) override {
    check_same_shape("softplus_bias", x, out);
    for_each_row([&](const float* in, float* o) {
      for (int64_t i = 0; i < x.width; ++i) o[i] = softplus(in[i] + bias[i]);
    }, x, out);
  }

  void mul_groups(ConstRows x, const float* factors, int64_t group, Rows out) override {
    check_same_shape("mul_groups", x, out);
    for_each_row([&](const float* in, float* o) {
      for (int64_t i = 0; i < x.width; ++i) o[i] = in[i] * factors[i / group];
    }, x, out);
  }

  void add_mul_groups(Rows acc, ConstRows x, const float* factors, int64_t group) override {
    check_same_shape("add_mul_groups", acc, x);
    for_each_row([&](float* a, const float* in) {
      for (int64_t i = 0; i < x.width; ++i) a[i] += in[i] * factors[i / group];
    }, acc, x);
  }

  void route_experts(ConstRows logits, const ops::RouterParams& params, int64_t n_used, std::span<int32_t> experts,
                     std::span<float> weights) override {
    REWIND_CHECK(static_cast<int64_t>(experts.size()) == logits.n_rows * n_used && weights.size() == experts.size(),
                 "route_experts: {} rows of {} experts into {} and {} entries", logits.n_rows, n_used, experts.size(),
                 weights.size());
    for (int64_t t = 0; t < logits.n_rows; ++t) {
      cpu::route_token(logits.row(t), logits.width, n_used, params, experts.data() + t * n_used,
                       weights.data() + t * n_used, routing_);
    }
  }

  void moe_experts(ConstRows x, std::span<const int32_t> experts, int64_t n_used, const ops::ExpertWeights& weights,
                   Rows routed) override {
    check_contiguous("moe_experts", x);
    const auto n_expert = static_cast<int64_t>(weights.up.size());
    const int64_t n_ff = weights.up.empty() ? 0 : weights.up[0].ne[1];
    const bool gated = !weights.gate.empty();
    MoeScratch& m = moe_;
    m.gathered.resize(static_cast<size_t>(x.size()));
    m.gate.resize(static_cast<size_t>(x.n_rows * n_ff));
    m.up.resize(static_cast<size_t>(x.n_rows * n_ff));
    m.out.resize(static_cast<size_t>(x.size()));
    // Per expert: gather its tokens' rows, run the expert once over them, scatter into the routed rows.
    for (int64_t e = 0; e < n_expert; ++e) {
      m.slots.clear();
      m.tokens.clear();
      for (int64_t i = 0; i < static_cast<int64_t>(experts.size()); ++i) {
        if (experts[i] != e) continue;
        m.slots.push_back(i);
        m.tokens.push_back(i / n_used);
      }
      if (m.slots.empty()) continue;
      const auto n_rows = static_cast<int64_t>(m.slots.size());
      const Rows in{m.gathered.data(), n_rows, x.width};
      const Rows gate{m.gate.data(), n_rows, n_ff};
      gather_rows(x, m.tokens, in);
      if (gated) {
        matmul_shared_input({{&weights.gate[e], m.gate.data()}, {&weights.up[e], m.up.data()}}, in);
        swiglu(gate, ConstRows{m.up.data(), n_rows, n_ff}, gate);
      } else {
        matmul(weights.up[e], in, gate);
        relu_sqr(gate);
      }
      const Rows expert_out{m.out.data(), n_rows, routed.width};
      matmul(weights.down[e], gate, expert_out);
      for (int64_t r = 0; r < n_rows; ++r) std::copy_n(expert_out.row(r), routed.width, routed.row(m.slots[r]));
    }
  }

  void moe_mix(ConstRows routed, std::span<const float> weights, int64_t n_used, Rows out, bool accumulate) override {
    REWIND_CHECK(routed.n_rows == out.n_rows * n_used && static_cast<int64_t>(weights.size()) == routed.n_rows,
                 "moe_mix: {} routed rows and {} weights for {} rows of {} experts", routed.n_rows, weights.size(),
                 out.n_rows, n_used);
    cpu::moe_mix(routed, weights.data(), n_used, out, accumulate);
  }

  void sigmoid_dot_scale(Rows rows, ConstRows x, const float* gate) override {
    REWIND_CHECK(rows.n_rows == x.n_rows, "sigmoid_dot_scale: {} rows against {}", rows.n_rows, x.n_rows);
    cpu::sigmoid_dot_scale(rows, x, gate);
  }

  void store_kv(ConstRows src, const ops::KvStore& dst, std::span<const int32_t> rows) override {
    REWIND_CHECK(static_cast<int64_t>(rows.size()) == src.n_rows && tensor::row_bytes(dst.type, src.width) == dst.row_bytes,
                 "store_kv: {} rows of {} values into rows of {} bytes ({} of them)", src.n_rows, src.width,
                 dst.row_bytes, rows.size());
    const auto& traits = tensor::dtype_traits(dst.type);
    for (int64_t r = 0; r < src.n_rows; ++r) {
      REWIND_CHECK(rows[r] >= 0 && rows[r] < dst.n_rows, "store_kv: row {} outside the {} allocated", rows[r],
                   dst.n_rows);
      traits.from_float(src.row(r), static_cast<uint8_t*>(dst.data) + static_cast<size_t>(rows[r]) * dst.row_bytes,
                        src.width);
    }
  }

  void attention_sequences(std::span<const ops::AttentionCall> calls, const ops::AttentionParams& params) override {
    cpu_detail::attention_sequences_with(kernels_.attention_group, calls, params, pool_);
  }

  void gated_delta_rules(std::span<const ops::GatedDeltaCall> calls, const ops::GatedDeltaParams& params) override {
    cpu_detail::gated_delta_rules_with(kernels_.delta_rows, kernels_.apply_record_rows, calls, params, pool_);
  }

  void gated_delta_decay(const float* g, float* decay, int64_t n) override {
    kernels_.delta_decay(g, decay, n);
  }

  void fold_delta_records(float* state, const ops::GatedDeltaRecords& records,
                          const ops::GatedDeltaParams& params) override {
    if (records.n == 0) return;
    ops::GatedDeltaCall fold;
    fold.state = state;
    fold.io.fold = records;
    cpu_detail::gated_delta_rules_with(kernels_.delta_rows, kernels_.apply_record_rows, {&fold, 1}, params, pool_);
  }

  void causal_conv1d(ConstRows x, const float* weight, int64_t d_conv, const float* bias, float* window,
                     Rows out) override {
    check_contiguous("causal_conv1d", x);
    check_contiguous("causal_conv1d", out);
    cpu_detail::causal_conv1d_with(kernels_.conv, x.data, x.n_rows, x.width, weight, d_conv, bias, window, out.data);
  }

  void causal_conv1d_tree(ConstRows x, const int32_t* parents, const float* weight, int64_t d_conv, const float* bias,
                          const float* window, float* scratch, Rows out) override {
    check_contiguous("causal_conv1d_tree", x);
    check_contiguous("causal_conv1d_tree", out);
    cpu_detail::causal_conv1d_tree_with(kernels_.conv, x.data, x.n_rows, parents, x.width, weight, d_conv, bias,
                                        window, scratch, out.data);
  }

  void advance_conv_window(ConstRows x, int64_t d_conv, float* window) override {
    check_contiguous("advance_conv_window", x);
    kernels::cpu::advance_conv_window(x.data, x.n_rows, x.width, d_conv, window);
  }

 private:
  ThreadPool& pool() {
    REWIND_CHECK(pool_ != nullptr, "the CPU backend's matrix products need a thread pool");
    return *pool_;
  }

  template <size_t... I>
  void shared(std::initializer_list<MatmulOutput> outputs, ConstRows x, std::index_sequence<I...>) {
    const MatmulOutput* o = outputs.begin();
    kernels::cpu::matmul_shared_input({kernels::cpu::MatmulOutput{o[I].weight, o[I].y}...}, x.data, x.n_rows,
                                      scratch_, pool());
  }

  template <typename Fn>
  void glu(Fn fn, ConstRows gate, ConstRows up, Rows out) {
    check_same_shape("glu", gate, up);
    check_same_shape("glu", gate, out);
    if (gate.contiguous() && up.contiguous() && out.contiguous()) return fn(gate.data, up.data, out.data, gate.size());
    for_each_row([&](const float* g, const float* u, float* o) { fn(g, u, o, gate.width); }, gate, up, out);
  }

  // moe_experts' working rows: grown to the largest batch, then reused.
  struct MoeScratch {
    std::vector<float> gathered, gate, up, out;
    std::vector<int64_t> slots;   // index t * n_used + j of each gathered row
    std::vector<int64_t> tokens;  // its token t
  };

  ThreadPool* pool_;
  KernelTable kernels_;
  kernels::cpu::MatmulScratch scratch_;
  cpu::RoutingScratch routing_;
  MoeScratch moe_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool, CpuKernels kernels) {
  REWIND_CHECK(cpu_supports(kernels), "this CPU cannot run the {} kernels", cpu_kernels_name(kernels));
  return std::make_unique<CpuBackend>(pool, kernels);
}

bool cpu_supports(CpuKernels kernels) {
  const std::optional<kernels::cpu::KernelIsa> isa = isa_of(kernels);
  return !isa.has_value() || kernels::cpu::isa_supported(*isa);
}

const char* cpu_kernels_name(CpuKernels kernels) {
  const std::optional<kernels::cpu::KernelIsa> isa = isa_of(kernels);
  return isa.has_value() ? kernels::cpu::isa_name(*isa) : "dispatched";
}

const char* cpu_kernel_set() { return kernels::cpu::isa_name(); }

}  // namespace rwd::compute
