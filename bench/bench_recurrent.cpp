// Gated delta rule decode (T = 1) and short verify batches (T = 8) at head dim 128, reported as bytes of state
// traffic per second: one read and one write of the state per call, the least any kernel moves. "Hot" reuses
// one layer's state (it stays in L2/L3); "Cold" cycles through enough layers' states (>= 256 MiB) that every
// call streams its state from DRAM, the real decode case. StateCopy is the ceiling: memcpy of the same bytes
// (read + write counted the same way). Dispatched path; REWIND_ISA=scalar for the portable one.
// Args: n_head_v, n_tokens, threads (GatedDelta); n_head_v (StateCopy). GatedDeltaSlots: one layer's decode
// token for every slot (hot), one call per slot (each a pool round) or one gated_delta_rules round; args:
// n_head_v, head_dim, slots, together (0/1), threads.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/gated_delta.h"

namespace rwd::kernels::cpu {
namespace {

constexpr int64_t kHeadDim = 128;
constexpr int64_t kColdBytes = int64_t{256} << 20;
constexpr int64_t kTokenPool = 256;

ThreadPool& pool_with(int n_threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& pool = pools[n_threads];
  if (!pool) pool = std::make_unique<ThreadPool>(n_threads);
  return *pool;
}

std::vector<float> random_floats(int64_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> uniform(lo, hi);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = uniform(engine);
  return values;
}

int64_t layers_for(bool cold, int64_t state_floats) {
  return cold ? (kColdBytes + state_floats * 4 - 1) / (state_floats * 4) : 1;
}

void gated_delta_bench(benchmark::State& state, bool cold) {
  const int64_t n_head_v = state.range(0);
  const int64_t n_tokens = state.range(1);
  const int n_threads = static_cast<int>(state.range(2));
  GatedDeltaParams params;
  params.n_head_k = n_head_v / 2;
  params.n_head_v = n_head_v;
  params.head_k_dim = kHeadDim;
  params.head_v_dim = kHeadDim;
  params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kHeadDim)));
  const int64_t state_floats = n_head_v * kHeadDim * kHeadDim;
  const int64_t n_layers = layers_for(cold, state_floats);
  std::vector<float> states = random_floats(state_floats * n_layers, -1.0f, 1.0f, 1);
  // Inputs for kTokenPool distinct tokens, used n_tokens at a time in turn, so the state keeps mixing in every
  // direction (one repeated token would let most of it decay into subnormals). q, k have norm ~0.07.
  const int64_t n_pool = kTokenPool;
  const std::vector<float> q = random_floats(n_pool * params.n_head_k * kHeadDim, -0.01f, 0.01f, 2);
  const std::vector<float> k = random_floats(n_pool * params.n_head_k * kHeadDim, -0.01f, 0.01f, 3);
  const std::vector<float> v = random_floats(n_pool * n_head_v * kHeadDim, -1.0f, 1.0f, 4);
  const std::vector<float> g = random_floats(n_pool * n_head_v, -0.5f, -0.01f, 5);
  const std::vector<float> beta = random_floats(n_pool * n_head_v, 0.1f, 0.9f, 6);
  std::vector<float> out(static_cast<size_t>(n_tokens * n_head_v * kHeadDim));
  std::vector<float> u(out.size());
  ThreadPool* pool = n_threads > 1 ? &pool_with(n_threads) : nullptr;
  int64_t layer = 0;
  int64_t token = 0;
  for (auto _ : state) {
    gated_delta_rule(q.data() + token * params.n_head_k * kHeadDim, k.data() + token * params.n_head_k * kHeadDim,
                     v.data() + token * n_head_v * kHeadDim, g.data() + token * n_head_v,
                     beta.data() + token * n_head_v, n_tokens, states.data() + layer * state_floats, out.data(),
                     u.data(), params, pool);
    benchmark::DoNotOptimize(out.data());
    layer = layer + 1 == n_layers ? 0 : layer + 1;
    token = token + 2 * n_tokens > n_pool ? 0 : token + n_tokens;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * state_floats * 4);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n_tokens), benchmark::Counter::kIsRate);
}

