// links: rewind_kernels_cpu
// Dot-product kernels of every weight type, scalar and AVX2 (where the CPU has it), against
//   - the float64 reference on unquantized activations, within the activation-quantization bound;
//   - the float64 dot of the dequantized weight and dequantized activations, within float rounding only
//     (this isolates the integer arithmetic of the kernel from the quantizer);
// plus: tiles (many weight rows by many activation rows) and panels (8 interleaved activation rows, fewer
// zero-padded) bit-identical to one-pair calls, AVX2 quantizers byte-identical to the reference ones, and the
// dispatched functions being one of the tables; and every VNNI flavour the CPU runs (vnni-emulated wherever
// there is AVX2) bit-identical to the AVX2 table's one-pair kernel for its one-pair, tile and panel kernels, on
// random blocks and on blocks at the ends of their ranges (activations at ±127), which would catch saturation.
// Weight rows of the types rewind reads but cannot write (q2_K, q3_K, the i-quants, tq1_0, tq2_0, mxfp4) are
// random raw blocks (quant_test_util.h): every level, scale and digit pattern, not just those a quantizer makes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "kernels/quant_test_util.h"
#include "kernels/ref/vec_dot.h"
#include "tensor/dtype.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu {
namespace {

using tensor::DType;

struct Isa {
  std::string name;
  VecDotKernel (*kernel)(DType);
  QuantizeRowFn (*quantizer)(DType);
};

constexpr KernelIsa kVnniIsas[] = {KernelIsa::avxvnni, KernelIsa::avx512vnni, KernelIsa::vnni_emulated};

VecDotKernel (*table_of(KernelIsa isa))(DType) {
  switch (isa) {
    case KernelIsa::avxvnni: return avxvnni::vec_dot_kernel;
    case KernelIsa::avx512vnni: return avx512vnni::vec_dot_kernel;
    case KernelIsa::vnni_emulated: return vnni_emulated::vec_dot_kernel;
    case KernelIsa::avx2: return avx2::vec_dot_kernel;
    case KernelIsa::scalar: break;
  }
  return scalar::vec_dot_kernel;
}

// Every table the CPU can run.
std::vector<Isa> isas() {
  std::vector<Isa> result = {{"scalar", scalar::vec_dot_kernel, scalar::quantize_row_fn}};
  if (avx2_supported()) result.push_back({"avx2", avx2::vec_dot_kernel, avx2::quantize_row_fn});
  for (KernelIsa isa : kVnniIsas) {
    if (isa_supported(isa)) result.push_back({isa_name(isa), table_of(isa), avx2::quantize_row_fn});
  }
  return result;
}

std::vector<int64_t> sizes_for(DType type) {
  switch (tensor::dtype_traits(type).block_size) {
    case 1: return {1, 7, 32, 33, 96, 255, 256, 768, 1001, 2816};
    case 32: return {32, 96, 256, 320, 768, 2080, 2816};  // 1, 3, 8, 10, 24, 65, 88 blocks
    default: return {256, 768, 2816};
  }
}

std::vector<uint8_t> quantize_activation(const Isa& isa, DType act_type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(tensor::row_bytes(act_type, n), 0xCD);
  isa.quantizer(act_type)(x.data(), out.data(), n);
  return out;
}

std::vector<float> to_float(DType type, const void* data, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
  tensor::dtype_traits(type).to_float(data, out.data(), n);
  return out;
}

// Σ w x̂ in float64, with the q4_1 / q5_1 min term taken as the kernel takes it: m_w s instead of m_w d_a Σ qa.
double dequantized_dot(DType type, int64_t n, const void* weight_row, const std::vector<float>& w, const void* act_row,
                       const std::vector<float>& x_hat) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * x_hat[i];
  if (type == DType::q4_1 || type == DType::q5_1) {
    const size_t block_bytes = tensor::dtype_traits(type).block_bytes;
    const auto* act = static_cast<const tensor::quant::BlockQ8_1*>(act_row);
    for (int64_t b = 0; b < n / 32; ++b) {
      uint16_t m_bits;
      std::memcpy(&m_bits, static_cast<const uint8_t*>(weight_row) + b * block_bytes + 2, 2);
      int q_sum = 0;
      for (int j = 0; j < 32; ++j) q_sum += act[b].qs[j];
      const double exact = static_cast<double>(fp16_to_fp32(act[b].d)) * q_sum;
      sum += static_cast<double>(fp16_to_fp32(m_bits)) * (static_cast<double>(fp16_to_fp32(act[b].s)) - exact);
    }
  }
  return sum;
}

