// Reference gated delta rule: the three lines of the recurrence written out in float64, one head at a time.
#include "kernels/ref/gated_delta.h"

#include <cmath>
#include <vector>

namespace rwd::kernels::ref {

int64_t key_head_of(int64_t head_v, const GatedDeltaParams& params) {
  if (params.mapping == KeyHeadMapping::modulo) return head_v % params.n_head_k;
  return head_v / (params.n_head_v / params.n_head_k);
}

void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                      int64_t n_tokens, float* state, float* out, float* u_out, const GatedDeltaParams& params) {
  const int64_t dk = params.head_k_dim;
  const int64_t dv = params.head_v_dim;
  const int64_t n_decay = params.per_channel_decay ? dk : 1;
  std::vector<double> s(static_cast<size_t>(dk * dv));  // s[i * dv + j] = S[i][j]
  std::vector<double> u(static_cast<size_t>(dv));
  for (int64_t h = 0; h < params.n_head_v; ++h) {
    float* head_state = state + h * dv * dk;
    for (int64_t i = 0; i < dk; ++i) {
      for (int64_t j = 0; j < dv; ++j) s[i * dv + j] = head_state[j * dk + i];
    }
    const int64_t hk = key_head_of(h, params);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* q_t = q + (t * params.n_head_k + hk) * dk;
      const float* k_t = k + (t * params.n_head_k + hk) * dk;
      const float* v_t = v + (t * params.n_head_v + h) * dv;
      const float* g_t = g + (t * params.n_head_v + h) * n_decay;
      const double beta_t = beta[t * params.n_head_v + h];
      for (int64_t i = 0; i < dk; ++i) {
        const double decay = std::exp(static_cast<double>(g_t[params.per_channel_decay ? i : 0]));
        for (int64_t j = 0; j < dv; ++j) s[i * dv + j] *= decay;
      }
      for (int64_t j = 0; j < dv; ++j) {
        double sk = 0.0;
        if (params.subtract_prediction) {
          for (int64_t i = 0; i < dk; ++i) sk += s[i * dv + j] * k_t[i];
        }
        u[j] = beta_t * (v_t[j] - sk);
      }
      for (int64_t i = 0; i < dk; ++i) {
        for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += k_t[i] * u[j];
      }
      for (int64_t j = 0; j < dv; ++j) {
        double o = 0.0;
        for (int64_t i = 0; i < dk; ++i) o += s[i * dv + j] * q_t[i];
        out[(t * params.n_head_v + h) * dv + j] = static_cast<float>(o * params.scale);
        if (u_out != nullptr) u_out[(t * params.n_head_v + h) * dv + j] = static_cast<float>(u[j]);
      }
    }
    for (int64_t i = 0; i < dk; ++i) {
      for (int64_t j = 0; j < dv; ++j) head_state[j * dk + i] = static_cast<float>(s[i * dv + j]);
    }
  }
}

void apply_gated_delta_record(float* head_state, const float* k, const float* u, const float* decay,
                              const GatedDeltaParams& params) {
  const int64_t dk = params.head_k_dim;
  for (int64_t j = 0; j < params.head_v_dim; ++j) {
    for (int64_t i = 0; i < dk; ++i) {
      const double d = decay[params.per_channel_decay ? i : 0];
      const double updated = d * head_state[j * dk + i] + static_cast<double>(k[i]) * u[j];
      head_state[j * dk + i] = static_cast<float>(updated);
    }
  }
}

}  // namespace rwd::kernels::ref
