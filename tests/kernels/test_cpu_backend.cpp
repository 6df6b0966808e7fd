// The CPU backend's ops (compute/backend.h) on random inputs, through strided views: the small ops against the
// float expression each one's contract writes (exact ops bit for bit) or a float64 reference (transcendental
// ones), the norms on column views against kernels/ref, the forwarded matmul against a float64 dot product.
// Strided views are what the blocks hand the backend instead of their old host loops, so every op runs here
// with a stride wider than its width.
// links: rewind_compute rewind_kernels_cpu
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "compute/cpu_backend.h"
#include "float_kernel_test_util.h"
#include "kernels/ref/l2_norm.h"
#include "kernels/ref/rms_norm.h"
#include "tensor/tensor.h"

namespace rwd {
namespace {

using compute::ConstRows;
using compute::Rows;
using test::kFloatEps;

constexpr int64_t kRows = 5;
constexpr int64_t kWidth = 37;
constexpr int64_t kStride = 3 * kWidth + 4;  // the middle columns of wider rows

class CpuBackendOps : public ::testing::Test {
 protected:
  CpuBackendOps() : pool_(2), backend_(compute::make_cpu_backend(&pool_)) {}

  // kRows x kStride random floats; the view is its columns [kWidth, 2 kWidth).
  struct Strided {
    std::vector<float> storage;
    Rows view;
  };
  Strided strided(float lo, float hi) {
    Strided s{random_.floats(kRows * kStride, lo, hi), {}};
    s.view = Rows{s.storage.data(), kRows, kStride}.columns(kWidth, kWidth);
    return s;
  }
  // Every value outside the view is as it was: an op writes its view only.
  static void expect_outside_untouched(const Strided& after, const std::vector<float>& before) {
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kStride; ++c) {
        if (c >= kWidth && c < 2 * kWidth) continue;
        ASSERT_EQ(after.storage[r * kStride + c], before[r * kStride + c]) << "row " << r << " column " << c;
      }
    }
  }

  test::Random random_{4049};
  ThreadPool pool_;
  std::unique_ptr<compute::Backend> backend_;
};

TEST_F(CpuBackendOps, ExactElementwiseOpsRoundAsTheirExpressions) {
  Strided a = strided(-3.0f, 3.0f);
  Strided b = strided(-3.0f, 3.0f);
  const std::vector<float> factors = random_.floats(kWidth, -2.0f, 2.0f);
  const std::vector<float> bias = random_.floats(kWidth, -1.0f, 1.0f);
  const std::vector<float> a0 = a.storage;
  const auto at = [](const Strided& s, int64_t r, int64_t c) { return s.view.row(r)[c]; };
  const auto old_a = [&](int64_t r, int64_t c) { return a0[r * kStride + kWidth + c]; };

  backend_->add(a.view, b.view);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_EQ(at(a, r, c), old_a(r, c) + at(b, r, c));
  }
  expect_outside_untouched(a, a0);

  a.storage = a0;
  backend_->mul(a.view, b.view, a.view);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_EQ(at(a, r, c), old_a(r, c) * at(b, r, c));
  }

  a.storage = a0;
  backend_->add_bias(a.view, bias.data());
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_EQ(at(a, r, c), old_a(r, c) + bias[c]);
  }

  a.storage = a0;
  backend_->scale(a.view, 0.37f);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_EQ(at(a, r, c), old_a(r, c) * 0.37f);
  }

  // Groups of 4 columns share a factor (Mamba2's D per head, KDA's A per head of channels).
  a.storage = a0;
  backend_->mul_groups(a.view, factors.data(), 4, a.view);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_EQ(at(a, r, c), old_a(r, c) * factors[c / 4]);
  }

  a.storage = a0;
  backend_->add_mul_groups(a.view, b.view, factors.data(), 4);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      const float product = at(b, r, c) * factors[c / 4];
      ASSERT_EQ(at(a, r, c), old_a(r, c) + product);
    }
  }

  a.storage = a0;
  backend_->relu_sqr(a.view);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      const float x = std::max(old_a(r, c), 0.0f);
      ASSERT_EQ(at(a, r, c), x * x);
    }
  }
  expect_outside_untouched(a, a0);

  a.storage = a0;
  std::vector<float> packed(kRows * kWidth, -7.0f);
  backend_->copy(a.view, Rows{packed.data(), kRows, kWidth});
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_EQ(packed[r * kWidth + c], old_a(r, c));
  }
}