TEST(VecDot, EveryTypeMatchesReferences) {
  for (const Isa& isa : isas()) {
    for (DType type : test::weight_types()) {
      const DType act_type = tensor::dtype_traits(type).vec_dot_type;
      for (int64_t n : sizes_for(type)) {
        for (uint64_t seed = 0; seed < 3; ++seed) {
          SCOPED_TRACE(isa.name + " " + std::string(tensor::dtype_name(type)) + " n=" + std::to_string(n) +
                       " seed=" + std::to_string(seed));
          test::QuantRandom random(seed * 1000 + static_cast<uint64_t>(n) + 17 * static_cast<uint64_t>(type));
          const std::vector<uint8_t> weight = test::random_weight_row(type, n, random);
          const std::vector<float> x = random.row(n);
          const std::vector<uint8_t> act = quantize_activation(isa, act_type, x);
          const VecDotKernel kernel = isa.kernel(type);
          ASSERT_NE(kernel.one, nullptr);
          const double got = kernel.one(n, weight.data(), act.data());

          const std::vector<float> w = to_float(type, weight.data(), n);
          const double reference = ref::vec_dot(type, n, weight.data(), x.data());
          EXPECT_NEAR(got, reference, test::dot_tolerance(type, n, weight.data(), w.data(), x.data()));

          const std::vector<float> x_hat = act_type == DType::f32 ? x : to_float(act_type, act.data(), n);
          double magnitude = 0.0;
          for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(w[i]) * x_hat[i]);
          const int64_t n_sums = tensor::dtype_traits(type).block_size == 1 ? n / 8 : n / 32;
          EXPECT_NEAR(got, dequantized_dot(type, n, weight.data(), w, act.data(), x_hat),
                      static_cast<double>(n_sums + 16) * 0x1p-22 * magnitude);
        }
      }
    }
  }
}

// n for the bit-identity tests: odd numbers of blocks / super-blocks, and for float rows a tail of 1..7.
int64_t odd_length(DType type) {
  const int64_t block_size = tensor::dtype_traits(type).block_size;
  return block_size == 1 ? 1001 : block_size == 32 ? 2848 : 2816;  // 89 blocks of 32, 11 of 256
}

