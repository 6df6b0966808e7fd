// Dot-product and matmul kernels, reported as bytes of weight read per second (the number that bounds decode
// speed). VecDot runs one L1-resident weight row with each ISA's kernel explicitly (compute ceiling; the
// VNNI sets report an error where the CPU lacks them); Panel runs each ISA's panel kernel (8 activation rows
// at once) on a 1024² weight that stays in L2, reported also as multiply-adds per second; Matmul runs the
// dispatched kernels (REWIND_ISA=scalar|avx2|avxvnni|avx512vnni picks another set than the best) on a
// 768² or 2048² weight that stays in the last-level cache, with 1 (decode), 4 (a verify batch) or 64 (prefill)
// activation rows; MatmulCold cycles through enough 2048² weights (>= 256 MiB) that every call streams its
// weight from DRAM, the real decode case, with 1 row and, for a few types, the 2..9 rows of a verify batch.
// Matmul and MatmulCold also report of_ceiling_%: weight bytes/s over the read bandwidth bench_main.cpp
// measured for the same thread count (near 100 is the DRAM ceiling for MatmulCold; Matmul reads from cache and
// may pass it), and the 64-row (prefill) shapes FLOP/s, counting 2·n_out·n_in·rows per call.
// Args: dtype id, n, activation rows, threads. ThreadPoolRun is the fork-join round trip of an empty task;
// ThreadPoolWork one of 2 µs of work per thread index.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "read_ceiling.h"
#include "tensor/dtype.h"
#include "tensor/quant/blocks.h"
#include "tensor/tensor.h"

