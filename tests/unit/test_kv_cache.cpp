// links: rewind_state
// KvCache allocates rows as positions are first written: nothing at construction, geometric growth per
// (layer, slot) up to n_ctx; every row keeps, bit for bit through the moves growth makes, the values its type
// stores (the reference: tensor/quant's conversions of the random rows the test wrote); a saved prefix restores
// into another slot; types that do not fit a layer's heads are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "state/kv_cache.h"
#include "tensor/dtype.h"

namespace rwd::state {
namespace {

using tensor::DType;

std::vector<float> random_row(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& x : row) x = value(rng);
  return row;
}

// What a row of `type` holds for `row`, as floats.
std::vector<float> stored(DType type, const std::vector<float>& row) {
  const auto n = static_cast<int64_t>(row.size());
  std::vector<uint8_t> bytes(tensor::row_bytes(type, n));
  tensor::dtype_traits(type).from_float(row.data(), bytes.data(), n);
  std::vector<float> back(row.size());
  tensor::dtype_traits(type).to_float(bytes.data(), back.data(), n);
  return back;
}

std::vector<float> read_row(const ops::KvRows& rows, int64_t pos, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  tensor::dtype_traits(rows.type).to_float(static_cast<const uint8_t*>(rows.data) + pos * rows.row_bytes, out.data(), n);
  return out;
}

// Two attention layers of different widths and an MLA layer (K rows only: its values are read from them).
std::vector<KvLayerSpec> specs() { return {{2, 32, 32}, {1, 64, 32}, {1, 96, 0}}; }

TEST(KvCache, AllocatesRowsOnlyAsPositionsAreWritten) {
  KvCache kv(specs(), 3, 100000);
  EXPECT_EQ(kv.allocated_bytes(), 0u);
  EXPECT_EQ(kv.bytes_per_slot(), 100000u * (64 + 64 + 64 + 32 + 96) * sizeof(float));
  const std::vector<float> row(64, 1.0f);
  kv.write_k(0, 1, 0, row.data());
  EXPECT_EQ(kv.allocated_bytes(), 256u * 64 * sizeof(float));  // the first 256 rows of one layer's K, one slot
  kv.write_k(0, 1, 300, row.data());                           // doubles
  EXPECT_EQ(kv.allocated_bytes(), 512u * 64 * sizeof(float));
  kv.write_k(0, 1, 5000, row.data());  // straight to the position when doubling is not enough
  EXPECT_EQ(kv.allocated_bytes(), 5001u * 64 * sizeof(float));
  kv.write_k(0, 1, 99999, row.data());  // capped at n_ctx
  EXPECT_EQ(kv.allocated_bytes(), 100000u * 64 * sizeof(float));
}

TEST(KvCache, SmallerTypesTakeTheirShareOfTheBytes) {
  const KvCache f32(specs(), 1, 1000);
  const KvCache f16(specs(), 1, 1000, DType::f16, DType::f16);
  const KvCache q8_0(specs(), 1, 1000, DType::q8_0, DType::q8_0);
  EXPECT_EQ(f16.bytes_per_slot() * 2, f32.bytes_per_slot());
  EXPECT_EQ(q8_0.bytes_per_slot() * 32 * 4, f32.bytes_per_slot() * 34);
}

TEST(KvCache, TypesThatSplitAHeadAreRefusedByName) {
  const std::vector<KvLayerSpec> odd = {{2, 32, 32}, {2, 48, 48}};
  EXPECT_TRUE(KvCache::check_types(odd, DType::f16, DType::f32).is_ok());
  const Status refused = KvCache::check_types(odd, DType::f16, DType::q8_0);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("cache-type-v q8_0"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("layer 1 has heads of 48"), std::string::npos) << refused.message();
  EXPECT_FALSE(KvCache::check_types(odd, DType::q4_0, DType::f16).is_ok());
}

class KvCacheTypes : public ::testing::TestWithParam<DType> {};

TEST_P(KvCacheTypes, RowsHoldWhatTheirTypeStoresThroughGrowth) {
  std::mt19937 rng(7);
  constexpr int64_t kPositions = 1300;  // through growth to 256, 512, 1024, 2048 rows
  KvCache kv(specs(), 2, 4096, GetParam(), GetParam());
  std::vector<std::vector<std::vector<float>>> written(3);  // [layer][position] K rows of slot 1
  for (int64_t pos = 0; pos < kPositions; ++pos) {
    for (int il = 0; il < kv.n_layers(); ++il) {
      written[il].push_back(random_row(rng, kv.k_row_floats(il)));
      kv.write_k(il, 1, pos, written[il].back().data());
      if (kv.v_row_floats(il) > 0) {
        kv.write_v(il, 1, pos, std::vector<float>(kv.v_row_floats(il), 0.5f).data());
      }
    }
    // Slot 0 grows on its own schedule meanwhile.
    if (pos % 3 == 0) kv.write_k(0, 0, pos / 3, std::vector<float>(kv.k_row_floats(0), -1.0f).data());
  }
  for (int il = 0; il < kv.n_layers(); ++il) {
    for (int64_t pos = 0; pos < kPositions; ++pos) {
      const std::vector<float> expected = stored(GetParam(), written[il][pos]);
      const std::vector<float> found = read_row(kv.k_rows(il, 1), pos, kv.k_row_floats(il));
      ASSERT_EQ(std::memcmp(found.data(), expected.data(), found.size() * sizeof(float)), 0)
          << "layer " << il << " position " << pos;
    }
  }
}

TEST_P(KvCacheTypes, SavedPrefixRestoresIntoAnotherSlot) {
  std::mt19937 rng(11);
  KvCache kv(specs(), 2, 2048, GetParam(), GetParam());
  constexpr int64_t kSaved = 700;
  constexpr int64_t kRestored = 450;
  for (int64_t pos = 0; pos < kSaved; ++pos) {
    for (int il = 0; il < kv.n_layers(); ++il) {
      kv.write_k(il, 0, pos, random_row(rng, kv.k_row_floats(il)).data());
      if (kv.v_row_floats(il) > 0) {
        kv.write_v(il, 0, pos, random_row(rng, kv.v_row_floats(il)).data());
      }
    }
  }
  std::vector<uint8_t> block(kv.prefix_bytes(kSaved), 0xee);
  kv.save_prefix(0, kSaved, block.data());
  kv.restore_prefix(1, block.data(), kSaved, kRestored);
  for (int il = 0; il < kv.n_layers(); ++il) {
    const auto same = [&](const ops::KvRows& a, const ops::KvRows& b) {
      return std::memcmp(a.data, b.data, kRestored * a.row_bytes) == 0;
    };
    EXPECT_TRUE(same(kv.k_rows(il, 0), kv.k_rows(il, 1))) << "layer " << il;
    if (kv.v_row_floats(il) > 0) {
      EXPECT_TRUE(same(kv.v_rows(il, 0), kv.v_rows(il, 1))) << "layer " << il;
    }
  }
}

std::string type_name(const ::testing::TestParamInfo<DType>& param) {
  return std::string(tensor::dtype_name(param.param));
}

INSTANTIATE_TEST_SUITE_P(Types, KvCacheTypes, ::testing::Values(DType::f32, DType::f16, DType::q8_0), type_name);

}  // namespace
}  // namespace rwd::state
