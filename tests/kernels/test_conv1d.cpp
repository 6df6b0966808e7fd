// Causal conv1d: both ISA paths against the float64 reference (d_conv 1..4, 1, 7 and 773 channels, with and
// without bias, T = 1 .. 200) with per-element bounds from float rounding, the carried window (exact copies of
// the last inputs), and bit-exactness of any split of the tokens into consecutive calls.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "float_kernel_test_util.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/ref/conv1d.h"

namespace rwd {
namespace {

using test::Isa;

constexpr double kUnit = 0x1p-24;

void run_conv(Isa isa, const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
              const float* bias, float* window, float* out) {
  if (isa == Isa::scalar) {
    kernels::cpu::detail::causal_conv1d_scalar(x, n_tokens, n_channels, weight, d_conv, bias, window, out);
  } else {
    kernels::cpu::detail::causal_conv1d_avx2(x, n_tokens, n_channels, weight, d_conv, bias, window, out);
  }
}

struct Inputs {
  std::vector<float> x;       // [n_tokens, n_channels]
  std::vector<float> weight;  // [n_channels, d_conv]
  std::vector<float> bias;    // [n_channels]
  std::vector<float> window;  // [d_conv - 1, n_channels]
};

Inputs make_inputs(int64_t n_tokens, int64_t n_channels, int64_t d_conv, uint64_t seed) {
  test::Random random(seed);
  return {random.floats(n_tokens * n_channels, -2.0f, 2.0f), random.floats(n_channels * d_conv, -1.0f, 1.0f),
          random.floats(n_channels, -0.5f, 0.5f), random.floats((d_conv - 1) * n_channels, -2.0f, 2.0f)};
}

std::string describe(int64_t n_tokens, int64_t n_channels, int64_t d_conv, bool with_bias) {
  return "T=" + std::to_string(n_tokens) + " C=" + std::to_string(n_channels) + " d_conv=" + std::to_string(d_conv) +
         (with_bias ? " bias" : " no bias");
}

class Conv1dTest : public ::testing::TestWithParam<Isa> {};

// Each output is bias + d_conv products summed in a fixed order: at most 2 d_conv + 1 roundings (scalar; the
// AVX2 FMAs round d_conv times), each bounded by u times the sum of the magnitudes |bias| + Σ|w x|, plus the
// reference's own rounding of the result.
TEST_P(Conv1dTest, MatchesReference) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  for (int64_t d_conv : {1, 2, 3, 4}) {
    for (int64_t n_channels : {1, 7, 768 + 5}) {
      for (int64_t n_tokens : {1, 2, 63, 200}) {
        for (bool with_bias : {false, true}) {
          const Inputs in = make_inputs(n_tokens, n_channels, d_conv, 100 * d_conv + n_tokens);
          const float* bias = with_bias ? in.bias.data() : nullptr;
          std::vector<float> expected = test::nan_filled(n_tokens * n_channels);
          std::vector<float> actual = test::nan_filled(n_tokens * n_channels);
          std::vector<float> window_expected = in.window;
          std::vector<float> window_actual = in.window;
          kernels::ref::causal_conv1d(in.x.data(), n_tokens, n_channels, in.weight.data(), d_conv, bias,
                                      window_expected.data(), expected.data());
          run_conv(isa, in.x.data(), n_tokens, n_channels, in.weight.data(), d_conv, bias, window_actual.data(),
                   actual.data());
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t c = 0; c < n_channels; ++c) {
              double magnitude = with_bias ? std::fabs(in.bias[c]) : 0.0;
              for (int64_t i = 0; i < d_conv; ++i) {
                const int64_t row = t + i - (d_conv - 1);  // < 0: a window row
                const float input = row < 0 ? in.window[(d_conv - 1 + row) * n_channels + c] : in.x[row * n_channels + c];
                magnitude += std::fabs(static_cast<double>(in.weight[c * d_conv + i]) * input);
              }
              const double bound = (2.0 * d_conv + 1.0) * kUnit * magnitude + kUnit * std::fabs(expected[t * n_channels + c]);
              ASSERT_NEAR(actual[t * n_channels + c], expected[t * n_channels + c], bound)
                  << test::isa_name(isa) << " " << describe(n_tokens, n_channels, d_conv, with_bias) << " t=" << t
                  << " c=" << c;
            }
          }
          ASSERT_TRUE(test::same_bits(window_actual, window_expected))
              << test::isa_name(isa) << " " << describe(n_tokens, n_channels, d_conv, with_bias);
        }
      }
    }
  }
}

