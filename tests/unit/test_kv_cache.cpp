// links: rewind_state
// KvCache allocates rows as positions are first written: nothing at construction, geometric growth per
// (layer, slot) up to n_ctx, and every row written stays readable, bit for bit, through the moves growth makes;
// a saved prefix restores into another slot. The reference is the random rows the test wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "state/kv_cache.h"

namespace rwd::state {
namespace {

std::vector<float> random_row(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& x : row) x = value(rng);
  return row;
}

// Two attention layers of different widths and an MLA layer (K rows only: its values are read from them).
std::vector<KvLayerSpec> specs() { return {{2, 8, 8}, {1, 16, 4}, {1, 12, 0}}; }

TEST(KvCache, AllocatesRowsOnlyAsPositionsAreWritten) {
  KvCache kv(specs(), 3, 100000);
  EXPECT_EQ(kv.allocated_bytes(), 0u);
  EXPECT_EQ(kv.bytes_per_slot(), 100000u * (16 + 16 + 16 + 4 + 12) * sizeof(float));
  kv.k_row(0, 1, 0)[0] = 1.0f;
  EXPECT_EQ(kv.allocated_bytes(), 256u * 16 * sizeof(float));  // the first 256 rows of one layer's K, one slot
  kv.k_row(0, 1, 300)[0] = 1.0f;                               // doubles
  EXPECT_EQ(kv.allocated_bytes(), 512u * 16 * sizeof(float));
  kv.k_row(0, 1, 5000)[0] = 1.0f;  // straight to the position when doubling is not enough
  EXPECT_EQ(kv.allocated_bytes(), 5001u * 16 * sizeof(float));
  kv.k_row(0, 1, 99999)[0] = 1.0f;  // capped at n_ctx
  EXPECT_EQ(kv.allocated_bytes(), 100000u * 16 * sizeof(float));
}

TEST(KvCache, SmallContextAllocatesItWhole) {
  KvCache kv(specs(), 1, 100);
  kv.v_row(1, 0, 3)[0] = 1.0f;
  EXPECT_EQ(kv.allocated_bytes(), 100u * 4 * sizeof(float));
}

TEST(KvCache, RowsSurviveGrowthBitForBit) {
  std::mt19937 rng(7);
  constexpr int64_t kPositions = 1300;  // through growth to 256, 512, 1024, 2048 rows
  KvCache kv(specs(), 2, 4096);
  std::vector<std::vector<std::vector<float>>> written(3);  // [layer][position] K rows of slot 1
  for (int64_t pos = 0; pos < kPositions; ++pos) {
    for (int il = 0; il < kv.n_layers(); ++il) {
      written[il].push_back(random_row(rng, kv.k_row_floats(il)));
      std::copy(written[il].back().begin(), written[il].back().end(), kv.k_row(il, 1, pos));
      if (kv.v_row_floats(il) > 0) std::fill_n(kv.v_row(il, 1, pos), kv.v_row_floats(il), static_cast<float>(pos));
    }
    // Slot 0 grows on its own schedule meanwhile.
    if (pos % 3 == 0) std::fill_n(kv.k_row(0, 0, pos / 3), kv.k_row_floats(0), -1.0f);
  }
  for (int il = 0; il < kv.n_layers(); ++il) {
    const float* rows = kv.k_data(il, 1);
    for (int64_t pos = 0; pos < kPositions; ++pos) {
      ASSERT_TRUE(std::equal(written[il][pos].begin(), written[il][pos].end(), rows + pos * kv.k_row_floats(il)))
          << "layer " << il << " position " << pos;
      if (kv.v_row_floats(il) > 0) {
        ASSERT_EQ(kv.v_data(il, 1)[pos * kv.v_row_floats(il)], static_cast<float>(pos));
      }
    }
  }
}

TEST(KvCache, SavedPrefixRestoresIntoAnotherSlot) {
  std::mt19937 rng(11);
  KvCache kv(specs(), 2, 2048);
  constexpr int64_t kSaved = 700;
  constexpr int64_t kRestored = 450;
  for (int64_t pos = 0; pos < kSaved; ++pos) {
    for (int il = 0; il < kv.n_layers(); ++il) {
      const std::vector<float> k = random_row(rng, kv.k_row_floats(il));
      std::copy(k.begin(), k.end(), kv.k_row(il, 0, pos));
      if (kv.v_row_floats(il) > 0) {
        const std::vector<float> v = random_row(rng, kv.v_row_floats(il));
        std::copy(v.begin(), v.end(), kv.v_row(il, 0, pos));
      }
    }
  }
  std::vector<float> block(kv.prefix_floats(kSaved), std::nanf(""));
  kv.save_prefix(0, kSaved, block.data());
  EXPECT_TRUE(std::none_of(block.begin(), block.end(), [](float x) { return std::isnan(x); }));
  kv.restore_prefix(1, block.data(), kSaved, kRestored);
  for (int il = 0; il < kv.n_layers(); ++il) {
    EXPECT_TRUE(std::equal(kv.k_data(il, 0), kv.k_data(il, 0) + kRestored * kv.k_row_floats(il), kv.k_data(il, 1)))
        << "layer " << il;
    EXPECT_TRUE(std::equal(kv.v_data(il, 0), kv.v_data(il, 0) + kRestored * kv.v_row_floats(il), kv.v_data(il, 1)))
        << "layer " << il;
  }
}

}  // namespace
}  // namespace rwd::state
