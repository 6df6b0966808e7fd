// L2 norm: both ISA paths against the float64 reference (odd widths, the eps clamp for tiny rows), in place, and
// row independence.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float_kernel_test_util.h"
#include "kernels/cpu/l2_norm.h"
#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/ref/l2_norm.h"

namespace rwd {
namespace {

using test::Isa;
using test::kFloatEps;

void run_l2_norm(Isa isa, const float* x, float* y, int64_t n_rows, int64_t n, float eps) {
  if (isa == Isa::scalar) {
    kernels::cpu::detail::l2_norm_scalar(x, y, n_rows, n, eps);
  } else {
    kernels::cpu::detail::l2_norm_avx2(x, y, n_rows, n, eps);
  }
}

class L2NormTest : public ::testing::TestWithParam<Isa> {};

// The reference rounds once; the fast paths round the scale and the product once each (the float64 norm adds
// nothing visible): 3 half-ulps relative in all, under 2 kFloatEps.
TEST_P(L2NormTest, MatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(23);
  for (int64_t n : {1, 3, 7, 8, 16, 17, 32, 48, 64, 128, 131}) {
    for (int64_t n_rows : {1, 5}) {
      for (float scale : {1e-7f, 1.0f, 100.0f}) {  // 1e-7: the norm falls below eps and eps takes over
        const std::vector<float> x = random.floats(n_rows * n, -scale, scale);
        std::vector<float> expected = test::nan_filled(n_rows * n);
        std::vector<float> actual = test::nan_filled(n_rows * n);
        kernels::ref::l2_norm(x.data(), expected.data(), n_rows, n, 1e-6f);
        run_l2_norm(isa, x.data(), actual.data(), n_rows, n, 1e-6f);
        for (int64_t i = 0; i < n_rows * n; ++i) {
          ASSERT_NEAR(actual[i], expected[i], 2.0 * kFloatEps * std::fabs(expected[i]))
              << test::isa_name(isa) << " n=" << n << " rows=" << n_rows << " scale=" << scale << " i=" << i;
        }
      }
    }
  }
}

TEST_P(L2NormTest, UnitNormAndEpsClamp) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(2);
  const int64_t n = 128;
  const std::vector<float> x = random.floats(n, -3.0f, 3.0f);
  std::vector<float> y = test::nan_filled(n);
  run_l2_norm(isa, x.data(), y.data(), 1, n, 1e-6f);
  double sum_squares = 0.0;
  for (float value : y) sum_squares += static_cast<double>(value) * value;
  EXPECT_NEAR(std::sqrt(sum_squares), 1.0, 4.0 * kFloatEps);
  const std::vector<float> tiny = random.floats(n, -1e-9f, 1e-9f);  // norm ~ 1e-8 < eps: y = x / eps
  run_l2_norm(isa, tiny.data(), y.data(), 1, n, 1e-6f);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], tiny[i] / 1e-6, 2.0 * kFloatEps * std::fabs(tiny[i] / 1e-6)) << i;
}

TEST_P(L2NormTest, InPlaceAndRowsIndependent) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(5);
  const int64_t n_rows = 4, n = 131;
  std::vector<float> x = random.floats(n_rows * n, -3.0f, 3.0f);
  std::vector<float> out_of_place = test::nan_filled(n_rows * n);
  run_l2_norm(isa, x.data(), out_of_place.data(), n_rows, n, 1e-6f);
  for (int64_t row = 0; row < n_rows; ++row) {
    std::vector<float> alone = test::nan_filled(n);
    run_l2_norm(isa, x.data() + row * n, alone.data(), 1, n, 1e-6f);
    EXPECT_TRUE(test::same_bits(alone, std::vector<float>(out_of_place.begin() + row * n,
                                                           out_of_place.begin() + (row + 1) * n)))
        << row;
  }
  run_l2_norm(isa, x.data(), x.data(), n_rows, n, 1e-6f);
  EXPECT_TRUE(test::same_bits(x, out_of_place));
}

INSTANTIATE_TEST_SUITE_P(Isas, L2NormTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

TEST(L2NormDispatch, PublicFunctionUsesSelectedPath) {
  test::Random random(11);
  const std::vector<float> x = random.floats(3 * 64, -1.0f, 1.0f);
  std::vector<float> via_public = test::nan_filled(3 * 64);
  std::vector<float> via_path = test::nan_filled(3 * 64);
  kernels::cpu::l2_norm(x.data(), via_public.data(), 3, 64, 1e-6f);
  run_l2_norm(kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar, x.data(), via_path.data(), 3, 64, 1e-6f);
  EXPECT_TRUE(test::same_bits(via_public, via_path));
}

}  // namespace
}  // namespace rwd
