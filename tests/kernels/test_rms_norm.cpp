// RMSNorm: both ISA paths against the float64 reference, in place, with and without weight.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float_kernel_test_util.h"
#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/ref/rms_norm.h"

namespace rwd {
namespace {

using test::Isa;
using test::kFloatEps;

void run_rms_norm(Isa isa, const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) {
  if (isa == Isa::scalar) {
    kernels::cpu::detail::rms_norm_scalar(x, weight, y, n_rows, n, eps);
  } else {
    kernels::cpu::detail::rms_norm_avx2(x, weight, y, n_rows, n, eps);
  }
}

class RmsNormTest : public ::testing::TestWithParam<Isa> {};

// The reference rounds once. The fast paths round the scale, x * scale and the weight product once each (the
// float64 sum of squares adds nothing visible): at most 3 + 1 half-ulps relative, i.e. 2 kFloatEps.
TEST_P(RmsNormTest, MatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(17);
  for (int64_t n : {1, 3, 7, 8, 15, 16, 17, 63, 64, 65, 4097}) {
    for (int64_t n_rows : {1, 3}) {
      for (bool with_weight : {false, true}) {
        for (float eps : {1e-6f, 1e-5f}) {
          const std::vector<float> x = random.floats(n_rows * n, -2.0f, 2.0f);
          const std::vector<float> weight = random.floats(n, 0.25f, 1.75f);
          const float* w = with_weight ? weight.data() : nullptr;
          std::vector<float> expected = test::nan_filled(n_rows * n);
          std::vector<float> actual = test::nan_filled(n_rows * n);
          kernels::ref::rms_norm(x.data(), w, expected.data(), n_rows, n, eps);
          run_rms_norm(isa, x.data(), w, actual.data(), n_rows, n, eps);
          for (int64_t i = 0; i < n_rows * n; ++i) {
            ASSERT_NEAR(actual[i], expected[i], 2.0 * kFloatEps * std::fabs(expected[i]))
                << test::isa_name(isa) << " n=" << n << " rows=" << n_rows << " weight=" << with_weight << " i=" << i;
          }
        }
      }
    }
  }
}

// Small inputs, where eps dominates the mean square and the output is far from unit RMS.
TEST_P(RmsNormTest, EpsDominatesTinyInputs) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(3);
  const int64_t n = 65;
  const std::vector<float> x = random.floats(n, -1e-4f, 1e-4f);
  std::vector<float> expected = test::nan_filled(n);
  std::vector<float> actual = test::nan_filled(n);
  kernels::ref::rms_norm(x.data(), nullptr, expected.data(), 1, n, 1e-5f);
  run_rms_norm(isa, x.data(), nullptr, actual.data(), 1, n, 1e-5f);
  double sum_squares = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(actual[i], expected[i], 2.0 * kFloatEps * std::fabs(expected[i])) << i;
    sum_squares += static_cast<double>(actual[i]) * actual[i];
  }
  EXPECT_LT(std::sqrt(sum_squares / n), 0.1);  // x / sqrt(mean(x²) + eps) with mean(x²) ~ 3e-9 << eps
}

TEST_P(RmsNormTest, InPlaceEqualsOutOfPlace) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(5);
  const int64_t n_rows = 3;
  const int64_t n = 131;
  std::vector<float> x = random.floats(n_rows * n, -3.0f, 3.0f);
  const std::vector<float> weight = random.floats(n, -1.0f, 1.0f);
  std::vector<float> out_of_place = test::nan_filled(n_rows * n);
  run_rms_norm(isa, x.data(), weight.data(), out_of_place.data(), n_rows, n, 1e-6f);
  run_rms_norm(isa, x.data(), weight.data(), x.data(), n_rows, n, 1e-6f);
  EXPECT_TRUE(test::same_bits(x, out_of_place));
}

// Rows are independent: a row normalised inside a batch of 5 equals the row normalised alone, bit for bit.
TEST_P(RmsNormTest, BatchInvariant) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(9);
  const int64_t n_rows = 5;
  const int64_t n = 4097;
  const std::vector<float> x = random.floats(n_rows * n, -3.0f, 3.0f);
  const std::vector<float> weight = random.floats(n, 0.5f, 1.5f);
  std::vector<float> batch = test::nan_filled(n_rows * n);
  run_rms_norm(isa, x.data(), weight.data(), batch.data(), n_rows, n, 1e-6f);
  for (int64_t row = 0; row < n_rows; ++row) {
    std::vector<float> alone = test::nan_filled(n);
    run_rms_norm(isa, x.data() + row * n, weight.data(), alone.data(), 1, n, 1e-6f);
    EXPECT_TRUE(test::same_bits(alone, std::vector<float>(batch.begin() + row * n, batch.begin() + (row + 1) * n)))
        << row;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, RmsNormTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

// The public entry point runs exactly the path has_avx2_fma() selects.
TEST(RmsNormDispatch, PublicFunctionUsesSelectedPath) {
  test::Random random(11);
  const int64_t n = 100;
  const std::vector<float> x = random.floats(2 * n, -1.0f, 1.0f);
  const std::vector<float> weight = random.floats(n, -1.0f, 1.0f);
  std::vector<float> via_public = test::nan_filled(2 * n);
  std::vector<float> via_path = test::nan_filled(2 * n);
  kernels::cpu::rms_norm(x.data(), weight.data(), via_public.data(), 2, n, 1e-6f);
  run_rms_norm(kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar, x.data(), weight.data(), via_path.data(), 2, n,
               1e-6f);
  EXPECT_TRUE(test::same_bits(via_public, via_path));
}

}  // namespace
}  // namespace rwd
