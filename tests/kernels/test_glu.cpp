// SwiGLU, GeGLU and SiLU: both ISA paths against the float64 reference, and the reference against the formulas.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "float_kernel_test_util.h"
#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/cpu/glu.h"
#include "kernels/ref/glu.h"

namespace rwd {
namespace {

using test::Isa;
using test::kFloatEps;

using GluFn = void (*)(const float*, const float*, float*, int64_t);

GluFn swiglu_for(Isa isa) {
  return isa == Isa::scalar ? kernels::cpu::detail::swiglu_scalar : kernels::cpu::detail::swiglu_avx2;
}
GluFn geglu_for(Isa isa) {
  return isa == Isa::scalar ? kernels::cpu::detail::geglu_scalar : kernels::cpu::detail::geglu_avx2;
}

const double kExpUlps[] = {1.0, 2.0};  // libm expf, the 8-lane exp

class GluTest : public ::testing::TestWithParam<Isa> {};

// SwiGLU negates the gate exactly, so the only errors are exp (1-2 ulps), 1 + e, the division, the product
// with up and the reference's rounding: exp_ulps + 2 in units of kFloatEps relative.
TEST_P(GluTest, SwigluMatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(43);
  for (int64_t n : {1, 3, 7, 8, 9, 63, 64, 65, 4097}) {
    const std::vector<float> gate = random.floats(n, -30.0f, 30.0f);
    const std::vector<float> up = random.floats(n, -2.0f, 2.0f);
    std::vector<float> expected = test::nan_filled(n);
    std::vector<float> actual = test::nan_filled(n);
    kernels::ref::swiglu(gate.data(), up.data(), expected.data(), n);
    swiglu_for(isa)(gate.data(), up.data(), actual.data(), n);
    const double rel = (kExpUlps[static_cast<int>(isa)] + 2.0) * kFloatEps;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(actual[i], expected[i], rel * std::fabs(expected[i]) + 1e-37)
          << test::isa_name(isa) << " n=" << n << " gate=" << gate[i];
    }
  }
}

// SiLU alone: exp (1-2 ulps), 1 + e, the division and the reference's rounding; in place as well.
TEST_P(GluTest, SiluMatchesReferenceInPlace) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  const auto silu = isa == Isa::scalar ? kernels::cpu::detail::silu_scalar : kernels::cpu::detail::silu_avx2;
  test::Random random(59);
  for (int64_t n : {1, 3, 7, 8, 9, 63, 64, 65, 4097}) {
    const std::vector<float> x = random.floats(n, -30.0f, 30.0f);
    std::vector<float> expected = test::nan_filled(n);
    kernels::ref::silu(x.data(), expected.data(), n);
    std::vector<float> actual = x;
    silu(actual.data(), actual.data(), n);
    const double rel = (kExpUlps[static_cast<int>(isa)] + 1.0) * kFloatEps;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(actual[i], expected[i], rel * std::fabs(expected[i]) + 1e-37)
          << test::isa_name(isa) << " n=" << n << " x=" << x[i];
    }
  }
  const std::vector<float> extremes = {-1e4f, -200.0f, 90.0f, 1e4f, 0.0f};
  std::vector<float> out = test::nan_filled(5);
  silu(extremes.data(), out.data(), 5);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 90.0f);
  EXPECT_EQ(out[3], 1e4f);
  EXPECT_EQ(out[4], 0.0f);
}

