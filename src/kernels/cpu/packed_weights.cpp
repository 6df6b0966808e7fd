// The packed layouts of packed_weights.h, written by plain code for every set; the kernels that read them are
// in packed_avx512vnni.cpp. "16 x 4 bytes" below is one zmm: 4 bytes of each of the 16 rows, row r at byte 4r.
//
// q4_K, a group: per super-block, its body, then its factors.
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
// q8_0, q4_0, q5_0, a group: chunks of 8 blocks, each the 8 blocks' factors (d of rows 0..15, fp16, 32 bytes a
// block; room for 8 even in a last, shorter chunk) then their bodies; padding to a multiple of 64 bytes. Values
// are stored unsigned (value + 128, + 8, + 16); run v of a body holds values 4v .. 4v + 3 of each row, so the
// kernel broadcasts the activation bytes 4v .. 4v + 3 against it.
//   q8_0 body: 8 runs of 16 x 4 bytes, value + 128.
//   q4_0 body: 4 runs of the file's qs bytes 4q .. 4q + 3: low nibbles are values 4q + t, high nibbles 16 + 4q + t.
//   q5_0 body: q4_0's 4 runs, then one run whose byte t has, in bit v, the fifth bit of value 4v + t.
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
  return isa == KernelIsa::avx512vnni && (type == tensor::DType::q4_k || type == tensor::DType::q6_k ||
                                          type == tensor::DType::q8_0 || type == tensor::DType::q4_0 ||
                                          type == tensor::DType::q5_0);
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof(v)); }

void pack_q4_k_group(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* group) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* body = group + b * packed::kQ4KBlockBytes;
    uint16_t* d = reinterpret_cast<uint16_t*>(body + packed::kQ4KBodyBytes);
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
      const auto* scales = reinterpret_cast<const uint8_t*>(block.scales);
      for (int p = 0; p < 4; ++p) store_u32(body + p * kZmm + 4 * r, load_u32(scales + 4 * p));
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
}

// Blocks of 32: each block's d and its body, written by write_body(block, where row r's bytes start).
template <typename Block, size_t kBodyBytes, typename WriteBody>
void pack_block32_group(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* group, WriteBody write_body) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint16_t* d = reinterpret_cast<uint16_t*>(group + packed::block32_factor_offset(b, kBodyBytes));
    for (int r = 0; r < kPackedGroupRows; ++r) {
      const Block& block = reinterpret_cast<const Block*>(rows + r * row_bytes)[b];
      write_body(block, group + packed::block32_body_offset(b, kBodyBytes) + 4 * r);
      d[r] = block.d;
    }
  }
}

void pack_q8_0_group(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* group) {
  pack_block32_group<q::BlockQ8_0, packed::kQ8_0BodyBytes>(
      rows, row_bytes, n_blocks, group, [](const q::BlockQ8_0& block, uint8_t* row_in_body) {
        for (int v = 0; v < 32; ++v) {
          row_in_body[(v / 4) * kZmm + v % 4] = static_cast<uint8_t>(static_cast<int>(block.qs[v]) + 128);
        }
      });
}

void pack_q4_0_group(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* group) {
  pack_block32_group<q::BlockQ4_0, packed::kQ4_0BodyBytes>(
      rows, row_bytes, n_blocks, group, [](const q::BlockQ4_0& block, uint8_t* row_in_body) {
        for (int run = 0; run < 4; ++run) store_u32(row_in_body + run * kZmm, load_u32(block.qs + 4 * run));
      });
}

void pack_q5_0_group(const uint8_t* rows, size_t row_bytes, int64_t n_blocks, uint8_t* group) {
  pack_block32_group<q::BlockQ5_0, packed::kQ5_0BodyBytes>(
      rows, row_bytes, n_blocks, group, [](const q::BlockQ5_0& block, uint8_t* row_in_body) {
        for (int run = 0; run < 4; ++run) store_u32(row_in_body + run * kZmm, load_u32(block.qs + 4 * run));
        const uint32_t high_bits = load_u32(block.qh);  // bit j: the fifth bit of value j
        for (int t = 0; t < 4; ++t) {
          uint8_t bits = 0;
          for (int v = 0; v < 8; ++v) bits = static_cast<uint8_t>(bits | (((high_bits >> (4 * v + t)) & 1) << v));
          row_in_body[4 * kZmm + t] = bits;
        }
      });
}

size_t round_up_to_zmm(size_t bytes) { return (bytes + kZmm - 1) / kZmm * kZmm; }

}  // namespace

