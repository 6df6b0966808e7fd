// links: rewind_kernels_cpu
// matmul with the dispatched kernels: every weight type against the float64 reference matmul, batch
// invariance (row r bit-identical, whatever n_rows, to the row computed alone: n_rows = 1..9 cross the switch
// from one-row kernels to panels of 8 rows, 15..17, 33, 64 and 65 end in partial panels), identical results
// for 1, 2, 3 threads and an oversubscribed pool, odd numbers of blocks (a partial group of 8), output counts
// that are not multiples of any tile, a reused scratch, and NaN-prefilled outputs that must all be overwritten.
// matmul_shared_input gives the bits of separate matmul calls, for weights of one and of mixed types. Every
// VNNI flavour the CPU runs gives, through matmul, the AVX2 kernels' bits for every row, batch and thread count.
// The per-ISA kernels themselves are checked in test_vec_dot.cpp. Weights of the read-only types (no quantizer)
// are random raw blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "kernels/quant_test_util.h"
#include "kernels/ref/matmul.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace rwd::kernels::cpu {
namespace {

using tensor::DType;

// A quantized [n_out, n_in] weight that owns its bytes.
struct Weight {
  std::vector<uint8_t> bytes;
  tensor::Tensor tensor;
};

Weight make_weight(DType type, int64_t n_out, int64_t n_in, uint64_t seed) {
  test::QuantRandom random(seed);
  Weight weight;
  const size_t row_bytes = tensor::row_bytes(type, n_in);
  weight.bytes.resize(row_bytes * static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    const std::vector<uint8_t> row = test::random_weight_row(type, n_in, random);
    std::copy(row.begin(), row.end(), weight.bytes.begin() + o * static_cast<int64_t>(row_bytes));
  }
  weight.tensor.name = "test.weight";
  weight.tensor.dtype = type;
  weight.tensor.n_dims = 2;
  weight.tensor.ne = {n_in, n_out, 1, 1};
  weight.tensor.data = weight.bytes.data();
  return weight;
}

std::vector<float> nan_filled(int64_t n) {
  return std::vector<float>(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
}

std::vector<float> run_matmul(const Weight& weight, const std::vector<float>& x, int64_t n_rows, ThreadPool& pool,
                              MatmulScratch& scratch) {
  std::vector<float> y = nan_filled(n_rows * weight.tensor.n_rows());
  matmul(weight.tensor, x.data(), n_rows, y.data(), scratch, pool);
  return y;
}

// 11 blocks of 32 (one group of 8 and 3 more), 3 super-blocks of 256, or 347 float values.
int64_t n_in_for(DType type) {
  switch (tensor::dtype_traits(type).block_size) {
    case 1: return 347;
    case 32: return 352;
    default: return 768;
  }
}

TEST(Matmul, MatchesFloat64Reference) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  constexpr int64_t kOut = 37;
  for (DType type : test::weight_types()) {
    for (int64_t n_rows : {1, 5, 17}) {  // one-row kernels, one panel, three panels
      SCOPED_TRACE(std::string(tensor::dtype_name(type)) + " n_rows=" + std::to_string(n_rows));
      const int64_t n_in = n_in_for(type);
      const Weight weight = make_weight(type, kOut, n_in, 7 + static_cast<uint64_t>(type));
      test::QuantRandom random(3);
      const std::vector<float> x = random.row(n_rows * n_in);
      const std::vector<float> y = run_matmul(weight, x, n_rows, pool, scratch);
      std::vector<float> expected = nan_filled(n_rows * kOut);
      ref::matmul(weight.tensor, x.data(), n_rows, expected.data());
      std::vector<float> w(static_cast<size_t>(n_in));
      for (int64_t o = 0; o < kOut; ++o) {
        tensor::dtype_traits(type).to_float(weight.tensor.row(o), w.data(), n_in);
        for (int64_t r = 0; r < n_rows; ++r) {
          const float* xr = x.data() + r * n_in;
          // ref::matmul rounds its float64 sum to float once: half an ulp more.
          const double tolerance = test::dot_tolerance(type, n_in, weight.tensor.row(o), w.data(), xr) +
                                   std::fabs(expected[r * kOut + o]) * 0x1p-24;
          ASSERT_TRUE(std::isfinite(y[r * kOut + o])) << "row " << r << " out " << o;
          EXPECT_NEAR(y[r * kOut + o], expected[r * kOut + o], tolerance) << "row " << r << " out " << o;
        }
      }
    }
  }
}

TEST(Matmul, BatchInvariantAndThreadCountInvariant) {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  const int oversubscribed = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int n_threads : {1, 2, 3, oversubscribed}) pools.push_back(std::make_unique<ThreadPool>(n_threads));
  constexpr int64_t kOut = 71, kMaxRows = 65;
  for (DType type : test::weight_types()) {
    SCOPED_TRACE(std::string(tensor::dtype_name(type)));
    const int64_t n_in = n_in_for(type);
    const Weight weight = make_weight(type, kOut, n_in, 100 + static_cast<uint64_t>(type));
    test::QuantRandom random(41);
    const std::vector<float> x = random.row(kMaxRows * n_in);

    // Each row alone, on one thread: the values every other configuration must reproduce bit for bit.
    MatmulScratch scratch;
    std::vector<float> alone = nan_filled(kMaxRows * kOut);
    for (int64_t r = 0; r < kMaxRows; ++r) {
      const std::vector<float> xr(x.begin() + r * n_in, x.begin() + (r + 1) * n_in);
      const std::vector<float> yr = run_matmul(weight, xr, 1, *pools[0], scratch);
      std::copy(yr.begin(), yr.end(), alone.begin() + r * kOut);
    }
    for (float v : alone) ASSERT_TRUE(std::isfinite(v));

    for (const auto& pool : pools) {
      for (int64_t n_rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 33, 64, 65}) {
        const std::vector<float> y = run_matmul(weight, x, n_rows, *pool, scratch);  // scratch reused, resized
        ASSERT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0)
            << pool->n_threads() << " threads, n_rows " << n_rows;
      }
    }
  }
}