// n_weight_rows weight rows of n values, quantized.
std::vector<uint8_t> weight_rows(DType type, int64_t n, int64_t n_weight_rows, test::QuantRandom& random) {
  std::vector<uint8_t> rows;
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const std::vector<uint8_t> row = test::random_weight_row(type, n, random);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

// n_rows activation rows of n values in the weight type's partner format.
std::vector<uint8_t> activation_rows(const Isa& isa, DType type, int64_t n, int64_t n_rows,
                                     test::QuantRandom& random) {
  std::vector<uint8_t> rows;
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<uint8_t> row = quantize_activation(isa, tensor::dtype_traits(type).vec_dot_type, random.row(n));
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

TEST(VecDot, TilesAreBitIdenticalToOnePair) {
  // 9 weight rows: two blocks of 4 and a remainder; 13 activation rows: three float blocks, four quantized groups.
  constexpr int64_t kWeightRows = 9, kMaxRows = 13, kOutStride = 11;
  for (const Isa& isa : isas()) {
    for (DType type : test::weight_types()) {
      SCOPED_TRACE(isa.name + " " + std::string(tensor::dtype_name(type)));
      const int64_t n = odd_length(type);
      test::QuantRandom random(99 + static_cast<uint64_t>(type));
      const std::vector<uint8_t> weights = weight_rows(type, n, kWeightRows, random);
      const std::vector<uint8_t> acts = activation_rows(isa, type, n, kMaxRows, random);
      const size_t weight_row_bytes = tensor::row_bytes(type, n);
      const size_t act_row_bytes = tensor::row_bytes(tensor::dtype_traits(type).vec_dot_type, n);
      const VecDotKernel kernel = isa.kernel(type);
      for (int64_t n_weight_rows = 1; n_weight_rows <= kWeightRows; ++n_weight_rows) {
        for (int64_t n_rows = 1; n_rows <= kMaxRows; ++n_rows) {
          std::vector<float> out(static_cast<size_t>(n_rows * kOutStride), std::numeric_limits<float>::quiet_NaN());
          kernel.tile(n, weights.data(), weight_row_bytes, n_weight_rows, acts.data(), act_row_bytes, n_rows,
                      out.data(), kOutStride);
          for (int64_t r = 0; r < n_rows; ++r) {
            for (int64_t i = 0; i < kOutStride; ++i) {
              const float got = out[static_cast<size_t>(r * kOutStride + i)];
              if (i >= n_weight_rows) {
                EXPECT_TRUE(std::isnan(got)) << "wrote outside the tile at row " << r << " column " << i;
                continue;
              }
              const float single = kernel.one(n, weights.data() + i * weight_row_bytes, acts.data() + r * act_row_bytes);
              EXPECT_EQ(std::memcmp(&single, &got, sizeof(float)), 0)
                  << n_weight_rows << "x" << n_rows << " tile, weight " << i << " row " << r << ": " << single
                  << " vs " << got;
            }
          }
        }
      }
    }
  }
}

// Panels of 1..8 rows and narrow panels of 1..4 or 1 (rows past the last are zero) against the one-pair kernel,
// for lengths of 1, 15, 89 (32-blocks) or 11 (super-blocks), 28, 10, 11, 13 and 14 blocks; outputs outside the
// written rows must stay NaN.
TEST(VecDot, PanelsAreBitIdenticalToOnePair) {
  constexpr int64_t kWeightRows = 5, kOutStride = 7;
  int n_types_with_panels = 0, n_types_with_narrow_panels = 0;
  for (const Isa& isa : isas()) {
    for (DType type : test::weight_types()) {
      const VecDotKernel kernel = isa.kernel(type);
      n_types_with_panels += kernel.panel.dot != nullptr;
      n_types_with_narrow_panels += kernel.narrow_panel.dot != nullptr;
      for (const PanelKernel* panel_kernel : {&kernel.panel, &kernel.narrow_panel}) {
        const PanelKernel& panel_of = *panel_kernel;
        if (panel_of.dot == nullptr) continue;
        ASSERT_NE(panel_of.pack, nullptr);
        ASSERT_NE(panel_of.panel_bytes, nullptr);
        ASSERT_TRUE(panel_of.rows == kPanelRows || panel_of.rows == kNarrowPanelRows || panel_of.rows == 1);
        const int64_t block_size = tensor::dtype_traits(type).block_size;
        // Tails of 1, 7, 1, 4 (896 values of q5_0: Qwen2.5-0.5B's rows), 2, 3, 5 and 6 blocks of 8.
        for (int64_t n : {block_size, 15 * block_size, odd_length(type), 28 * block_size, 10 * block_size,
                          11 * block_size, 13 * block_size, 14 * block_size}) {
          SCOPED_TRACE(isa.name + " " + std::string(tensor::dtype_name(type)) + " n=" + std::to_string(n) +
                       " panel rows " + std::to_string(panel_of.rows));
          test::QuantRandom random(7 + static_cast<uint64_t>(type) + static_cast<uint64_t>(n));
          const std::vector<uint8_t> weights = weight_rows(type, n, kWeightRows, random);
          const std::vector<uint8_t> acts = activation_rows(isa, type, n, panel_of.rows, random);
          const size_t weight_row_bytes = tensor::row_bytes(type, n);
          const size_t act_row_bytes = tensor::row_bytes(tensor::dtype_traits(type).vec_dot_type, n);
          for (int64_t n_rows = 1; n_rows <= panel_of.rows; ++n_rows) {
            std::vector<uint8_t> panel(panel_of.panel_bytes(n), 0xCD);
            panel_of.pack(n, acts.data(), act_row_bytes, n_rows, panel.data());
            std::vector<float> out(static_cast<size_t>(panel_of.rows * kOutStride),
                                   std::numeric_limits<float>::quiet_NaN());
            panel_of.dot(n, weights.data(), weight_row_bytes, kWeightRows, panel.data(), n_rows, out.data(),
                         kOutStride);
            for (int64_t r = 0; r < panel_of.rows; ++r) {
              for (int64_t i = 0; i < kOutStride; ++i) {
                const float got = out[static_cast<size_t>(r * kOutStride + i)];
                if (r >= n_rows || i >= kWeightRows) {
                  EXPECT_TRUE(std::isnan(got)) << "wrote outside the panel's rows at row " << r << " column " << i;
                  continue;
                }
                const float single =
                    kernel.one(n, weights.data() + i * weight_row_bytes, acts.data() + r * act_row_bytes);
                EXPECT_EQ(std::memcmp(&single, &got, sizeof(float)), 0)
                    << n_rows << "-row panel, weight " << i << " row " << r << ": " << single << " vs " << got;
              }
            }
          }
        }
      }
    }
  }
  if (avx2_supported()) {
    EXPECT_GE(n_types_with_panels, 10);  // every quantized type but q6_K, q2_K, q3_K, iq4_xs and tq2_0
    EXPECT_GE(n_types_with_narrow_panels, 4);  // q4_K, q5_K; one-row: q4_0, q5_0
  }
}

TEST(VecDot, Avx2QuantizersMatchReferenceBytes) {
  if (!avx2_supported()) GTEST_SKIP() << "no AVX2 on this CPU";
  test::QuantRandom random(2024);
  const int64_t n = 256 * 12;
  std::vector<float> x = random.row(n, -9.0, 4.0);
  for (int64_t i = 0; i < 256; ++i) x[i] = 0.0f;                                   // an all-zero super-block
  for (int64_t i = 256; i < 288; ++i) x[i] = static_cast<float>(i - 256) - 15.5f;  // ties at d = 1
  x[287] = 127.0f;
  for (DType act_type : {DType::q8_0, DType::q8_1, DType::q8_k}) {
    std::vector<uint8_t> expected(tensor::row_bytes(act_type, n), 0x11);
    std::vector<uint8_t> got(expected.size(), 0x22);
    scalar::quantize_row_fn(act_type)(x.data(), expected.data(), n);
    avx2::quantize_row_fn(act_type)(x.data(), got.data(), n);
    EXPECT_EQ(expected, got) << tensor::dtype_name(act_type);
  }
}

// ---- the VNNI flavours against the AVX2 table ----

class VnniMatchesAvx2 : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU cannot run " << isa_name(GetParam());
  }
};

