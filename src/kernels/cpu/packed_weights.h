// Weights re-laid at load for kernels that read 16 weight rows at once (AVX-512 VNNI: q4_K, q6_K, q8_0, q4_0,
// q5_0). In the file's layout each weight row's blocks are its own, so a kernel that applies one row to a few
// activation rows pays for unpacking the block's scales and reducing its sums once per weight row; a verify
// batch of 4 to 8 rows is then bound by those instructions, not by memory. Interleaving 16 rows puts one row in
// each int32 lane of a zmm: one vpdpbusd with the activation's 4 bytes broadcast does 4 values of 16 rows,
// scales are unpacked for 16 rows at once, and a row's float steps are the same steps, in the same order, as
// the one-row kernels' (bit-identical results).
// The model owns the packed copy and keeps the file's bytes too (Tensor::packed beside Tensor::data): every
// other kernel set, and anything that reads rows one by one (embeddings), reads the file's layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/cpu/vec_dot.h"
#include "tensor/tensor.h"

namespace rwd::kernels::cpu {

// Weight rows per packed group; a weight is packed only when its row count is a multiple of it.
inline constexpr int64_t kPackedGroupRows = 16;

// Bytes of the packed layout of `weight` for the kernels of `isa`; 0 where that set has no packed kernel for
// it (its dtype, a row count that is not a multiple of kPackedGroupRows, more than two dimensions).
size_t packed_weight_bytes(KernelIsa isa, const tensor::Tensor& weight);

// Writes the packed layout (packed_weight_bytes(isa, weight) bytes) to `out`, which must be 64-byte aligned.
// Group g (rows 16g .. 16g + 15) starts at g * packed_group_bytes(weight.dtype, weight.n_cols()), so the first
// k groups of a packed weight are the packed layout of its first 16k rows.
void pack_weight(KernelIsa isa, const tensor::Tensor& weight, void* out);

struct FreePacked {
  void operator()(void* p) const { std::free(p); }
};
using PackedBuffer = std::unique_ptr<void, FreePacked>;

// Memory for a packed weight of `bytes` bytes: 64-byte aligned, on huge pages where the OS grants them (a decode
// step streams every weight once; with 4 KiB pages it takes a TLB miss per page). Null when out of memory.
PackedBuffer allocate_packed(size_t bytes);

// Bytes of one packed group of 16 rows of n values (a multiple of 64).
size_t packed_group_bytes(tensor::DType weight_type, int64_t n);

}  // namespace rwd::kernels::cpu
