// Gated RMSNorm: both ISA paths and both gate activations against the float64 reference (odd widths, gates far
// into both tails), in place, and row independence.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float_kernel_test_util.h"
#include "kernels/cpu/gated_rms_norm.h"
#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/ref/gated_rms_norm.h"

namespace rwd {
namespace {

using kernels::cpu::GateActivation;
using test::Isa;
using test::kFloatEps;

void run_norm(Isa isa, const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
              float eps, GateActivation activation) {
  if (isa == Isa::scalar) {
    kernels::cpu::detail::gated_rms_norm_scalar(x, z, weight, y, n_rows, n, eps, activation);
  } else {
    kernels::cpu::detail::gated_rms_norm_avx2(x, z, weight, y, n_rows, n, eps, activation);
  }
}

class GatedRmsNormTest : public ::testing::TestWithParam<Isa> {};

// Relative error of the fast paths, in half-ulps u: the scale, x * scale and * weight (3u); the gate's exp
// (within 2 ulp, 4u), 1 + e and the division (2u), SiLU's product (u); the final product (u); and the
// reference's rounding (u): 12u = 6 kFloatEps. Bounded by 8 kFloatEps.
TEST_P(GatedRmsNormTest, MatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(31);
  for (GateActivation activation : {GateActivation::silu, GateActivation::sigmoid}) {
    for (int64_t n : {1, 3, 7, 8, 17, 48, 64, 128, 131}) {
      for (int64_t n_rows : {1, 6}) {
        const std::vector<float> x = random.floats(n_rows * n, -2.0f, 2.0f);
        const std::vector<float> z = random.floats(n_rows * n, -12.0f, 12.0f);
        const std::vector<float> weight = random.floats(n, 0.25f, 1.75f);
        std::vector<float> expected = test::nan_filled(n_rows * n);
        std::vector<float> actual = test::nan_filled(n_rows * n);
        kernels::ref::gated_rms_norm(x.data(), z.data(), weight.data(), expected.data(), n_rows, n, 1e-6f,
                                     activation);
        run_norm(isa, x.data(), z.data(), weight.data(), actual.data(), n_rows, n, 1e-6f, activation);
        for (int64_t i = 0; i < n_rows * n; ++i) {
          ASSERT_NEAR(actual[i], expected[i], 8.0 * kFloatEps * std::fabs(expected[i]))
              << test::isa_name(isa) << " silu=" << (activation == GateActivation::silu) << " n=" << n
              << " rows=" << n_rows << " i=" << i << " z=" << z[i];
        }
      }
    }
  }
}

TEST_P(GatedRmsNormTest, InPlaceAndRowsIndependent) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(7);
  const int64_t n_rows = 4, n = 131;
  std::vector<float> x = random.floats(n_rows * n, -3.0f, 3.0f);
  const std::vector<float> z = random.floats(n_rows * n, -4.0f, 4.0f);
  const std::vector<float> weight = random.floats(n, -1.0f, 1.0f);
  std::vector<float> out_of_place = test::nan_filled(n_rows * n);
  run_norm(isa, x.data(), z.data(), weight.data(), out_of_place.data(), n_rows, n, 1e-6f, GateActivation::silu);
  for (int64_t row = 0; row < n_rows; ++row) {
    std::vector<float> alone = test::nan_filled(n);
    run_norm(isa, x.data() + row * n, z.data() + row * n, weight.data(), alone.data(), 1, n, 1e-6f,
             GateActivation::silu);
    EXPECT_TRUE(test::same_bits(alone, std::vector<float>(out_of_place.begin() + row * n,
                                                           out_of_place.begin() + (row + 1) * n)))
        << row;
  }
  run_norm(isa, x.data(), z.data(), weight.data(), x.data(), n_rows, n, 1e-6f, GateActivation::silu);
  EXPECT_TRUE(test::same_bits(x, out_of_place));
}

INSTANTIATE_TEST_SUITE_P(Isas, GatedRmsNormTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

TEST(GatedRmsNormDispatch, PublicFunctionUsesSelectedPath) {
  test::Random random(13);
  const int64_t n = 64;
  const std::vector<float> x = random.floats(2 * n, -1.0f, 1.0f);
  const std::vector<float> z = random.floats(2 * n, -3.0f, 3.0f);
  const std::vector<float> weight = random.floats(n, 0.5f, 1.5f);
  std::vector<float> via_public = test::nan_filled(2 * n);
  std::vector<float> via_path = test::nan_filled(2 * n);
  kernels::cpu::gated_rms_norm(x.data(), z.data(), weight.data(), via_public.data(), 2, n, 1e-6f,
                               GateActivation::sigmoid);
  run_norm(kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar, x.data(), z.data(), weight.data(), via_path.data(),
           2, n, 1e-6f, GateActivation::sigmoid);
  EXPECT_TRUE(test::same_bits(via_public, via_path));
}

}  // namespace
}  // namespace rwd