// A window carried across calls gives exactly the outputs and final window of one call over the concatenation,
// for every split point (including splits shorter than the window) and for one call per token.
TEST_P(Conv1dTest, CarriedWindowEqualsOneCall) {
  const Isa isa = GetParam();
  REWIND_SKIP_UNLESS_AVAILABLE(isa);
  for (int64_t d_conv : {2, 3, 4}) {
    for (int64_t n_channels : {7, 768 + 5}) {
      const int64_t n_tokens = 9;
      const Inputs in = make_inputs(n_tokens, n_channels, d_conv, 7);
      std::vector<float> whole = test::nan_filled(n_tokens * n_channels);
      std::vector<float> whole_window = in.window;
      run_conv(isa, in.x.data(), n_tokens, n_channels, in.weight.data(), d_conv, in.bias.data(), whole_window.data(),
               whole.data());
      for (int64_t split = 0; split <= n_tokens; ++split) {
        std::vector<float> parts = test::nan_filled(n_tokens * n_channels);
        std::vector<float> window = in.window;
        run_conv(isa, in.x.data(), split, n_channels, in.weight.data(), d_conv, in.bias.data(), window.data(),
                 parts.data());
        run_conv(isa, in.x.data() + split * n_channels, n_tokens - split, n_channels, in.weight.data(), d_conv,
                 in.bias.data(), window.data(), parts.data() + split * n_channels);
        EXPECT_TRUE(test::same_bits(parts, whole)) << "d_conv=" << d_conv << " C=" << n_channels << " split=" << split;
        EXPECT_TRUE(test::same_bits(window, whole_window)) << "d_conv=" << d_conv << " split=" << split;
      }
      std::vector<float> single = test::nan_filled(n_tokens * n_channels);
      std::vector<float> window = in.window;
      for (int64_t t = 0; t < n_tokens; ++t) {
        run_conv(isa, in.x.data() + t * n_channels, 1, n_channels, in.weight.data(), d_conv, in.bias.data(),
                 window.data(), single.data() + t * n_channels);
      }
      EXPECT_TRUE(test::same_bits(single, whole)) << "d_conv=" << d_conv << " C=" << n_channels;
      EXPECT_TRUE(test::same_bits(window, whole_window)) << "d_conv=" << d_conv << " C=" << n_channels;
    }
  }
}

// A token tree's conv (tree speculation): each node's output equals that of its path run token by token from
// the window, whose bits the tree leaves alone. Paths shorter and longer than the window, branching at the root.
TEST(Conv1dTree, NodesEqualTheirPathsRunAlone) {
  const std::vector<int32_t> parents = {-1, 0, 1, 2, 3, 1, 5, 0, 7, 0};
  const auto n = static_cast<int64_t>(parents.size());
  for (int64_t d_conv : {1, 2, 4}) {
    for (int64_t n_channels : {7, 768 + 5}) {
      const Inputs in = make_inputs(n, n_channels, d_conv, 13);
      std::vector<float> window = in.window;
      std::vector<float> scratch((d_conv - 1) * n_channels);
      std::vector<float> out = test::nan_filled(n * n_channels);
      kernels::cpu::causal_conv1d_tree(in.x.data(), n, parents.data(), n_channels, in.weight.data(), d_conv,
                                       in.bias.data(), window.data(), scratch.data(), out.data());
      EXPECT_TRUE(test::same_bits(window, in.window)) << "the tree wrote the window";
      for (int64_t node = 0; node < n; ++node) {
        std::vector<int64_t> path;
        for (int64_t a = node; a >= 0; a = parents[a]) path.insert(path.begin(), a);
        std::vector<float> path_window = in.window;
        std::vector<float> path_out = test::nan_filled(n_channels);
        for (int64_t a : path) {
          kernels::cpu::causal_conv1d(in.x.data() + a * n_channels, 1, n_channels, in.weight.data(), d_conv,
                                      in.bias.data(), path_window.data(), path_out.data());
        }
        EXPECT_TRUE(test::same_bits(std::vector<float>(out.begin() + node * n_channels,
                                                       out.begin() + (node + 1) * n_channels),
                                    path_out))
            << "d_conv=" << d_conv << " C=" << n_channels << " node " << node;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, Conv1dTest, ::testing::Values(Isa::scalar, Isa::avx2), test::isa_test_name);

TEST(Conv1dDispatch, PublicFunctionUsesSelectedPath) {
  const int64_t n_tokens = 5, n_channels = 37, d_conv = 4;
  const Inputs in = make_inputs(n_tokens, n_channels, d_conv, 9);
  std::vector<float> via_public = test::nan_filled(n_tokens * n_channels);
  std::vector<float> via_path = test::nan_filled(n_tokens * n_channels);
  std::vector<float> window_public = in.window;
  std::vector<float> window_path = in.window;
  kernels::cpu::causal_conv1d(in.x.data(), n_tokens, n_channels, in.weight.data(), d_conv, in.bias.data(),
                              window_public.data(), via_public.data());
  run_conv(kernels::cpu::has_avx2_fma() ? Isa::avx2 : Isa::scalar, in.x.data(), n_tokens, n_channels,
           in.weight.data(), d_conv, in.bias.data(), window_path.data(), via_path.data());
  EXPECT_TRUE(test::same_bits(via_public, via_path));
  EXPECT_TRUE(test::same_bits(window_public, window_path));
}

TEST(Conv1dDeathTest, RejectsUnsupportedKernelWidth) {
  std::vector<float> x(4, 1.0f), weight(64, 1.0f), window(64, 1.0f), out(4, 0.0f);
  EXPECT_DEATH(kernels::cpu::causal_conv1d(x.data(), 1, 4, weight.data(), 0, nullptr, window.data(), out.data()),
               "d_conv");
  EXPECT_DEATH(kernels::cpu::causal_conv1d(x.data(), 1, 1, weight.data(), kernels::cpu::kConv1dMaxKernel + 1, nullptr,
                                           window.data(), out.data()),
               "d_conv");
}

}  // namespace
}  // namespace rwd