// Sigmoid, softplus and tanh against float64: a float exp or log is within a few ulp, and each expression adds
// a rounding or two, so 8 ulp of the result bounds them (the values are moderate: no cancellation).
TEST_F(CpuBackendOps, TranscendentalOpsMatchFloat64) {
  Strided a = strided(-6.0f, 6.0f);
  Strided gate = strided(-6.0f, 6.0f);
  const std::vector<float> bias = random_.floats(kWidth, -1.0f, 1.0f);
  const std::vector<float> a0 = a.storage;
  const auto old_a = [&](int64_t r, int64_t c) { return static_cast<double>(a0[r * kStride + kWidth + c]); };
  const auto near = [](double got, double want) { return std::abs(got - want) <= 8 * kFloatEps * std::abs(want) + 1e-30; };

  backend_->sigmoid(a.view);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      ASSERT_PRED2(near, a.view.row(r)[c], 1.0 / (1.0 + std::exp(-old_a(r, c))));
    }
  }

  a.storage = a0;
  backend_->sigmoid_mul(a.view, gate.view);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      ASSERT_PRED2(near, a.view.row(r)[c], old_a(r, c) / (1.0 + std::exp(-double{gate.view.row(r)[c]})));
    }
  }

  // softplus(v) = v past 20 (as llama.cpp), log(1 + e^v) below. Rounding 1 + e^v to float errs by up to half
  // an ulp of 1 + e^v, which the log carries as an absolute error: the bound adds 2 kFloatEps.
  a.storage = a0;
  a.view.row(0)[0] = 25.0f;
  backend_->softplus_bias(a.view, bias.data(), a.view);
  EXPECT_EQ(a.view.row(0)[0], 25.0f + bias[0]);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = r == 0 ? 1 : 0; c < kWidth; ++c) {
      const double v = static_cast<double>(static_cast<float>(old_a(r, c) + bias[c]));
      const double want = std::log1p(std::exp(v));
      ASSERT_NEAR(a.view.row(r)[c], want, 8 * kFloatEps * want + 2 * kFloatEps);
    }
  }

  a.storage = a0;
  backend_->softcap(a.view, 2.5f);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_PRED2(near, a.view.row(r)[c], 2.5 * std::tanh(old_a(r, c) / 2.5));
  }
}

// Norms over column views run row by row: each row as the reference normalises it alone.
TEST_F(CpuBackendOps, NormsOnColumnViewsMatchTheReference) {
  const Strided x = strided(-2.0f, 2.0f);
  const std::vector<float> weight = random_.floats(kWidth, 0.5f, 1.5f);
  std::vector<float> out_storage(kRows * kStride, 0.0f);
  const Rows out = Rows{out_storage.data(), kRows, kStride}.columns(2 * kWidth, kWidth);
  for (const bool l2 : {false, true}) {
    if (l2) {
      backend_->l2_norm(x.view, out, 1e-6f);
    } else {
      backend_->rms_norm(x.view, weight.data(), out, 1e-6f);
    }
    for (int64_t r = 0; r < kRows; ++r) {
      std::vector<float> want(kWidth);
      if (l2) {
        kernels::ref::l2_norm(x.view.row(r), want.data(), 1, kWidth, 1e-6f);
      } else {
        kernels::ref::rms_norm(x.view.row(r), weight.data(), want.data(), 1, kWidth, 1e-6f);
      }
      for (int64_t c = 0; c < kWidth; ++c) {
        ASSERT_NEAR(out.row(r)[c], want[c], 4 * kFloatEps * std::abs(want[c]) + 1e-7) << (l2 ? "l2" : "rms") << r;
      }
    }
  }
}

TEST_F(CpuBackendOps, EmbedGatherAndMatmul) {
  constexpr int64_t kVocab = 11;
  std::vector<float> table = random_.floats(kVocab * kWidth, -1.0f, 1.0f);
  tensor::Tensor embeddings;
  embeddings.name = "token_embd.weight";
  embeddings.dtype = tensor::DType::f32;
  embeddings.n_dims = 2;
  embeddings.ne = {kWidth, kVocab, 1, 1};
  embeddings.data = table.data();
  const std::vector<int32_t> tokens = {3, 0, 10, 3};
  std::vector<float> rows(tokens.size() * kWidth);
  const Rows embedded{rows.data(), static_cast<int64_t>(tokens.size()), kWidth};
  backend_->embed(embeddings, tokens, 0.5f, embedded);
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t c = 0; c < kWidth; ++c) ASSERT_EQ(rows[t * kWidth + c], table[tokens[t] * kWidth + c] * 0.5f);
  }

  const std::vector<int64_t> picked = {2, 0};
  std::vector<float> gathered(picked.size() * kWidth);
  backend_->gather_rows(embedded, picked, {gathered.data(), 2, kWidth});
  for (int64_t c = 0; c < kWidth; ++c) {
    ASSERT_EQ(gathered[c], rows[2 * kWidth + c]);
    ASSERT_EQ(gathered[kWidth + c], rows[c]);
  }

  // The embedding table as an f32 matrix [kVocab, kWidth]: logits of the embedded rows.
  std::vector<float> logits(tokens.size() * kVocab);
  backend_->matmul(embeddings, embedded, {logits.data(), static_cast<int64_t>(tokens.size()), kVocab});
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t v = 0; v < kVocab; ++v) {
      double want = 0.0;
      double magnitude = 0.0;
      for (int64_t c = 0; c < kWidth; ++c) {
        want += double{table[v * kWidth + c]} * rows[t * kWidth + c];
        magnitude += std::abs(double{table[v * kWidth + c]} * rows[t * kWidth + c]);
      }
      ASSERT_NEAR(logits[t * kVocab + v], want, kWidth * kFloatEps * magnitude) << t << " " << v;
    }
  }
}

TEST_F(CpuBackendOps, ViewsTheFusedKernelsCannotTakeAreRefused) {
  const Strided x = strided(-1.0f, 1.0f);
  std::vector<float> y(kRows * kWidth);
  EXPECT_DEATH(backend_->l2_norm(x.view, Rows{y.data(), kRows - 1, kWidth}, 1e-6f), "view against");
  std::vector<float> weight_rows(kWidth * 4, 1.0f);
  tensor::Tensor weight;
  weight.name = "w";
  weight.dtype = tensor::DType::f32;
  weight.n_dims = 2;
  weight.ne = {kWidth, 4, 1, 1};
  weight.data = weight_rows.data();
  EXPECT_DEATH(backend_->matmul(weight, x.view, Rows{y.data(), kRows, 4}), "contiguous");
}

}  // namespace
}  // namespace rwd