constexpr DType kQuantTypes[] = {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                                 DType::q8_0, DType::q4_k, DType::q5_k, DType::q6_k};

// How the bytes of a block are drawn: at random, or every value at the top or the bottom of its range, or
// alternating between the two.
enum class Fill { random, high, low, alternating };
constexpr Fill kFills[] = {Fill::random, Fill::high, Fill::low, Fill::alternating};

const char* fill_name(Fill fill) {
  switch (fill) {
    case Fill::random: return "random";
    case Fill::high: return "high";
    case Fill::low: return "low";
    case Fill::alternating: return "alternating";
  }
  return "?";
}

// A value in [lo, hi] as fill asks for it, the index deciding the alternation.
int pick(Fill fill, int lo, int hi, size_t index, test::QuantRandom& random) {
  switch (fill) {
    case Fill::random: return static_cast<int>(random.integer(lo, hi));
    case Fill::high: return hi;
    case Fill::low: return lo;
    case Fill::alternating: return index % 2 == 0 ? hi : lo;
  }
  return 0;
}

// ± [2^-10, 2) in fp16.
uint16_t random_half(test::QuantRandom& random) {
  const double magnitude = std::pow(2.0, -10.0 + 11.0 * random.unit());
  return fp32_to_fp16(static_cast<float>(random.unit() < 0.5 ? -magnitude : magnitude));
}

template <typename Field>
void put(uint8_t* block, size_t offset, Field value) {
  std::memcpy(block + offset, &value, sizeof(value));
}

