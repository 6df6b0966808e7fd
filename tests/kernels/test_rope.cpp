// RoPE: the fast kernel against the float64 reference (normal and neox, partial rotary, large positions), the
// reference against hand-computed rotations, and the relative-position property q·k depends on m - n only.
// links: rewind_kernels_cpu
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float_kernel_test_util.h"
#include "kernels/cpu/rope.h"
#include "kernels/ref/rope.h"

namespace rwd {
namespace {

using kernels::cpu::RopeMode;
using kernels::cpu::RopeParams;
using test::kFloatEps;

struct RopeCase {
  int64_t n_head;
  int64_t head_dim;
  int64_t n_rot;
  RopeMode mode;
};

// cos and sin are rounded to float (half an ulp each), each product and the sum round once, the reference
// rounds once: |error| <= kFloatEps (|x0| + |x1|) + kFloatEps |result|, with a little slack on the first term.
TEST(Rope, MatchesReference) {
  test::Random random(59);
  const RopeCase cases[] = {{3, 64, 64, RopeMode::normal},  {3, 64, 64, RopeMode::neox},
                            {4, 128, 128, RopeMode::neox},  {2, 128, 32, RopeMode::normal},
                            {2, 256, 64, RopeMode::neox},   {1, 80, 80, RopeMode::neox},
                            {5, 6, 2, RopeMode::normal},    {2, 16, 0, RopeMode::neox}};
  for (const RopeCase& c : cases) {
    for (int64_t n_tokens : {1, 2, 17}) {
      for (float freq_base : {10000.0f, 1000000.0f}) {
        const RopeParams params{.n_head = c.n_head, .head_dim = c.head_dim, .n_rot = c.n_rot, .freq_base = freq_base,
                                .freq_scale = n_tokens == 2 ? 0.25f : 1.0f, .mode = c.mode};
        std::vector<int32_t> positions(n_tokens);
        for (auto& pos : positions) pos = static_cast<int32_t>(random.integer(0, 200000));
        positions[0] = 0;
        const int64_t n_values = n_tokens * c.n_head * c.head_dim;
        const std::vector<float> input = random.floats(n_values, -3.0f, 3.0f);
        std::vector<float> expected = input;
        std::vector<float> actual = input;
        kernels::ref::rope(expected.data(), n_tokens, positions.data(), params);
        kernels::cpu::rope(actual.data(), n_tokens, positions.data(), params);
        const int64_t half = c.n_rot / 2;
        for (int64_t row = 0; row < n_tokens * c.n_head; ++row) {
          const float* in = input.data() + row * c.head_dim;
          for (int64_t d = 0; d < c.head_dim; ++d) {
            const int64_t i = row * c.head_dim + d;
            if (d >= c.n_rot) {
              ASSERT_EQ(actual[i], input[i]) << "dimension " << d << " beyond n_rot must pass through";
              continue;
            }
            // The partner of d in its rotation pair.
            const int64_t partner = c.mode == RopeMode::normal ? (d ^ 1) : (d < half ? d + half : d - half);
            const double tolerance =
                kFloatEps * (1.25 * (std::fabs(in[d]) + std::fabs(in[partner])) + std::fabs(expected[i]));
            ASSERT_NEAR(actual[i], expected[i], tolerance)
                << "head_dim " << c.head_dim << " n_rot " << c.n_rot << " row " << row << " d " << d;
          }
        }
      }
    }
  }
}

// Position 0 is the identity, exactly (cos 0 = 1, sin 0 = 0).
TEST(Rope, PositionZeroIsIdentity) {
  test::Random random(61);
  const RopeParams params{.n_head = 2, .head_dim = 64, .n_rot = 64, .mode = RopeMode::neox};
  const std::vector<float> input = random.floats(128, -3.0f, 3.0f);
  std::vector<float> x = input;
  const int32_t pos = 0;
  kernels::cpu::rope(x.data(), 1, &pos, params);
  EXPECT_TRUE(test::same_bits(x, input));
}

// theta_i = pos * base^(-2i/n_rot): head_dim 4, pos 1, base 10000 turns pair 0 by 1 rad and pair 1 by 0.01 rad.
TEST(Rope, ReferenceRotatesTheDocumentedPairs) {
  const float input[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const int32_t pos = 1;
  const double c0 = std::cos(1.0), s0 = std::sin(1.0), c1 = std::cos(0.01), s1 = std::sin(0.01);
  float normal[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  kernels::ref::rope(normal, 1, &pos, {.n_head = 1, .head_dim = 4, .n_rot = 4, .mode = RopeMode::normal});
  EXPECT_NEAR(normal[0], input[0] * c0 - input[1] * s0, 1e-6);  // pair (0, 1) by theta_0
  EXPECT_NEAR(normal[1], input[0] * s0 + input[1] * c0, 1e-6);
  EXPECT_NEAR(normal[2], input[2] * c1 - input[3] * s1, 1e-6);  // pair (2, 3) by theta_1
  EXPECT_NEAR(normal[3], input[2] * s1 + input[3] * c1, 1e-6);
  float neox[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  kernels::ref::rope(neox, 1, &pos, {.n_head = 1, .head_dim = 4, .n_rot = 4, .mode = RopeMode::neox});
  EXPECT_NEAR(neox[0], input[0] * c0 - input[2] * s0, 1e-6);  // pair (0, 2) by theta_0
  EXPECT_NEAR(neox[2], input[0] * s0 + input[2] * c0, 1e-6);
  EXPECT_NEAR(neox[1], input[1] * c1 - input[3] * s1, 1e-6);  // pair (1, 3) by theta_1
  EXPECT_NEAR(neox[3], input[1] * s1 + input[3] * c1, 1e-6);
}

// The property RoPE exists for: rope(q, m) · rope(k, n) depends only on m - n.
TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  test::Random random(67);
  for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    const RopeParams params{.n_head = 1, .head_dim = 128, .n_rot = 96, .mode = mode};
    const std::vector<float> q = random.floats(128, -1.0f, 1.0f);
    const std::vector<float> k = random.floats(128, -1.0f, 1.0f);
    auto rotated_dot = [&](int32_t m, int32_t n) {
      std::vector<float> qr = q;
      std::vector<float> kr = k;
      kernels::cpu::rope(qr.data(), 1, &m, params);
      kernels::cpu::rope(kr.data(), 1, &n, params);
      double dot = 0.0;
      for (int d = 0; d < 128; ++d) dot += static_cast<double>(qr[d]) * kr[d];
      return dot;
    };
    const double base = rotated_dot(7, 3);
    EXPECT_NEAR(rotated_dot(1007, 1003), base, 1e-5);
    EXPECT_NEAR(rotated_dot(60004, 60000), base, 1e-5);
    EXPECT_GT(std::fabs(rotated_dot(3, 7) - base), 1e-3);  // and it does depend on the sign of m - n
  }
}

// A token rotated inside a batch equals the same token rotated alone, bit for bit.
TEST(Rope, BatchInvariant) {
  test::Random random(71);
  const RopeParams params{.n_head = 3, .head_dim = 64, .n_rot = 48, .freq_base = 500000.0f, .mode = RopeMode::neox};
  const int64_t row = params.n_head * params.head_dim;
  const std::vector<int32_t> positions = {5, 6, 7, 100, 4096, 4097, 31};
  const std::vector<float> input = random.floats(7 * row, -2.0f, 2.0f);
  std::vector<float> batch = input;
  kernels::cpu::rope(batch.data(), 7, positions.data(), params);
  for (int64_t t = 0; t < 7; ++t) {
    std::vector<float> alone(input.begin() + t * row, input.begin() + (t + 1) * row);
    kernels::cpu::rope(alone.data(), 1, &positions[t], params);
    EXPECT_TRUE(test::same_bits(alone, std::vector<float>(batch.begin() + t * row, batch.begin() + (t + 1) * row)))
        << t;
  }
}

}  // namespace
}  // namespace rwd
