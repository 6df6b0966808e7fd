// The tee backend (compute/tee_backend.h) over whole forwards of every architecture: the CPU backend's AVX2 kernels
// against its scalar ones, op by op, through a prompt of two slots, decode steps and a verify round that keeps
// part of its draft. The two kernel sets differ only in rounding (summation orders, the vector exp), so every op
// must agree within the tolerance; at tolerance 0 the tee must name the first op where they differ at all; and a
// forward through the tee gives the logits of the primary alone, bit for bit.
// links: rewind_runtime rewind_synthetic
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <vector>

#include "base/thread_pool.h"
#include "common/registry.h"
#include "compute/cpu_backend.h"
#include "compute/tee_backend.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "state/model_state.h"
#include "synthetic/synthetic_model.h"

namespace rwd {
namespace {

constexpr int kSlots = 2;
constexpr int kDraft = 3;
// Of an output's largest |value|: the two sets' sums differ by a few float roundings.
constexpr double kTolerance = 1e-3;

struct Variant {
  std::string arch;
  std::string dtype;
};

// The logits of every forward of the sequence, concatenated.
std::vector<float> run_sequence(const model::Model& model, model::ForwardContext& ctx) {
  state::StateOptions options;
  options.n_slots = kSlots;
  options.n_ctx = 64;
  options.max_txn_tokens = 1 + kDraft;
  state::ModelState state(model.kv_specs(), model.recurrent_specs(), options);
  const auto token = [](int slot, int32_t pos) { return 40 + (pos * 13 + slot * 29) % 80; };
  std::vector<int32_t> position(kSlots, 0);
  std::vector<float> all;
  std::vector<float> logits;
  model::Batch batch;
  const auto forward = [&] {
    const Status status = ctx.forward(batch, state, logits);
    EXPECT_TRUE(status.is_ok()) << status.message();
    all.insert(all.end(), logits.begin(), logits.end());
  };
  for (int slot = 0; slot < kSlots; ++slot) {
    for (int i = 0; i < 7 + 3 * slot; ++i) batch.add(token(slot, position[slot]), position[slot]++, slot, true);
  }
  forward();
  for (int step = 0; step < 2; ++step) {
    batch.clear();
    for (int slot = 0; slot < kSlots; ++slot) batch.add(token(slot, position[slot]), position[slot]++, slot, true);
    forward();
  }
  // Slot 0 verifies a draft of kDraft beside slot 1's decode token and keeps one drafted token.
  auto txn = state.begin(0, position[0]);
  EXPECT_TRUE(txn.is_ok()) << txn.status().message();
  if (!txn.is_ok()) return all;
  batch.clear();
  for (int i = 0; i <= kDraft; ++i) batch.add(token(0, position[0] + i), position[0] + i, 0, true);
  batch.add(token(1, position[1]), position[1], 1, true);
  forward();
  EXPECT_TRUE(txn->commit(2).is_ok());
  position[0] += 2;
  ++position[1];
  batch.clear();
  for (int slot = 0; slot < kSlots; ++slot) batch.add(token(slot, position[slot]), position[slot]++, slot, true);
  forward();
  return all;
}

class TeeBackendForwards : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (!compute::cpu_supports(compute::CpuKernels::avx2)) GTEST_SKIP() << "this CPU has no AVX2 kernels to compare";
    path_ = (std::filesystem::temp_directory_path() /
             ("rewind_tee_" + test::test_name_part(GetParam().arch) + GetParam().dtype + std::to_string(::getpid()) +
              ".gguf"))
                .string();
    ASSERT_TRUE(make_synthetic_model({GetParam().arch, "tiny", GetParam().dtype, 7, path_}).is_ok());
    auto model = model::Model::load(path_);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    model_ = std::move(model).value();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  // A context whose backend is a tee of the AVX2 kernels (primary) and the scalar ones; *tee points to it.
  std::unique_ptr<model::ForwardContext> tee_context(double tolerance, const compute::TeeBackend** tee) {
    auto backend = std::make_unique<compute::TeeBackend>(compute::make_cpu_backend(&pool_, compute::CpuKernels::avx2),
                                                         compute::make_cpu_backend(&pool_, compute::CpuKernels::scalar),
                                                         tolerance);
    *tee = backend.get();
    return std::make_unique<model::ForwardContext>(*model_, std::move(backend), 32);
  }

  ThreadPool pool_{2};
  std::string path_;
  std::unique_ptr<model::Model> model_;
};

TEST_P(TeeBackendForwards, AvxAndScalarKernelsAgreeOpByOp) {
  const compute::TeeBackend* tee = nullptr;
  auto ctx = tee_context(kTolerance, &tee);
  run_sequence(*model_, *ctx);
  const compute::TeeReport& report = tee->report();
  EXPECT_GT(report.ops, 20);
  EXPECT_EQ(report.mismatches, 0) << report.first;
  EXPECT_LE(report.worst, kTolerance) << "worst in " << report.worst_op;
  RecordProperty("worst_difference", fmt::format("{:.3g} in {}", report.worst, report.worst_op));
}

TEST_P(TeeBackendForwards, ExactComparisonNamesTheFirstOpThatDiffers) {
  const compute::TeeBackend* tee = nullptr;
  auto ctx = tee_context(0.0, &tee);
  run_sequence(*model_, *ctx);
  const compute::TeeReport& report = tee->report();
  ASSERT_GT(report.mismatches, 0) << "the scalar and AVX2 kernels gave the same bits everywhere";
  EXPECT_FALSE(report.first_op.empty());
  EXPECT_NE(report.first.find("op '" + report.first_op + "'"), std::string::npos) << report.first;
  EXPECT_NE(report.first.find(" against "), std::string::npos) << report.first;
}

TEST_P(TeeBackendForwards, ForwardsThroughTheTeeKeepThePrimarysBits) {
  const compute::TeeBackend* tee = nullptr;
  auto teed = tee_context(kTolerance, &tee);
  const std::vector<float> through_tee = run_sequence(*model_, *teed);
  model::ForwardContext plain(*model_, compute::make_cpu_backend(&pool_, compute::CpuKernels::avx2), 32);
  const std::vector<float> alone = run_sequence(*model_, plain);
  ASSERT_EQ(through_tee.size(), alone.size());
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(through_tee[i], alone[i]) << "logit " << i;
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const std::string& arch : test::all_archs()) {
    for (const char* dtype : {"f32", "q8_0"}) out.push_back({arch, dtype});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, TeeBackendForwards, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& param) {
                           return test::test_name_part(param.param.arch) + "_" + param.param.dtype;
                         });

}  // namespace
}  // namespace rwd