namespace rwd::kernels::cpu {
namespace {

using tensor::DType;

// Every weight type the kernels run.
std::vector<DType> weight_types() {
  std::vector<DType> types;
  for (const tensor::DTypeTraits& traits : tensor::all_dtype_traits()) {
    if (tensor::is_supported_weight_type(traits.dtype)) types.push_back(traits.dtype);
  }
  return types;
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(engine);
  return values;
}

// One row of a type rewind reads but cannot write: random payload bytes, every block's scale set to a normal
// value (fp16 1/64 for d and dmin, e = 127 for mxfp4) so that no NaN or subnormal slows the float part.
void random_read_only_row(DType type, int64_t n, uint64_t seed, uint8_t* out) {
  namespace q = tensor::quant;
  std::mt19937_64 engine(seed);
  const tensor::DTypeTraits& traits = tensor::dtype_traits(type);
  const size_t n_bytes = tensor::row_bytes(type, n);
  for (size_t i = 0; i < n_bytes; ++i) out[i] = static_cast<uint8_t>(engine());
  const uint16_t scale = 0x2400;  // 1/64
  for (int64_t b = 0; b < n / traits.block_size; ++b) {
    uint8_t* block = out + static_cast<size_t>(b) * traits.block_bytes;
    auto put = [block, scale](size_t offset) { std::memcpy(block + offset, &scale, sizeof(scale)); };
    switch (type) {
      case DType::q2_k: put(offsetof(q::BlockQ2K, d)); put(offsetof(q::BlockQ2K, dmin)); break;
      case DType::q3_k: put(offsetof(q::BlockQ3K, d)); break;
      case DType::iq4_nl: put(offsetof(q::BlockIQ4NL, d)); break;
      case DType::iq4_xs: put(offsetof(q::BlockIQ4XS, d)); break;
      case DType::tq1_0: put(offsetof(q::BlockTQ1_0, d)); break;
      case DType::tq2_0: put(offsetof(q::BlockTQ2_0, d)); break;
      case DType::mxfp4: block[offsetof(q::BlockMXFP4, e)] = 127; break;
      case DType::iq2_xxs: put(offsetof(q::BlockIQ2XXS, d)); break;
      case DType::iq2_xs: put(offsetof(q::BlockIQ2XS, d)); break;
      case DType::iq2_s: put(offsetof(q::BlockIQ2S, d)); break;
      case DType::iq3_xxs: put(offsetof(q::BlockIQ3XXS, d)); break;
      case DType::iq3_s: put(offsetof(q::BlockIQ3S, d)); break;
      case DType::iq1_s: put(offsetof(q::BlockIQ1S, d)); break;
      case DType::iq1_m: {  // d's nibbles are the top nibbles of the four 16-bit scale words
        uint8_t* scale_words = block + offsetof(q::BlockIQ1M, scales);
        for (int i = 0; i < 4; ++i) {
          scale_words[2 * i + 1] = static_cast<uint8_t>((scale_words[2 * i + 1] & 0x0F) | (((scale >> (4 * i)) & 15) << 4));
        }
        break;
      }
      default: break;
    }
  }
}

// A weight [n_out, n_in]; rows are quantized once and copied, which is enough for timing.
struct Weight {
  std::vector<uint8_t> bytes;
  tensor::Tensor tensor;
  PackedBuffer packed;
};

std::unique_ptr<Weight> make_weight(DType type, int64_t n_out, int64_t n_in) {
  auto weight = std::make_unique<Weight>();
  const size_t row_bytes = tensor::row_bytes(type, n_in);
  weight->bytes.resize(row_bytes * static_cast<size_t>(n_out));
  const int64_t n_distinct = std::min<int64_t>(n_out, 16);
  for (int64_t o = 0; o < n_distinct; ++o) {
    if (tensor::dtype_traits(type).from_float == nullptr) {
      random_read_only_row(type, n_in, static_cast<uint64_t>(o), weight->bytes.data() + o * row_bytes);
      continue;
    }
    const std::vector<float> row = random_floats(n_in, static_cast<uint64_t>(o));
    tensor::dtype_traits(type).from_float(row.data(), weight->bytes.data() + o * row_bytes, n_in);
  }
  for (int64_t o = n_distinct; o < n_out; ++o) {
    std::copy_n(weight->bytes.data() + (o % n_distinct) * row_bytes, row_bytes, weight->bytes.data() + o * row_bytes);
  }
  weight->tensor.name = "bench.weight";
  weight->tensor.dtype = type;
  weight->tensor.n_dims = 2;
  weight->tensor.ne = {n_in, n_out, 1, 1};
  weight->tensor.data = weight->bytes.data();
  // As the model loads it: packed where the dispatched set has a packed layout for it.
  if (const size_t packed_bytes = packed_weight_bytes(kernel_isa(), weight->tensor); packed_bytes > 0) {
    weight->packed = allocate_packed(packed_bytes);
    pack_weight(kernel_isa(), weight->tensor, weight->packed.get());
    weight->tensor.packed = weight->packed.get();
  }
  return weight;
}

ThreadPool& pool_with(int n_threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& pool = pools[n_threads];
  if (!pool) pool = std::make_unique<ThreadPool>(n_threads);
  return *pool;
}

void vec_dot_bench(benchmark::State& state, KernelIsa isa) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t n = state.range(1);
  if (!isa_supported(isa)) {
    state.SkipWithError((std::string("this CPU cannot run ") + isa_name(isa)).c_str());
    return;
  }
  const VecDotKernel kernel = vec_dot_kernel(isa, type);
  const QuantizeRowFn quantize = quantize_row_fn(isa, tensor::dtype_traits(type).vec_dot_type);
  const auto weight = make_weight(type, 1, n);
  const std::vector<float> x = random_floats(n, 99);
  std::vector<uint8_t> act(tensor::row_bytes(tensor::dtype_traits(type).vec_dot_type, n));
  quantize(x.data(), act.data(), n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(kernel.one(n, weight->bytes.data(), act.data()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weight->bytes.size()));
  state.SetLabel(std::string(tensor::dtype_name(type)) + " " + isa_name(isa));
}

void panel_bench(benchmark::State& state, KernelIsa isa) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t n = state.range(1);
  if (!isa_supported(isa)) {
    state.SkipWithError((std::string("this CPU cannot run ") + isa_name(isa)).c_str());
    return;
  }
  const VecDotKernel kernel = vec_dot_kernel(isa, type);
  if (kernel.panel.dot == nullptr) {
    state.SkipWithError("no panel kernel for this type");
    return;
  }
  const DType act_type = tensor::dtype_traits(type).vec_dot_type;
  const auto weight = make_weight(type, n, n);
  const size_t act_row_bytes = tensor::row_bytes(act_type, n);
  std::vector<uint8_t> rows(act_row_bytes * kPanelRows);
  const std::vector<float> x = random_floats(n * kPanelRows, 5);
  for (int64_t r = 0; r < kPanelRows; ++r) {
    quantize_row_fn(isa, act_type)(x.data() + r * n, rows.data() + r * act_row_bytes, n);
  }
  std::vector<uint8_t> panel(kernel.panel.panel_bytes(n));
  kernel.panel.pack(n, rows.data(), act_row_bytes, kPanelRows, panel.data());
  std::vector<float> y(static_cast<size_t>(n * kPanelRows));
  for (auto _ : state) {
    kernel.panel.dot(n, weight->bytes.data(), weight->tensor.bytes_per_row(), n, panel.data(), kPanelRows, y.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weight->bytes.size()));
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(n * n) *
                                                   kPanelRows,
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string(tensor::dtype_name(type)) + " " + isa_name(isa));
}