// GeGLU evaluates the exponent a = -2 sqrt(2/pi) (g + 0.044715 g³) in float: four roundings and two rounded
// constants give a relative error of about 3.5 kFloatEps in a, which exp turns into 3.5 |a| kFloatEps relative.
// That growth with |a| is the conditioning of GELU itself in float, not a flaw of the kernel.
TEST_P(GluTest, GegluMatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(47);
  for (int64_t n : {1, 3, 7, 8, 9, 63, 64, 65, 4097}) {
    const std::vector<float> gate = random.floats(n, -6.0f, 6.0f);
    const std::vector<float> up = random.floats(n, -2.0f, 2.0f);
    std::vector<float> expected = test::nan_filled(n);
    std::vector<float> actual = test::nan_filled(n);
    kernels::ref::geglu(gate.data(), up.data(), expected.data(), n);
    geglu_for(isa)(gate.data(), up.data(), actual.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double exponent = std::fabs(2.0 * std::sqrt(2.0 / std::numbers::pi) * (g + 0.044715 * g * g * g));
      const double rel = (4.0 * exponent + kExpUlps[static_cast<int>(isa)] + 3.0) * kFloatEps;
      ASSERT_NEAR(actual[i], expected[i], rel * std::fabs(expected[i]) + 1e-37)
          << test::isa_name(isa) << " n=" << n << " gate=" << gate[i];
    }
  }
}

// Large gates: silu(g) -> g and gelu(g) -> g for g >> 0, -> -0 for g << 0 (exp overflows to inf), no NaN.
TEST_P(GluTest, SaturatesWithoutNaN) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  const std::vector<float> gate = {-1e4f, -200.0f, -90.0f, 90.0f, 200.0f, 1e4f, 0.0f, -0.0f, 1e-30f};
  const std::vector<float> up(gate.size(), 1.5f);
  const int64_t n = static_cast<int64_t>(gate.size());
  for (GluFn fn : {swiglu_for(isa), geglu_for(isa)}) {
    std::vector<float> out = test::nan_filled(n);
    fn(gate.data(), up.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_FALSE(std::isnan(out[i])) << i;
      if (gate[i] >= 90.0f) {
        EXPECT_EQ(out[i], gate[i] * 1.5f) << i;
      }
      if (gate[i] <= -200.0f) {
        EXPECT_EQ(out[i], 0.0f) << i;
      }
    }
    EXPECT_EQ(out[6], 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GluTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

// The reference's sigmoid forms equal the textbook definitions where those are well conditioned.
TEST(GluReference, MatchesTextbookFormulas) {
  for (double x = -4.0; x <= 4.0; x += 0.0625) {
    const double gelu = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(kernels::ref::gelu_tanh(x), gelu, 1e-14) << x;
    EXPECT_NEAR(kernels::ref::silu(x), x * (1.0 / (1.0 + std::exp(-x))), 1e-15) << x;
  }
  // gelu_pytorch_tanh(1) and (-1), as PyTorch prints them.
  EXPECT_NEAR(kernels::ref::gelu_tanh(1.0), 0.8411919906, 1e-10);
  EXPECT_NEAR(kernels::ref::gelu_tanh(-1.0), -0.1588080094, 1e-10);
}

TEST(GluDispatch, PublicFunctionsUseSelectedPath) {
  test::Random random(53);
  const std::vector<float> gate = random.floats(45, -5.0f, 5.0f);
  const std::vector<float> up = random.floats(45, -5.0f, 5.0f);
  const Isa isa = kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar;
  std::vector<float> via_public = test::nan_filled(45);
  std::vector<float> via_path = test::nan_filled(45);
  kernels::cpu::swiglu(gate.data(), up.data(), via_public.data(), 45);
  swiglu_for(isa)(gate.data(), up.data(), via_path.data(), 45);
  EXPECT_TRUE(test::same_bits(via_public, via_path));
  kernels::cpu::geglu(gate.data(), up.data(), via_public.data(), 45);
  geglu_for(isa)(gate.data(), up.data(), via_path.data(), 45);
  EXPECT_TRUE(test::same_bits(via_public, via_path));
  kernels::cpu::silu(gate.data(), via_public.data(), 45);
  (isa == Isa::scalar ? kernels::cpu::detail::silu_scalar : kernels::cpu::detail::silu_avx2)(gate.data(),
                                                                                             via_path.data(), 45);
  EXPECT_TRUE(test::same_bits(via_public, via_path));
}

}  // namespace
}  // namespace rwd
