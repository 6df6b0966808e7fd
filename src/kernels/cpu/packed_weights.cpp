// The packed layouts of packed_weights.h, written by plain code for every set; the kernels that read them are
// in packed_avx512vnni.cpp. "16 x 4 bytes" below is one zmm: 4 bytes of each of the 16 rows, row r at byte 4r.
//
// q4_K, a group: the super-blocks' bodies in order, then their factors.
//   body (2240 bytes): the 12 scale bytes of each row as three 16 x 4 runs (bytes 0-3, 4-7, 8-11); then for
//     chunk c (0..3) and quad q (0..7) one 16 x 4 run of qs bytes 32c + 4q .. 32c + 4q + 3, whose low nibbles are
//     values 64c + 4q + t (sub-block 2c) and high nibbles values 64c + 32 + 4q + t (sub-block 2c + 1).
//   factors (64 bytes): d of rows 0..15 (fp16), then dmin of rows 0..15.
// q6_K, a group: bodies, then factors, then padding to a multiple of 64 bytes.
//   body (3328 bytes): the 16 int8 scales of each row as four 16 x 4 runs (scales 4p .. 4p + 3); then for group
//     j (0..15, values 16j .. 16j + 15) three 16 x 4 runs, byte t of a row holding: the low nibbles of values
//     16j + t and 16j + 4 + t; those of 16j + 8 + t and 16j + 12 + t; the top two bits of the four values, in
//     that order from bit 0.
//   factors (32 bytes): d of rows 0..15 (fp16).
#include "kernels/cpu/packed_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/packed_layout.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu {
namespace {

namespace q = tensor::quant;

constexpr size_t kZmm = 64;
// Below this many bytes a weight packs on the calling thread.
constexpr size_t kParallelPackBytes = 4 << 20;

bool has_packed_kernel(KernelIsa isa, tensor::DType type) {
  return isa == KernelIsa::avx512vnni && (type == tensor::DType::q4_k || type == tensor::DType::q6_k);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof(v)); }

void pack_q4_k_group(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* group) {
  uint8_t* factors = group + n_blocks * packed::kQ4KBodyBytes;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* body = group + b * packed::kQ4KBodyBytes;
    uint16_t* d = reinterpret_cast<uint16_t*>(factors + b * packed::kQ4KFactorBytes);
    for (int r = 0; r < kPackedGroupRows; ++r) {
      const auto& block = reinterpret_cast<const q::BlockQ4K*>(rows + r * row_bytes)[b];
      for (int p = 0; p < 3; ++p) store_u32(body + p * kZmm + 4 * r, load_u32(block.scales + 4 * p));
      uint8_t* runs = body + packed::kQ4KScaleBytes + 4 * r;
      for (int run = 0; run < 32; ++run) store_u32(runs + run * kZmm, load_u32(block.qs + 4 * run));
      d[r] = block.d;
      d[kPackedGroupRows + r] = block.dmin;
    }
  }
}

void pack_q6_k_group(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* group) {
  uint8_t* factors = group + n_blocks * packed::kQ6KBodyBytes;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* body = group + b * packed::kQ6KBodyBytes;
    uint16_t* d = reinterpret_cast<uint16_t*>(factors + b * packed::kQ6KFactorBytes);
    for (int r = 0; r < kPackedGroupRows; ++r) {
      const auto& block = reinterpret_cast<const q::BlockQ6K*>(rows + r * row_bytes)[b];
      for (int p = 0; p < 4; ++p) store_u32(body + p * kZmm + 4 * r, load_u32(reinterpret_cast<const uint8_t*>(block.scales) + 4 * p));
      for (int j = 0; j < 16; ++j) {
        // Group j's 16 values (blocks.h): value 16j + s has the low nibble `quarter / 2` of ql[ql_base + s] and
        // bits 2 * quarter of qh[qh_base + s], where quarter is the 32-value run of its 128-value half.
        const int half = j / 8, quarter = (j % 8) / 2;
        const uint8_t* ql = block.ql + 64 * half + 32 * (quarter % 2) + 16 * (j % 2);
        const uint8_t* qh = block.qh + 32 * half + 16 * (j % 2);
        uint8_t low[16], high[16];
        for (int s = 0; s < 16; ++s) {
          low[s] = static_cast<uint8_t>((ql[s] >> (4 * (quarter / 2))) & 15);
          high[s] = static_cast<uint8_t>((qh[s] >> (2 * quarter)) & 3);
        }
        uint8_t* runs = body + packed::kQ6KScaleBytes + j * packed::kQ6KGroupRunBytes + 4 * r;
        for (int t = 0; t < 4; ++t) {
          runs[t] = static_cast<uint8_t>(low[t] | (low[4 + t] << 4));
          runs[kZmm + t] = static_cast<uint8_t>(low[8 + t] | (low[12 + t] << 4));
          runs[2 * kZmm + t] =
              static_cast<uint8_t>(high[t] | (high[4 + t] << 2) | (high[8 + t] << 4) | (high[12 + t] << 6));
        }
      }
      d[r] = block.d;
    }
  }
  const size_t filled = static_cast<size_t>(n_blocks) * (packed::kQ6KBodyBytes + packed::kQ6KFactorBytes);
  std::memset(group + filled, 0, packed_group_bytes(tensor::DType::q6_k, n_blocks * q::kBlockK) - filled);
}

}  // namespace