// Several weights over one x in one pool round: bit for bit what separate matmul() calls give, for every
// type alone, for types that share an activation format (q4_0 + q8_0 + q5_1; q5_0 + q4_0, whose one-row
// panels share a layout) and for mixed formats (which fall back to one call per weight), at 1..9 and 33 rows
// (the pair path and the panel fallback), on 1..3 threads.
TEST(Matmul, SharedInputEqualsSeparateCalls) {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int n_threads : {1, 2, 3}) pools.push_back(std::make_unique<ThreadPool>(n_threads));
  std::vector<std::vector<DType>> groups;
  for (DType type : test::weight_types()) groups.push_back({type, type, type});
  groups.push_back({DType::q4_0, DType::q8_0, DType::q5_1});
  groups.push_back({DType::q5_0, DType::q4_0, DType::q5_0});  // one row: one panel layout, two kernels
  groups.push_back({DType::q8_0, DType::f16, DType::q4_k, DType::f32});
  const int64_t n_outs[] = {71, 8, 300, 33};
  for (const std::vector<DType>& types : groups) {
    // One n_in all the types in the group can hold: a multiple of 256.
    const int64_t n_in = 768;
    std::vector<Weight> weights;
    for (size_t i = 0; i < types.size(); ++i) weights.push_back(make_weight(types[i], n_outs[i], n_in, 200 + i));
    test::QuantRandom random(43);
    const std::vector<float> x = random.row(33 * n_in);
    for (const auto& pool : pools) {
      for (int64_t n_rows : {1, 2, 3, 5, 8, 9, 33}) {
        SCOPED_TRACE(std::string(tensor::dtype_name(types[0])) + " group of " + std::to_string(types.size()) + ", " +
                     std::to_string(pool->n_threads()) + " threads, " + std::to_string(n_rows) + " rows");
        MatmulScratch scratch;
        std::vector<std::vector<float>> separate, shared;
        for (const Weight& weight : weights) {
          separate.push_back(run_matmul(weight, x, n_rows, *pool, scratch));
          shared.push_back(nan_filled(n_rows * weight.tensor.n_rows()));
        }
        if (weights.size() == 3) {
          matmul_shared_input({{&weights[0].tensor, shared[0].data()}, {&weights[1].tensor, shared[1].data()},
                               {&weights[2].tensor, shared[2].data()}},
                              x.data(), n_rows, scratch, *pool);
        } else {
          matmul_shared_input({{&weights[0].tensor, shared[0].data()}, {&weights[1].tensor, shared[1].data()},
                               {&weights[2].tensor, shared[2].data()}, {&weights[3].tensor, shared[3].data()}},
                              x.data(), n_rows, scratch, *pool);
        }
        for (size_t i = 0; i < weights.size(); ++i) {
          ASSERT_EQ(std::memcmp(shared[i].data(), separate[i].data(), separate[i].size() * sizeof(float)), 0)
              << "weight " << i;
        }
      }
    }
  }
}

