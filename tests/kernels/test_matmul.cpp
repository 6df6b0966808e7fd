// links: rewind_kernels_cpu
// matmul with the dispatched kernels: every weight type against the float64 reference matmul, batch
// invariance (row r bit-identical, whatever n_rows, to the row computed alone: n_rows = 1..9 cross the switch
// from one-row kernels to panels of 8 rows, 15..17, 33, 64 and 65 end in partial panels), identical results
// for 1, 2, 3 threads and an oversubscribed pool, odd numbers of blocks (a partial group of 8), output counts
// that are not multiples of any tile, a reused scratch, and NaN-prefilled outputs that must all be overwritten.
// matmul_shared_input gives the bits of separate matmul calls, for weights of one and of mixed types. Every
// VNNI flavour the CPU runs gives, through matmul, the AVX2 kernels' bits for every row, batch and thread count.
// Weights packed at load for the AVX-512 VNNI set (q4_K, q6_K in groups of 16 rows) give the AVX2 bits too, at
// random and extreme fills, alone and in shared-input rounds, and views of their first rows stay correct.
// The per-ISA kernels themselves are checked in test_vec_dot.cpp. Weights of the read-only types (no quantizer)
// are random raw blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_weights.h"
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

// ---- weights packed at load (packed_weights.h) ----

class MatmulPacked : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!isa_supported(KernelIsa::avx512vnni)) GTEST_SKIP() << "this CPU cannot run avx512vnni";
  }
};

constexpr DType kPackedTypes[] = {DType::q4_k, DType::q6_k, DType::q8_0, DType::q4_0, DType::q5_0};

// A weight with its packed copy, as Model::pack leaves it.
struct PackedWeight {
  Weight weight;
  PackedBuffer packed;
};

PackedWeight packed_copy(Weight weight) {
  PackedWeight result{std::move(weight), nullptr};
  const size_t bytes = packed_weight_bytes(KernelIsa::avx512vnni, result.weight.tensor);
  EXPECT_GT(bytes, 0u) << tensor::dtype_name(result.weight.tensor.dtype);
  result.packed = allocate_packed(bytes);
  pack_weight(KernelIsa::avx512vnni, result.weight.tensor, result.packed.get());
  result.weight.tensor.data = result.weight.bytes.data();
  result.weight.tensor.packed = result.packed.get();
  return result;
}

// Every block at the top of its ranges: 6-bit scales and mins of 63 (q4_K), values 15 / 63 / 7 / 15, q6_K scales
// of -128 and 127 in turn, q8_0 values of -128 and 127 in turn, d = dmin = 1; the int32 sums reach their largest.
Weight extreme_weight(DType type, int64_t n_out, int64_t n_in) {
  Weight weight = make_weight(type, n_out, n_in, 1);
  std::fill(weight.bytes.begin(), weight.bytes.end(), uint8_t{0xFF});
  constexpr uint16_t kOne = 0x3C00;
  const int64_t n_blocks = n_out * n_in / tensor::dtype_traits(type).block_size;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (type == DType::q8_0) {
      auto* block = reinterpret_cast<tensor::quant::BlockQ8_0*>(weight.bytes.data()) + b;
      for (int j = 0; j < 32; ++j) block->qs[j] = static_cast<int8_t>(j % 2 == 0 ? -128 : 127);
      block->d = kOne;
    } else if (type == DType::q4_0 || type == DType::q5_0) {
      std::memcpy(weight.bytes.data() + b * tensor::dtype_traits(type).block_bytes, &kOne, sizeof(kOne));
    } else if (type == DType::q4_k) {
      auto* block = reinterpret_cast<tensor::quant::BlockQ4K*>(weight.bytes.data()) + b;
      block->d = block->dmin = kOne;
    } else {
      auto* block = reinterpret_cast<tensor::quant::BlockQ6K*>(weight.bytes.data()) + b;
      for (int g = 0; g < 16; ++g) block->scales[g] = static_cast<int8_t>(g % 2 == 0 ? -128 : 127);
      block->d = kOne;
    }
  }
  return weight;
}