// A weight row of n values whose packed bits (nibbles, fifth and sixth bits, k-quant scales and mins) follow fill;
// q8_0 values and q6_K scales, which are signed bytes, go from -128 to 127. fp16 scales are random, finite.
std::vector<uint8_t> weight_row_filled(DType type, int64_t n, Fill fill, test::QuantRandom& random) {
  namespace q = tensor::quant;
  const tensor::DTypeTraits& traits = tensor::dtype_traits(type);
  std::vector<uint8_t> row(tensor::row_bytes(type, n));
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<uint8_t>(pick(fill, 0, 255, i, random));
  for (int64_t b = 0; b < n / traits.block_size; ++b) {
    uint8_t* block = row.data() + static_cast<size_t>(b) * traits.block_bytes;
    switch (type) {
      case DType::q4_0:
      case DType::q5_0: put(block, 0, random_half(random)); break;
      case DType::q4_1:
      case DType::q5_1:
        put(block, offsetof(q::BlockQ4_1, d), random_half(random));
        put(block, offsetof(q::BlockQ4_1, m), random_half(random));
        break;
      case DType::q8_0:
        put(block, offsetof(q::BlockQ8_0, d), random_half(random));
        for (size_t j = 0; j < 32; ++j) {
          put(block, offsetof(q::BlockQ8_0, qs) + j, static_cast<int8_t>(pick(fill, -128, 127, j, random)));
        }
        break;
      case DType::q4_k:
      case DType::q5_k:
        put(block, offsetof(q::BlockQ4K, d), random_half(random));
        put(block, offsetof(q::BlockQ4K, dmin), random_half(random));
        break;
      case DType::q6_k:
        put(block, offsetof(q::BlockQ6K, d), random_half(random));
        for (size_t j = 0; j < 16; ++j) {
          put(block, offsetof(q::BlockQ6K, scales) + j, static_cast<int8_t>(pick(fill, -128, 127, j, random)));
        }
        break;
      default: ADD_FAILURE() << "no filler for " << tensor::dtype_name(type);
    }
  }
  return row;
}

// An activation row of n values in act_type (q8_0, q8_1 or q8_K) with values in -127..127 as fill asks, as the
// quantizers leave them: q8_1's s = fp16(d * sum), q8_K's bsums the sums of 16 values.
std::vector<uint8_t> activation_row_filled(DType act_type, int64_t n, Fill fill, test::QuantRandom& random) {
  namespace q = tensor::quant;
  std::vector<uint8_t> row(tensor::row_bytes(act_type, n));
  if (act_type == DType::q8_k) {
    auto* blocks = reinterpret_cast<q::BlockQ8K*>(row.data());
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      blocks[b].d = static_cast<float>(std::pow(2.0, -12.0 + 10.0 * random.unit()));
      for (size_t j = 0; j < q::kBlockK; ++j) blocks[b].qs[j] = static_cast<int8_t>(pick(fill, -127, 127, j, random));
      for (int g = 0; g < q::kBlockK / 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += blocks[b].qs[16 * g + j];
        blocks[b].bsums[g] = static_cast<int16_t>(sum);
      }
    }
    return row;
  }
  const size_t block_bytes = tensor::dtype_traits(act_type).block_bytes;
  const size_t qs_offset = act_type == DType::q8_1 ? offsetof(q::BlockQ8_1, qs) : offsetof(q::BlockQ8_0, qs);
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    uint8_t* block = row.data() + static_cast<size_t>(b) * block_bytes;
    const uint16_t d = fp32_to_fp16(std::fabs(fp16_to_fp32(random_half(random))));
    put(block, 0, d);
    int sum = 0;
    for (size_t j = 0; j < q::kBlock32; ++j) {
      const auto value = static_cast<int8_t>(pick(fill, -127, 127, j, random));
      put(block, qs_offset + j, value);
      sum += value;
    }
    if (act_type == DType::q8_1) put(block, offsetof(q::BlockQ8_1, s), fp32_to_fp16(fp16_to_fp32(d) * sum));
  }
  return row;
}