// Large enough that the activation quantization is split across threads (64 Ki values and up).
TEST(Matmul, ParallelActivationQuantizationIsInvariant) {
  ThreadPool one(1), three(3);
  MatmulScratch scratch;
  const int64_t n_in = 2816, n_rows = 24, n_out = 9;
  for (DType type : {DType::q4_0, DType::q4_1, DType::q4_k}) {
    const Weight weight = make_weight(type, n_out, n_in, 5);
    test::QuantRandom random(6);
    const std::vector<float> x = random.row(n_rows * n_in);
    const std::vector<float> y1 = run_matmul(weight, x, n_rows, one, scratch);
    const std::vector<float> y3 = run_matmul(weight, x, n_rows, three, scratch);
    EXPECT_EQ(std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)), 0) << tensor::dtype_name(type);
  }
}

// ---- the VNNI flavours: the AVX2 bits, whatever the batch and the threads ----

class MatmulVnni : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU cannot run " << isa_name(GetParam());
  }
};

// Every row of every batch size, on 1, 2 and 3 threads, bit-identical to the AVX2 kernels on that row alone
// (batches of 2..9 take the tiles and the half and full panels; 15..17 and 33 end in partial panels), for
// an odd number of blocks and output counts no tile divides.
TEST_P(MatmulVnni, BitIdenticalToAvx2AloneForEveryBatchAndThreadCount) {
  const KernelIsa isa = GetParam();
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int n_threads : {1, 2, 3}) pools.push_back(std::make_unique<ThreadPool>(n_threads));
  constexpr int64_t kOut = 37, kMaxRows = 33;
  for (DType type : {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q8_0, DType::q4_k, DType::q5_k,
                     DType::q6_k}) {
    SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(tensor::dtype_name(type)));
    const int64_t n_in = tensor::dtype_traits(type).block_size == 32 ? 2080 : 1280;  // 65 blocks, 5 super-blocks
    const Weight weight = make_weight(type, kOut, n_in, 300 + static_cast<uint64_t>(type));
    test::QuantRandom random(47);
    const std::vector<float> x = random.row(kMaxRows * n_in);
    MatmulScratch scratch;
    std::vector<float> alone = nan_filled(kMaxRows * kOut);
    for (int64_t r = 0; r < kMaxRows; ++r) {
      std::vector<float> yr = nan_filled(kOut);
      matmul(KernelIsa::avx2, weight.tensor, x.data() + r * n_in, 1, yr.data(), scratch, *pools[0]);
      std::copy(yr.begin(), yr.end(), alone.begin() + r * kOut);
    }
    for (const auto& pool : pools) {
      for (int64_t n_rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 33}) {
        std::vector<float> y = nan_filled(n_rows * kOut);
        matmul(isa, weight.tensor, x.data(), n_rows, y.data(), scratch, *pool);
        ASSERT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0)
            << pool->n_threads() << " threads, n_rows " << n_rows;
      }
    }
  }
}

// Test names cannot hold a '-'.
std::string flavour_test_name(const ::testing::TestParamInfo<KernelIsa>& param_info) {
  return param_info.param == KernelIsa::vnni_emulated ? "vnni_emulated" : isa_name(param_info.param);
}

INSTANTIATE_TEST_SUITE_P(Flavours, MatmulVnni,
                         ::testing::Values(KernelIsa::avxvnni, KernelIsa::avx512vnni, KernelIsa::vnni_emulated),
                         flavour_test_name);

}  // namespace
}  // namespace rwd::kernels::cpu