size_t packed_group_bytes(tensor::DType weight_type, int64_t n) {
  const int64_t n_blocks = n / q::kBlockK;
  switch (weight_type) {
    case tensor::DType::q4_k: return static_cast<size_t>(n_blocks) * (packed::kQ4KBodyBytes + packed::kQ4KFactorBytes);
    case tensor::DType::q6_k: {
      const size_t bytes = static_cast<size_t>(n_blocks) * (packed::kQ6KBodyBytes + packed::kQ6KFactorBytes);
      return (bytes + kZmm - 1) / kZmm * kZmm;
    }
    default: return 0;
  }
}

PackedBuffer allocate_packed(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const bool huge = bytes >= kHugePage;
  const size_t allocated = huge ? (bytes + kHugePage - 1) / kHugePage * kHugePage : (bytes + kZmm - 1) / kZmm * kZmm;
  PackedBuffer buffer(std::aligned_alloc(huge ? kHugePage : kZmm, allocated));
  // Only a hint: without huge pages the weights are as correct, and slower to stream.
  if (buffer != nullptr && huge) ::madvise(buffer.get(), allocated, MADV_HUGEPAGE);
  return buffer;
}

size_t packed_weight_bytes(KernelIsa isa, const tensor::Tensor& weight) {
  const bool two_dimensional = weight.ne[2] == 1 && weight.ne[3] == 1;
  if (!has_packed_kernel(isa, weight.dtype) || !two_dimensional || weight.data == nullptr || weight.n_rows() == 0 ||
      weight.n_rows() % kPackedGroupRows != 0 || weight.n_cols() % q::kBlockK != 0) {
    return 0;
  }
  return packed_group_bytes(weight.dtype, weight.n_cols()) * static_cast<size_t>(weight.n_rows() / kPackedGroupRows);
}

void pack_weight(KernelIsa isa, const tensor::Tensor& weight, void* out) {
  REWIND_CHECK(packed_weight_bytes(isa, weight) > 0, "pack_weight: no packed layout for {} weight {} on {}",
               tensor::dtype_name(weight.dtype), weight.name, isa_name(isa));
  REWIND_CHECK(reinterpret_cast<uintptr_t>(out) % kZmm == 0, "pack_weight: output for {} is not 64-byte aligned",
               weight.name);
  const int64_t n_blocks = weight.n_cols() / q::kBlockK;
  const size_t group_bytes = packed_group_bytes(weight.dtype, weight.n_cols());
  const int64_t n_groups = weight.n_rows() / kPackedGroupRows;
  auto pack_groups = [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const uint8_t* rows = weight.row(g * kPackedGroupRows);
      uint8_t* group = static_cast<uint8_t*>(out) + static_cast<size_t>(g) * group_bytes;
      if (weight.dtype == tensor::DType::q4_k) {
        pack_q4_k_group(rows, weight.bytes_per_row(), n_blocks, group);
      } else {
        pack_q6_k_group(rows, weight.bytes_per_row(), n_blocks, group);
      }
    }
  };
  // At load, before any pool exists: a model's worth of packing (and of page faults on both sides) takes
  // seconds on one core.
  const int64_t n_threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, n_groups);
  if (static_cast<size_t>(n_groups) * group_bytes < kParallelPackBytes || n_threads == 1) {
    pack_groups(0, n_groups);
    return;
  }
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < n_threads; ++t) {
    threads.emplace_back(pack_groups, n_groups * t / n_threads, n_groups * (t + 1) / n_threads);
  }
  pack_groups(0, n_groups / n_threads);
  for (std::thread& thread : threads) thread.join();
}

}  // namespace rwd::kernels::cpu
