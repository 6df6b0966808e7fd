// Memory is planned once (DESIGN §3): once a forward of each shape has run, a decode step of every slot, a
// verify round (a transaction's forward and its commit, a rejection rolled back) and a token tree's round (its
// batch, forward and kept path) allocate nothing on the heap, batches included, for every architecture, with
// f32 and q8_0 weights and f16 KV rows, under replay and (for the models with recurrent state) snapshot
// rollback. Counted through a replaced global operator new, which every std container and make_unique of the
// engine goes through. Not built into the sanitizer run (its allocator interposes operator new itself).
// links: rewind_runtime rewind_synthetic
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "base/thread_pool.h"
#include "common/registry.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "state/model_state.h"
#include "synthetic/synthetic_model.h"

namespace {

std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};

void* allocate(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  const auto alignment = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void* operator new(std::size_t size, std::align_val_t align) { return allocate_aligned(size, align); }
void* operator new[](std::size_t size, std::align_val_t align) { return allocate_aligned(size, align); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace rwd {
namespace {

constexpr int kSlots = 2;
constexpr int kDraft = 3;

struct Variant {
  std::string arch;
  std::string dtype;
  state::RollbackPolicy policy = state::RollbackPolicy::replay;
};

// Heap allocations made while `body` runs on this thread or the pool's.
template <typename Body>
int64_t allocations_during(Body&& body) {
  allocations.store(0);
  counting.store(true);
  body();
  counting.store(false);
  return allocations.load();
}

class WarmAllocations : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("rewind_warm_" + test::test_name_part(GetParam().arch) + GetParam().dtype + std::to_string(::getpid()) +
              ".gguf"))
                .string();
    ASSERT_TRUE(make_synthetic_model({GetParam().arch, "tiny", GetParam().dtype, 5, path_}).is_ok());
    auto model = model::Model::load(path_);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    model_ = std::move(model).value();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  std::string path_;
  std::unique_ptr<model::Model> model_;
};

TEST_P(WarmAllocations, DecodeAndVerifyStepsAllocateNothing) {
  ThreadPool pool(2);
  model::ForwardContext ctx(*model_, pool, 64);
  state::StateOptions options;
  options.n_slots = kSlots;
  options.n_ctx = 96;
  options.max_txn_tokens = 1 + kDraft;
  options.policy = GetParam().policy;
  options.cache_type_k = tensor::DType::f16;
  options.cache_type_v = tensor::DType::f16;
  state::ModelState state(model_->kv_specs(), model_->recurrent_specs(), options);
  model::Batch batch;
  std::vector<float> logits;
  std::vector<int32_t> position(kSlots, 0);
  std::vector<int32_t> tree_path;  // as the engine keeps its path buffer
  const auto token = [](int slot, int32_t pos) { return 40 + (pos * 13 + slot * 29) % 80; };

  batch.clear();
  for (int slot = 0; slot < kSlots; ++slot) {
    for (int i = 0; i < 9 + 4 * slot; ++i) batch.add(token(slot, position[slot]), position[slot]++, slot, true);
  }
  ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
  const auto decode = [&] {
    batch.clear();
    for (int slot = 0; slot < kSlots; ++slot) batch.add(token(slot, position[slot]), position[slot]++, slot, true);
    return ctx.forward(batch, state, logits);
  };
  // Slot 0 verifies its newest token and a draft beside slot 1's decode token; `keep` of the draft kept.
  const auto verify = [&](int keep) -> Status {
    REWIND_ASSIGN_OR_RETURN(state::Transaction txn, state.begin(0, position[0]));
    batch.clear();
    for (int i = 0; i <= kDraft; ++i) batch.add(token(0, position[0] + i), position[0] + i, 0, true);
    batch.add(token(1, position[1]), position[1], 1, true);
    REWIND_RETURN_IF_ERROR(ctx.forward(batch, state, logits));
    REWIND_RETURN_IF_ERROR(txn.commit(1 + keep).status());
    position[0] += 1 + keep;
    ++position[1];
    return Status::ok();
  };
  // Slot 0 verifies a tree: its newest token, two candidates after it, a token after the second; the second
  // branch is kept.
  const auto verify_tree = [&]() -> Status {
    const int32_t p = position[0];
    REWIND_ASSIGN_OR_RETURN(state::Transaction txn, state.begin(0, p));
    batch.clear();
    batch.add(token(1, position[1]), position[1], 1, true);
    batch.add(token(0, p), p, 0, true);
    batch.add_node(token(0, p + 1), p + 1, 0, true, 1);
    batch.add_node(token(0, p + 1) + 1, p + 1, 0, true, 1);
    batch.add_node(token(0, p + 2), p + 2, 0, true, 3);
    REWIND_RETURN_IF_ERROR(ctx.forward(batch, state, logits));
    tree_path.assign({0, 2, 3});
    REWIND_RETURN_IF_ERROR(txn.commit_path(tree_path).status());
    position[0] += 3;
    ++position[1];
    return Status::ok();
  };
  // Warm: every shape once (and twice, so that growth of any kind has happened).
  for (int rep = 0; rep < 2; ++rep) {
    ASSERT_TRUE(decode().is_ok());
    ASSERT_TRUE(verify(kDraft).is_ok());
    ASSERT_TRUE(verify(0).is_ok());
    const Status tree = verify_tree();
    ASSERT_TRUE(tree.is_ok()) << tree.message();
  }
  Status status = Status::ok();
  EXPECT_EQ(allocations_during([&] { status = decode(); }), 0) << "a warm decode step allocated";
  ASSERT_TRUE(status.is_ok()) << status.message();
  EXPECT_EQ(allocations_during([&] { status = verify(1); }), 0) << "a warm verify round allocated";
  ASSERT_TRUE(status.is_ok()) << status.message();
  EXPECT_EQ(allocations_during([&] { status = verify(0); }), 0) << "a warm rejected round allocated";
  ASSERT_TRUE(status.is_ok()) << status.message();
  EXPECT_EQ(allocations_during([&] { status = verify_tree(); }), 0) << "a warm tree round allocated";
  ASSERT_TRUE(status.is_ok()) << status.message();
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const std::string& arch : test::all_archs()) {
    for (const char* dtype : {"f32", "q8_0"}) out.push_back({arch, dtype});
  }
  // llama.cpp's scheme, a state copy per verified token, on the models with recurrent state.
  for (const std::string& arch : test::recurrent_archs()) out.push_back({arch, "f32", state::RollbackPolicy::snapshot});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, WarmAllocations, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& param_info) {
                           return test::test_name_part(param_info.param.arch + "_" + param_info.param.dtype + "_" +
                                                       std::string(state::rollback_policy_name(param_info.param.policy)));
                         });

}  // namespace
}  // namespace rwd