// Each activation row alone through the AVX2 kernels.
std::vector<float> avx2_alone(const tensor::Tensor& weight, const std::vector<float>& x, int64_t n_rows,
                              ThreadPool& pool) {
  MatmulScratch scratch;
  const int64_t n_in = weight.n_cols(), n_out = weight.n_rows();
  std::vector<float> alone = nan_filled(n_rows * n_out);
  for (int64_t r = 0; r < n_rows; ++r) {
    matmul(KernelIsa::avx2, weight, x.data() + r * n_in, 1, alone.data() + r * n_out, scratch, pool);
  }
  return alone;
}

// 48 rows (three groups) of 1280 values (5 super-blocks: an odd count, so q6_K groups end in padding; 40 blocks
// of 32, so the last of the 8 chains gets fewer blocks), every batch size that crosses a pass of 4 activation
// rows, on 1..3 threads.
TEST_F(MatmulPacked, BitIdenticalToAvx2ForEveryBatchAndThreadCount) {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int n_threads : {1, 2, 3}) pools.push_back(std::make_unique<ThreadPool>(n_threads));
  constexpr int64_t kOut = 48, kIn = 1280, kMaxRows = 33;
  for (DType type : kPackedTypes) {
    for (bool extreme : {false, true}) {
      SCOPED_TRACE(std::string(tensor::dtype_name(type)) + (extreme ? " extreme" : " random"));
      const PackedWeight packed =
          packed_copy(extreme ? extreme_weight(type, kOut, kIn) : make_weight(type, kOut, kIn, 500));
      test::QuantRandom random(49);
      std::vector<float> x = random.row(kMaxRows * kIn);
      // Alternating signs at one magnitude: every activation quantizes to +-127.
      if (extreme) for (size_t i = 0; i < x.size(); ++i) x[i] = i % 2 == 0 ? 3.0f : -3.0f;
      const std::vector<float> alone = avx2_alone(packed.weight.tensor, x, kMaxRows, *pools[0]);
      for (float v : alone) ASSERT_TRUE(std::isfinite(v));
      for (const auto& pool : pools) {
        for (int64_t n_rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 33}) {
          MatmulScratch scratch;
          std::vector<float> y = nan_filled(n_rows * kOut);
          matmul(KernelIsa::avx512vnni, packed.weight.tensor, x.data(), n_rows, y.data(), scratch, *pool);
          ASSERT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0)
              << pool->n_threads() << " threads, n_rows " << n_rows;
        }
      }
    }
  }
}

// A view of a packed weight's first rows (the draft's reduced vocabulary): whole groups stay on the packed
// kernel, other counts fall back to the file's layout; both give the full weight's first outputs.
TEST_F(MatmulPacked, ViewsOfTheFirstRows) {
  ThreadPool pool(2);
  constexpr int64_t kOut = 64, kIn = 512, kRows = 3;
  for (DType type : kPackedTypes) {
    const PackedWeight packed = packed_copy(make_weight(type, kOut, kIn, 501));
    test::QuantRandom random(50);
    const std::vector<float> x = random.row(kRows * kIn);
    const std::vector<float> full = avx2_alone(packed.weight.tensor, x, kRows, pool);
    for (int64_t n_view : {16, 32, 40, 63}) {
      SCOPED_TRACE(std::string(tensor::dtype_name(type)) + " first " + std::to_string(n_view) + " rows");
      tensor::Tensor view = packed.weight.tensor;
      view.ne[1] = n_view;
      MatmulScratch scratch;
      std::vector<float> y = nan_filled(kRows * n_view);
      matmul(KernelIsa::avx512vnni, view, x.data(), kRows, y.data(), scratch, pool);
      for (int64_t r = 0; r < kRows; ++r) {
        ASSERT_EQ(std::memcmp(y.data() + r * n_view, full.data() + r * kOut, n_view * sizeof(float)), 0) << "row " << r;
      }
    }
  }
}

