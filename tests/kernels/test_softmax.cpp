// Softmax: both ISA paths against the float64 reference, with error bounds derived from float32 rounding.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "float_kernel_test_util.h"
#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/cpu/softmax.h"
#include "kernels/ref/softmax.h"

namespace rwd {
namespace {

using test::Isa;
using test::kFloatEps;

void run_softmax(Isa isa, float* x, int64_t n) {
  if (isa == Isa::scalar) {
    kernels::cpu::detail::softmax_scalar(x, n);
  } else {
    kernels::cpu::detail::softmax_avx2(x, n);
  }
}

// Error bound for element i, in units of kFloatEps relative to the exact value:
//   x_i - max rounds by half an ulp of |x_i - max|, which exp turns into a relative error of |x_i - max| / 2;
//   exp itself: 1 (libm expf) or 2 (the 8-lane exp) ulps; the float64 sum inherits at most the worst element's
//   relative error; rounding 1/sum, the final multiply and the reference's own rounding add 3 half-ulps.
// Subnormal results carry an absolute error of a few 2^-149 instead.
void expect_close_to_reference(Isa isa, const std::vector<float>& input, const char* what) {
  const int64_t n = static_cast<int64_t>(input.size());
  std::vector<float> expected = input;
  std::vector<float> actual = input;
  kernels::ref::softmax(expected.data(), n);
  run_softmax(isa, actual.data(), n);
  const float max_value = *std::max_element(input.begin(), input.end());
  const double exp_ulps = isa == Isa::scalar ? 1.0 : 2.0;
  double worst_rel = 0.0;
  for (float value : input) {
    if (std::isfinite(value)) worst_rel = std::max(worst_rel, std::fabs(value - max_value) / 2.0 + exp_ulps);
  }
  for (int64_t i = 0; i < n; ++i) {
    const double own_rel = std::isfinite(input[i]) ? std::fabs(input[i] - max_value) / 2.0 + exp_ulps : 0.0;
    const double tolerance = kFloatEps * (own_rel + worst_rel + 1.5) * std::fabs(expected[i]) + 0x1p-147;
    ASSERT_NEAR(actual[i], expected[i], tolerance) << test::isa_name(isa) << " " << what << " n=" << n << " i=" << i;
  }
}

class SoftmaxTest : public ::testing::TestWithParam<Isa> {};

TEST_P(SoftmaxTest, MatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(23);
  for (int64_t n : {1, 2, 3, 7, 8, 9, 63, 64, 65, 4097}) {
    expect_close_to_reference(isa, random.floats(n, -8.0f, 8.0f), "uniform");
    // Logits far from zero: without the max subtraction exp would overflow.
    std::vector<float> shifted = random.floats(n, 990.0f, 1010.0f);
    expect_close_to_reference(isa, shifted, "shifted");
  }
}

// A zero among non-positive inputs makes x - max exact, so this isolates the exp itself, including results
// that are subnormal (inputs below about -87.3) or underflow to zero.
TEST_P(SoftmaxTest, ExpAccuracyOverTheWholeRange) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(29);
  std::vector<float> input = random.floats(4099, -110.0f, 0.0f);
  input[1234] = 0.0f;
  const int64_t n = static_cast<int64_t>(input.size());
  std::vector<float> expected = input;
  std::vector<float> actual = input;
  kernels::ref::softmax(expected.data(), n);
  run_softmax(isa, actual.data(), n);
  const double exp_ulps = isa == Isa::scalar ? 1.0 : 2.0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(actual[i], expected[i], kFloatEps * (2.0 * exp_ulps + 1.5) * std::fabs(expected[i]) + 0x1p-147)
        << test::isa_name(isa) << " x=" << input[i];
  }
}

// -inf entries (masked logits) get exactly 0 and do not disturb the others.
TEST_P(SoftmaxTest, MinusInfinityGivesZero) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(31);
  for (int64_t n : {5, 8, 13, 67}) {
    std::vector<float> input = random.floats(n, -4.0f, 4.0f);
    for (int64_t i = 0; i < n; i += 3) input[i] = -std::numeric_limits<float>::infinity();
    std::vector<float> actual = input;
    run_softmax(isa, actual.data(), n);
    for (int64_t i = 0; i < n; i += 3) EXPECT_EQ(actual[i], 0.0f) << i;
    expect_close_to_reference(isa, input, "masked");
  }
}

TEST_P(SoftmaxTest, SumsToOne) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  test::Random random(37);
  std::vector<float> x = random.floats(151936, -20.0f, 20.0f);  // a vocabulary-sized row
  run_softmax(isa, x.data(), static_cast<int64_t>(x.size()));
  double sum = 0.0;
  for (float p : x) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Isas, SoftmaxTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

TEST(SoftmaxDispatch, PublicFunctionUsesSelectedPath) {
  test::Random random(41);
  const std::vector<float> input = random.floats(77, -5.0f, 5.0f);
  std::vector<float> via_public = input;
  std::vector<float> via_path = input;
  kernels::cpu::softmax(via_public.data(), 77);
  run_softmax(kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar, via_path.data(), 77);
  EXPECT_TRUE(test::same_bits(via_public, via_path));
}

}  // namespace
}  // namespace rwd