void BM_ThreadPoolRun(benchmark::State& state) {
  ThreadPool& pool = pool_with(static_cast<int>(state.range(0)));
  std::atomic<int> sink{0};
  for (auto _ : state) {
    pool.run([&](int ith, int) {
      if (ith == 0) sink.fetch_add(1, std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
}

void BM_ThreadPoolWork(benchmark::State& state) {
  ThreadPool& pool = pool_with(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    pool.run([](int, int) {
      const auto start = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(2)) {
      }
    });
  }
}

void BM_VecDotScalar(benchmark::State& state) { vec_dot_bench(state, KernelIsa::scalar); }
void BM_VecDotAvx2(benchmark::State& state) { vec_dot_bench(state, KernelIsa::avx2); }
void BM_VecDotAvxVnni(benchmark::State& state) { vec_dot_bench(state, KernelIsa::avxvnni); }
void BM_VecDotAvx512Vnni(benchmark::State& state) { vec_dot_bench(state, KernelIsa::avx512vnni); }
void BM_Panel(benchmark::State& state) { panel_bench(state, KernelIsa::avx2); }
void BM_PanelAvxVnni(benchmark::State& state) { panel_bench(state, KernelIsa::avxvnni); }
void BM_PanelAvx512Vnni(benchmark::State& state) { panel_bench(state, KernelIsa::avx512vnni); }

constexpr int64_t kPrefillRows = 64;

// Counters shared by Matmul and MatmulCold. `seconds` is the loop's wall time, timed by the caller the way
// UseRealTime times it; of_ceiling_% is computed here rather than as a kIsRate counter so the console prints
// a plain percentage instead of a rate.
void set_matmul_counters(benchmark::State& state, size_t weight_bytes, int64_t n, int64_t n_rows, double seconds,
                         const ReadCeiling& ceiling) {
  const double n_calls = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(weight_bytes));
  const double ceiling_gbps = ceiling.gbps(static_cast<int>(state.range(3)));
  if (ceiling_gbps > 0 && seconds > 0) {
    const double weight_gbps = n_calls * static_cast<double>(weight_bytes) / seconds / 1e9;
    state.counters["of_ceiling_%"] = 100.0 * weight_gbps / ceiling_gbps;
  }
  if (n_rows == kPrefillRows) {  // weight [n, n] times activations [n_rows, n]
    const double flops_per_call = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n_rows);
    state.counters["FLOP/s"] = benchmark::Counter(n_calls * flops_per_call, benchmark::Counter::kIsRate);
  }
}

void BM_Matmul(benchmark::State& state, const ReadCeiling& ceiling) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t n = state.range(1), n_rows = state.range(2);
  const auto weight = make_weight(type, n, n);
  const std::vector<float> x = random_floats(n * n_rows, 7);
  std::vector<float> y(static_cast<size_t>(n * n_rows));
  MatmulScratch scratch;
  ThreadPool& pool = pool_with(static_cast<int>(state.range(3)));
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    matmul(weight->tensor, x.data(), n_rows, y.data(), scratch, pool);
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_matmul_counters(state, weight->bytes.size(), n, n_rows, seconds, ceiling);
  state.SetLabel(std::string(tensor::dtype_name(type)) + " " + isa_name());
}