// What has no packed layout: other types, row counts that are not whole groups, stacked (3-D) weights.
TEST_F(MatmulPacked, OnlyWholeGroupsOfTwoDimensionalKQuants) {
  EXPECT_GT(packed_weight_bytes(KernelIsa::avx512vnni, make_weight(DType::q4_k, 32, 256, 1).tensor), 0u);
  EXPECT_EQ(packed_weight_bytes(KernelIsa::avx2, make_weight(DType::q4_k, 32, 256, 1).tensor), 0u);
  EXPECT_EQ(packed_weight_bytes(KernelIsa::avx512vnni, make_weight(DType::q4_k, 24, 256, 1).tensor), 0u);
  EXPECT_EQ(packed_weight_bytes(KernelIsa::avx512vnni, make_weight(DType::q5_k, 32, 256, 1).tensor), 0u);
  EXPECT_EQ(packed_weight_bytes(KernelIsa::avx512vnni, make_weight(DType::q4_1, 32, 256, 1).tensor), 0u);
  Weight stacked = make_weight(DType::q6_k, 32, 256, 1);
  stacked.tensor.n_dims = 3;
  stacked.tensor.ne = {256, 16, 2, 1};
  EXPECT_EQ(packed_weight_bytes(KernelIsa::avx512vnni, stacked.tensor), 0u);
}

// Packed weights in one shared-input round (q, k, v of a Q4_K_M file: q4_K, q4_K, q6_K; of the 0.5B draft's:
// q5_0, q5_0, q8_0), and beside a weight in the file's layout (separate rounds): the bits of separate calls.
TEST_F(MatmulPacked, SharedInputEqualsSeparateCalls) {
  ThreadPool pool(2);
  constexpr int64_t kIn = 768;
  const std::vector<std::vector<DType>> trios = {{DType::q4_k, DType::q4_k, DType::q6_k},
                                                 {DType::q5_0, DType::q5_0, DType::q8_0},
                                                 {DType::q4_0, DType::q8_0, DType::q5_0}};
  for (const std::vector<DType>& types : trios) {
    std::vector<PackedWeight> packed;
    const int64_t n_outs[] = {64, 16, 32};
    for (size_t i = 0; i < types.size(); ++i) {
      packed.push_back(packed_copy(make_weight(types[i], n_outs[i], kIn, 502 + i)));
    }
    const Weight plain = make_weight(types[0], 37, kIn, 505);  // 37 rows: left in the file's layout
    test::QuantRandom random(51);
    const std::vector<float> x = random.row(9 * kIn);
    for (int64_t n_rows : {1, 3, 4, 5, 9}) {
      SCOPED_TRACE(std::string(tensor::dtype_name(types[0])) + " trio, " + std::to_string(n_rows) + " rows");
      MatmulScratch scratch;
      std::vector<std::vector<float>> separate, shared;
      const tensor::Tensor* tensors[] = {&packed[0].weight.tensor, &packed[1].weight.tensor, &packed[2].weight.tensor,
                                         &plain.tensor};
      for (const tensor::Tensor* tensor : tensors) {
        separate.push_back(nan_filled(n_rows * tensor->n_rows()));
        matmul(*tensor, x.data(), n_rows, separate.back().data(), scratch, pool);
        shared.push_back(nan_filled(n_rows * tensor->n_rows()));
      }
      matmul_shared_input(
          {{tensors[0], shared[0].data()}, {tensors[1], shared[1].data()}, {tensors[2], shared[2].data()}}, x.data(),
          n_rows, scratch, pool);
      matmul_shared_input({{tensors[0], shared[0].data()}, {tensors[3], shared[3].data()}}, x.data(), n_rows, scratch,
                          pool);
      for (size_t i = 0; i < separate.size(); ++i) {
        ASSERT_EQ(std::memcmp(shared[i].data(), separate[i].data(), separate[i].size() * sizeof(float)), 0)
            << "weight " << i;
      }
    }
  }
}

}  // namespace
}  // namespace rwd::kernels::cpu