bool packed_needs_block_terms(tensor::DType weight_type) {
  return weight_type == tensor::DType::q8_0 || weight_type == tensor::DType::q4_0 ||
         weight_type == tensor::DType::q5_0;
}

size_t packed_group_bytes(tensor::DType weight_type, int64_t n) {
  const int64_t n_blocks = n / q::kBlockK;
  const auto block32_group = [n](size_t body_bytes) {
    const int64_t n_blocks32 = n / q::kBlock32;
    const int64_t last = n_blocks32 % packed::kBlock32Chunk;
    const size_t last_chunk = last > 0 ? packed::kBlock32ChunkFactorBytes + static_cast<size_t>(last) * body_bytes : 0;
    return round_up_to_zmm(packed::block32_chunk_offset(n_blocks32, body_bytes) + last_chunk);
  };
  switch (weight_type) {
    case tensor::DType::q8_0: return block32_group(packed::kQ8_0BodyBytes);
    case tensor::DType::q4_0: return block32_group(packed::kQ4_0BodyBytes);
    case tensor::DType::q5_0: return block32_group(packed::kQ5_0BodyBytes);
    case tensor::DType::q4_k: return static_cast<size_t>(n_blocks) * packed::kQ4KBlockBytes;
    case tensor::DType::q6_k: {
      return round_up_to_zmm(static_cast<size_t>(n_blocks) * (packed::kQ6KBodyBytes + packed::kQ6KFactorBytes));
    }
    default: return 0;
  }
}

PackedBuffer allocate_packed(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const bool huge = bytes >= kHugePage;
  const size_t allocated = huge ? (bytes + kHugePage - 1) / kHugePage * kHugePage : round_up_to_zmm(bytes);
  PackedBuffer buffer(std::aligned_alloc(huge ? kHugePage : kZmm, allocated));
  // Only a hint: without huge pages the weights are as correct, and slower to stream.
  if (buffer != nullptr && huge) ::madvise(buffer.get(), allocated, MADV_HUGEPAGE);
  return buffer;
}

size_t packed_weight_bytes(KernelIsa isa, const tensor::Tensor& weight) {
  const bool two_dimensional = weight.ne[2] == 1 && weight.ne[3] == 1;
  if (!has_packed_kernel(isa, weight.dtype) || !two_dimensional || weight.data == nullptr || weight.n_rows() == 0 ||
      weight.n_rows() % kPackedGroupRows != 0 || weight.n_cols() % tensor::dtype_traits(weight.dtype).block_size != 0) {
    return 0;
  }
  return packed_group_bytes(weight.dtype, weight.n_cols()) * static_cast<size_t>(weight.n_rows() / kPackedGroupRows);
}

void pack_weight(KernelIsa isa, const tensor::Tensor& weight, void* out) {
  REWIND_CHECK(packed_weight_bytes(isa, weight) > 0, "pack_weight: no packed layout for {} weight {} on {}",
               tensor::dtype_name(weight.dtype), weight.name, isa_name(isa));
  REWIND_CHECK(reinterpret_cast<uintptr_t>(out) % kZmm == 0, "pack_weight: output for {} is not 64-byte aligned",
               weight.name);
  const int64_t n_blocks = weight.n_cols() / tensor::dtype_traits(weight.dtype).block_size;
  const size_t group_bytes = packed_group_bytes(weight.dtype, weight.n_cols());
  const int64_t n_groups = weight.n_rows() / kPackedGroupRows;
  auto pack_groups = [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const uint8_t* rows = weight.row(g * kPackedGroupRows);
      uint8_t* group = static_cast<uint8_t*>(out) + static_cast<size_t>(g) * group_bytes;
      // The padding at the end of a group, where a layout has one.
      std::memset(group + group_bytes - kZmm, 0, kZmm);
      switch (weight.dtype) {
        case tensor::DType::q4_k: pack_q4_k_group(rows, weight.bytes_per_row(), n_blocks, group); break;
        case tensor::DType::q6_k: pack_q6_k_group(rows, weight.bytes_per_row(), n_blocks, group); break;
        case tensor::DType::q8_0: pack_q8_0_group(rows, weight.bytes_per_row(), n_blocks, group); break;
        case tensor::DType::q4_0: pack_q4_0_group(rows, weight.bytes_per_row(), n_blocks, group); break;
        default: pack_q5_0_group(rows, weight.bytes_per_row(), n_blocks, group); break;
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