// 1 .. 88 blocks, and 1031, past the longest row whose scales a tile converts up front; 1 .. 11 super-blocks.
std::vector<int64_t> vnni_sizes_for(DType type) {
  if (tensor::dtype_traits(type).block_size == 32) return {32, 96, 256, 320, 768, 2080, 2816, 32992};
  return {256, 512, 768, 1280, 2048, 2816};
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// one(), tile() of 1..9 activation rows by 1 and 5 weight rows, panels of 1..8 rows and narrow panels of as many
// as they hold, every output against the AVX2 one-pair kernel on the same pair (extreme fills reach the largest
// int32 sums the kernels form); the tile's and panels' outputs outside their rows must stay NaN.
TEST_P(VnniMatchesAvx2, OneTileAndPanelBitIdentical) {
  constexpr int64_t kWeightRows = 5, kActRows = 9, kOutStride = 7;
  const KernelIsa isa = GetParam();
  for (DType type : kQuantTypes) {
    const DType act_type = tensor::dtype_traits(type).vec_dot_type;
    const VecDotKernel expected = avx2::vec_dot_kernel(type);
    const VecDotKernel kernel = vec_dot_kernel(isa, type);
    ASSERT_NE(kernel.one, nullptr);
    ASSERT_NE(kernel.tile, nullptr);
    ASSERT_NE(kernel.panel.dot, nullptr) << "every quantized type has a VNNI panel";
    for (int64_t n : vnni_sizes_for(type)) {
      for (Fill weight_fill : kFills) {
        for (Fill act_fill : kFills) {
          if (n > 2816 && (weight_fill != Fill::random || act_fill != Fill::random)) continue;  // time
          SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(tensor::dtype_name(type)) + " n=" + std::to_string(n) +
                       " weights " + fill_name(weight_fill) + ", activations " + fill_name(act_fill));
          test::QuantRandom random(static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(type) * 7 +
                                   static_cast<uint64_t>(weight_fill) * 5 + static_cast<uint64_t>(act_fill));
          const size_t weight_row_bytes = tensor::row_bytes(type, n);
          const size_t act_row_bytes = tensor::row_bytes(act_type, n);
          std::vector<uint8_t> weights, acts;
          for (int64_t i = 0; i < kWeightRows; ++i) {
            const std::vector<uint8_t> row = weight_row_filled(type, n, weight_fill, random);
            weights.insert(weights.end(), row.begin(), row.end());
          }
          for (int64_t r = 0; r < kActRows; ++r) {
            const std::vector<uint8_t> row = activation_row_filled(act_type, n, act_fill, random);
            acts.insert(acts.end(), row.begin(), row.end());
          }
          float want[kActRows][kOutStride] = {};  // columns from kWeightRows on unused
          for (int64_t r = 0; r < kActRows; ++r) {
            for (int64_t i = 0; i < kWeightRows; ++i) {
              const uint8_t* w = weights.data() + i * weight_row_bytes;
              const uint8_t* a = acts.data() + r * act_row_bytes;
              want[r][i] = expected.one(n, w, a);
              ASSERT_TRUE(std::isfinite(want[r][i]));
              const float got = kernel.one(n, w, a);
              ASSERT_TRUE(same_bits(got, want[r][i])) << "one, weight " << i << " row " << r << ": " << got
                                                      << " vs avx2 " << want[r][i];
            }
          }
          // Checks out (written by a tile or panel of n_rows rows by n_weight_rows) against want.
          auto check = [&](const char* what, const std::vector<float>& out, int64_t n_rows, int64_t n_weight_rows) {
            for (int64_t r = 0; r < kActRows; ++r) {
              for (int64_t i = 0; i < kOutStride; ++i) {
                const float got = out[static_cast<size_t>(r * kOutStride + i)];
                if (r >= n_rows || i >= n_weight_rows) {
                  ASSERT_TRUE(std::isnan(got)) << what << " of " << n_rows << " rows wrote row " << r << " col " << i;
                } else {
                  ASSERT_TRUE(same_bits(got, want[r][i])) << what << " of " << n_rows << " rows by " << n_weight_rows
                                                          << ", weight " << i << " row " << r << ": " << got
                                                          << " vs avx2 " << want[r][i];
                }
              }
            }
          };
          for (int64_t n_weight_rows : {int64_t{1}, kWeightRows}) {
            for (int64_t n_rows = 1; n_rows <= kActRows; ++n_rows) {
              std::vector<float> out(kActRows * kOutStride, std::numeric_limits<float>::quiet_NaN());
              kernel.tile(n, weights.data(), weight_row_bytes, n_weight_rows, acts.data(), act_row_bytes, n_rows,
                          out.data(), kOutStride);
              check("tile", out, n_rows, n_weight_rows);
            }
          }
          for (const PanelKernel* panel_of : {&kernel.panel, &kernel.narrow_panel}) {
            if (panel_of->dot == nullptr) continue;
            for (int64_t n_rows = 1; n_rows <= panel_of->rows; ++n_rows) {
              std::vector<uint8_t> panel(panel_of->panel_bytes(n), 0xCD);
              panel_of->pack(n, acts.data(), act_row_bytes, n_rows, panel.data());
              std::vector<float> out(kActRows * kOutStride, std::numeric_limits<float>::quiet_NaN());
              panel_of->dot(n, weights.data(), weight_row_bytes, kWeightRows, panel.data(), n_rows, out.data(),
                            kOutStride);
              check(panel_of == &kernel.panel ? "panel" : "narrow panel", out, n_rows, kWeightRows);
            }
          }
        }
      }
    }
  }
}