void BM_MatmulCold(benchmark::State& state, const ReadCeiling& ceiling) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t n = state.range(1), n_rows = state.range(2);
  const size_t weight_bytes = tensor::row_bytes(type, n) * static_cast<size_t>(n);
  const size_t n_weights = std::max<size_t>(2, (size_t{256} << 20) / weight_bytes);
  std::vector<std::unique_ptr<Weight>> weights;
  for (size_t i = 0; i < n_weights; ++i) weights.push_back(make_weight(type, n, n));
  const std::vector<float> x = random_floats(n * n_rows, 7);
  std::vector<float> y(static_cast<size_t>(n * n_rows));
  MatmulScratch scratch;
  ThreadPool& pool = pool_with(static_cast<int>(state.range(3)));
  size_t next = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    matmul(weights[next]->tensor, x.data(), n_rows, y.data(), scratch, pool);
    next = (next + 1) % n_weights;
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_matmul_counters(state, weight_bytes, n, n_rows, seconds, ceiling);
  state.SetLabel(std::string(tensor::dtype_name(type)) + " " + isa_name());
}

void vec_dot_args(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"dtype", "n"});
  for (DType type : weight_types()) bench->Args({static_cast<int64_t>(type), 2048});
}

void matmul_args(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"dtype", "n", "rows", "threads"})->UseRealTime();
  for (DType type : weight_types()) {
    for (int64_t n : {768, 2048}) {
      for (int64_t rows : {int64_t{1}, int64_t{4}, kPrefillRows}) {
        for (int64_t threads : kMatmulThreadCounts) bench->Args({static_cast<int64_t>(type), n, rows, threads});
      }
    }
  }
}

void matmul_cold_args(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"dtype", "n", "rows", "threads"})->UseRealTime();
  for (DType type : weight_types()) {
    for (int64_t threads : kMatmulThreadCounts) bench->Args({static_cast<int64_t>(type), 2048, 1, threads});
  }
  // Verify batches (1 + k tokens) against the decode step above: where panels start to pay (min_rows).
  for (DType type : {DType::f16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
    for (int64_t rows = 2; rows <= 9; ++rows) bench->Args({static_cast<int64_t>(type), 2048, rows, 2});
  }
}

// Verify batches with the weights in cache (a small model held in L2/L3, where a step is bound by the dot
// products, not by memory): the cost per row from one row (a decode step) to a full panel.
void matmul_warm_verify_args(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"dtype", "n", "rows", "threads"})->UseRealTime();
  for (DType type : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
    for (int64_t n : {256, 1024}) {
      for (int64_t rows = 1; rows <= 8; ++rows) bench->Args({static_cast<int64_t>(type), n, rows, 1});
    }
  }
}

void panel_args(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"dtype", "n"});
  for (DType type : weight_types()) {
    if (tensor::dtype_traits(type).block_size > 1) bench->Args({static_cast<int64_t>(type), 1024});
  }
}

BENCHMARK(BM_VecDotScalar)->Apply(vec_dot_args);
BENCHMARK(BM_Panel)->Apply(panel_args);
BENCHMARK(BM_PanelAvxVnni)->Apply(panel_args);
BENCHMARK(BM_PanelAvx512Vnni)->Apply(panel_args);
BENCHMARK(BM_ThreadPoolRun)->ArgName("threads")->Arg(2)->Arg(4)->UseRealTime();
BENCHMARK(BM_ThreadPoolWork)->ArgName("threads")->Arg(2)->UseRealTime();
BENCHMARK(BM_VecDotAvx2)->Apply(vec_dot_args);
BENCHMARK(BM_VecDotAvxVnni)->Apply(vec_dot_args);
BENCHMARK(BM_VecDotAvx512Vnni)->Apply(vec_dot_args);

}  // namespace

void register_matmul_benchmarks(const ReadCeiling& ceiling) {
  benchmark::RegisterBenchmark("BM_Matmul", [&ceiling](benchmark::State& state) { BM_Matmul(state, ceiling); })
      ->Apply(matmul_args);
  benchmark::RegisterBenchmark("BM_MatmulWarmVerify",
                               [&ceiling](benchmark::State& state) { BM_Matmul(state, ceiling); })
      ->Apply(matmul_warm_verify_args);
  benchmark::RegisterBenchmark("BM_MatmulCold", [&ceiling](benchmark::State& state) { BM_MatmulCold(state, ceiling); })
      ->Apply(matmul_cold_args);
}

}  // namespace rwd::kernels::cpu