void state_copy_bench(benchmark::State& state, bool cold) {
  const int64_t state_floats = state.range(0) * kHeadDim * kHeadDim;
  const int64_t n_layers = layers_for(cold, state_floats);
  std::vector<float> src = random_floats(state_floats * n_layers, -1.0f, 1.0f, 1);
  std::vector<float> dst(src.size());
  int64_t layer = 0;
  for (auto _ : state) {
    std::memcpy(dst.data() + layer * state_floats, src.data() + layer * state_floats,
                static_cast<size_t>(state_floats) * 4);
    benchmark::DoNotOptimize(dst.data());
    layer = layer + 1 == n_layers ? 0 : layer + 1;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * state_floats * 4);
}

void gated_delta_slots_bench(benchmark::State& state) {
  const int64_t n_head_v = state.range(0);
  const int64_t head_dim = state.range(1);
  const int64_t n_slots = state.range(2);
  const bool together = state.range(3) != 0;
  const int n_threads = static_cast<int>(state.range(4));
  GatedDeltaParams params;
  params.n_head_k = std::max<int64_t>(n_head_v / 2, 1);
  params.n_head_v = n_head_v;
  params.head_k_dim = head_dim;
  params.head_v_dim = head_dim;
  params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const int64_t state_floats = n_head_v * head_dim * head_dim;
  const int64_t k_row = params.n_head_k * head_dim;
  const int64_t v_row = n_head_v * head_dim;
  std::vector<float> states = random_floats(state_floats * n_slots, -1.0f, 1.0f, 1);
  const std::vector<float> q = random_floats(kTokenPool * k_row, -0.01f, 0.01f, 2);
  const std::vector<float> k = random_floats(kTokenPool * k_row, -0.01f, 0.01f, 3);
  const std::vector<float> v = random_floats(kTokenPool * v_row, -1.0f, 1.0f, 4);
  const std::vector<float> g = random_floats(kTokenPool * n_head_v, -0.5f, -0.01f, 5);
  const std::vector<float> beta = random_floats(kTokenPool * n_head_v, 0.1f, 0.9f, 6);
  std::vector<float> out(static_cast<size_t>(n_slots * v_row));
  std::vector<float> u(out.size());
  ThreadPool* pool = n_threads > 1 ? &pool_with(n_threads) : nullptr;
  std::vector<GatedDeltaCall> calls(static_cast<size_t>(n_slots));
  int64_t token = 0;
  for (auto _ : state) {
    for (int64_t s = 0; s < n_slots; ++s) {
      const int64_t t = (token + s) % kTokenPool;
      GatedDeltaCall& call = calls[static_cast<size_t>(s)];
      call.q = q.data() + t * k_row;
      call.k = k.data() + t * k_row;
      call.v = v.data() + t * v_row;
      call.g = g.data() + t * n_head_v;
      call.beta = beta.data() + t * n_head_v;
      call.n_tokens = 1;
      call.state = states.data() + s * state_floats;
      call.out = out.data() + s * v_row;
      call.u_out = u.data() + s * v_row;
    }
    if (together) {
      gated_delta_rules(calls, params, pool);
    } else {
      for (const GatedDeltaCall& call : calls) gated_delta_rules({&call, 1}, params, pool);
    }
    benchmark::DoNotOptimize(out.data());
    token = (token + n_slots) % kTokenPool;
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n_slots), benchmark::Counter::kIsRate);
}

void gated_delta_args(benchmark::internal::Benchmark* bench) {
  for (int64_t n_head_v : {8, 16, 32}) {
    for (int64_t n_tokens : {1, 8}) {
      for (int64_t n_threads : {1, 2}) bench->Args({n_head_v, n_tokens, n_threads});
    }
  }
}

BENCHMARK_CAPTURE(gated_delta_bench, Hot, false)->Apply(gated_delta_args)->UseRealTime();
BENCHMARK_CAPTURE(gated_delta_bench, Cold, true)->Apply(gated_delta_args)->UseRealTime();
BENCHMARK(gated_delta_slots_bench)
    ->Name("GatedDeltaSlots")
    ->ArgsProduct({{4, 16}, {64, 128}, {4}, {0, 1}, {2}})
    ->UseRealTime();
BENCHMARK_CAPTURE(state_copy_bench, Hot, false)->Arg(8)->Arg(16)->Arg(32);
BENCHMARK_CAPTURE(state_copy_bench, Cold, true)->Arg(8)->Arg(16)->Arg(32);

}  // namespace
}  // namespace rwd::kernels::cpu