// The float types and the quantizers are AVX2's under every VNNI flavour.
TEST_P(VnniMatchesAvx2, FloatTypesAndQuantizersAreAvx2s) {
  const KernelIsa isa = GetParam();
  for (DType type : {DType::f32, DType::f16, DType::bf16}) {
    EXPECT_EQ(vec_dot_kernel(isa, type).one, avx2::vec_dot_kernel(type).one) << tensor::dtype_name(type);
    EXPECT_EQ(vec_dot_kernel(isa, type).tile, avx2::vec_dot_kernel(type).tile) << tensor::dtype_name(type);
  }
  for (DType act_type : {DType::f32, DType::q8_0, DType::q8_1, DType::q8_k}) {
    EXPECT_EQ(quantize_row_fn(isa, act_type), avx2::quantize_row_fn(act_type)) << tensor::dtype_name(act_type);
  }
  // The read-only types have no VNNI kernels of their own yet: the AVX2 ones serve every flavour.
  for (DType type : test::read_only_types()) {
    EXPECT_EQ(vec_dot_kernel(isa, type).one, avx2::vec_dot_kernel(type).one) << tensor::dtype_name(type);
    EXPECT_EQ(vec_dot_kernel(isa, type).tile, avx2::vec_dot_kernel(type).tile) << tensor::dtype_name(type);
  }
  EXPECT_EQ(vec_dot_kernel(isa, DType::q8_k).one, nullptr);
}

// Test names cannot hold a '-'.
std::string flavour_test_name(const ::testing::TestParamInfo<KernelIsa>& param_info) {
  return param_info.param == KernelIsa::vnni_emulated ? "vnni_emulated" : isa_name(param_info.param);
}

INSTANTIATE_TEST_SUITE_P(Flavours, VnniMatchesAvx2, ::testing::ValuesIn(kVnniIsas),
                         flavour_test_name);

TEST(VecDot, DispatchPicksOneOfTheTables) {
  const KernelIsa isa = kernel_isa();
  const std::string name = isa_name();
  ASSERT_EQ(name, isa_name(isa));
  ASSERT_TRUE(isa_supported(isa)) << name;
  if (std::getenv("REWIND_ISA") == nullptr) {  // the best the CPU has; never the emulation
    ASSERT_NE(isa, KernelIsa::vnni_emulated);
    if (isa_supported(KernelIsa::avx512vnni)) {
      EXPECT_EQ(isa, KernelIsa::avx512vnni);
    } else if (isa_supported(KernelIsa::avxvnni)) {
      EXPECT_EQ(isa, KernelIsa::avxvnni);
    } else {
      EXPECT_EQ(isa, avx2_supported() ? KernelIsa::avx2 : KernelIsa::scalar);
    }
  }
  for (DType type : test::weight_types()) {
    ASSERT_TRUE(tensor::is_supported_weight_type(type));
    const VecDotKernel table = table_of(isa)(type);
    EXPECT_EQ(vec_dot_fn(type), table.one) << tensor::dtype_name(type);
    EXPECT_EQ(vec_dot_kernel(type).tile, table.tile) << tensor::dtype_name(type);
    EXPECT_EQ(vec_dot_kernel(type).panel.dot, table.panel.dot) << tensor::dtype_name(type);
    const DType act_type = tensor::dtype_traits(type).vec_dot_type;
    EXPECT_NE(quantize_row_fn(act_type), nullptr) << tensor::dtype_name(act_type);
  }
  EXPECT_EQ(vec_dot_fn(DType::i32), nullptr);
  EXPECT_FALSE(tensor::is_supported_weight_type(DType::i32));
  EXPECT_EQ(vec_dot_fn(DType::q8_k), nullptr);
}

}  // namespace
}  // namespace rwd::kernels::cpu
