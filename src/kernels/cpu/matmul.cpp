// matmul: quantizes the activation rows once into the weight type's partner format, then threads split the
// weight (output) rows and run the multi-row dot product on each. Every output is one call of one kernel with
// a reduction order fixed by n_in alone, which is what makes y[r] independent of n_rows and of the threads.
// Not here: the kernels themselves (vec_dot*.cpp) and the choice of ISA (dispatch.cpp).
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_impl.h"

namespace rwd::kernels::cpu {
namespace {

// Threads take chunks of weight rows from a shared counter (a thread slowed by another process or a busier core
// then costs one chunk, not half the matmul), about kChunksPerThread per thread, at most kWeightTileBytes of
// weight (kept in L2). Each chunk meets the activation rows in groups of about kActivationGroupBytes (kept in
// L1; 2 to kMaxActivationGroup rows per multi-row call). With one group, every weight row is read from memory
// once and applied to all rows while in L1. Which thread computes an output never changes its bits.
constexpr int64_t kChunksPerThread = 8;
constexpr int64_t kMinChunkRows = 8;
constexpr size_t kWeightTileBytes = 256 * 1024;
constexpr size_t kActivationGroupBytes = 24 * 1024;
constexpr int64_t kMaxActivationGroup = 8;

// Below this many activation values, quantizing on the calling thread beats waking the pool for it.
constexpr int64_t kParallelQuantizeValues = 64 * 1024;

// Quantizes n_rows rows of n_in floats into tile rows (vec_dot_impl.h); blocks are independent, so any split
// gives the same bytes.
void quantize_rows(QuantizeRowFn quantize, tensor::DType act_type, int64_t block_size, size_t block_bytes,
                   const float* x, int64_t n_in, int64_t n_rows, uint8_t* out, size_t out_row_bytes,
                   ThreadPool& pool) {
  const int64_t blocks_per_row = n_in / block_size;
  auto quantize_range = [&](int64_t begin, int64_t end) {  // global block indices
    while (begin < end) {
      const int64_t row = begin / blocks_per_row;
      const int64_t first = begin % blocks_per_row;
      const int64_t count = std::min(end - begin, blocks_per_row - first);
      uint8_t* out_row = out + row * out_row_bytes;
      quantize(x + row * n_in + first * block_size, out_row + first * block_bytes, count * block_size);
      fill_tile_row_scales(act_type, n_in, out_row, first, count);
      begin += count;
    }
  };
  const int64_t n_blocks = blocks_per_row * n_rows;
  if (n_rows * n_in < kParallelQuantizeValues || pool.n_threads() == 1) {
    quantize_range(0, n_blocks);
  } else {
    pool.parallel_for(n_blocks, quantize_range);
  }
}

}  // namespace

void matmul(const tensor::Tensor& weight, const float* x, int64_t n_rows, float* y, MatmulScratch& scratch,
            ThreadPool& pool) {
  const tensor::DTypeTraits& traits = tensor::dtype_traits(weight.dtype);
  const VecDotTileFn dot_tile = vec_dot_tile_fn(weight.dtype);
  REWIND_CHECK(dot_tile != nullptr, "matmul: no CPU kernel for {} weight {}", traits.name, weight.name);
  REWIND_CHECK(weight.data != nullptr, "matmul: weight {} has no data", weight.name);
  const int64_t n_in = weight.n_cols();
  const int64_t n_out = weight.n_rows();
  if (n_rows <= 0 || n_out <= 0) return;

  const tensor::DType act_type = traits.vec_dot_type;
  const void* activations = x;
  size_t act_row_bytes = static_cast<size_t>(n_in) * sizeof(float);
  if (act_type != tensor::DType::f32) {
    const tensor::DTypeTraits& act_traits = tensor::dtype_traits(act_type);
    act_row_bytes = tile_row_bytes(act_type, n_in);
    const size_t needed = act_row_bytes * static_cast<size_t>(n_rows);
    if (scratch.activations.size() < needed) scratch.activations.resize(needed);
    const QuantizeRowFn quantize = quantize_row_fn(act_type);
    REWIND_CHECK(quantize != nullptr, "matmul: no quantizer for activation type {}", act_traits.name);
    quantize_rows(quantize, act_type, act_traits.block_size, act_traits.block_bytes, x, n_in, n_rows,
                  scratch.activations.data(), act_row_bytes, pool);
    activations = scratch.activations.data();
  }

  const auto* act = static_cast<const uint8_t*>(activations);
  const int64_t tile_rows = std::max<int64_t>(1, static_cast<int64_t>(kWeightTileBytes / weight.bytes_per_row()));
  const int64_t chunk_rows =
      std::min(tile_rows, std::max(kMinChunkRows, n_out / (kChunksPerThread * pool.n_threads())));
  const int64_t group_rows =
      std::clamp<int64_t>(static_cast<int64_t>(kActivationGroupBytes / act_row_bytes), 2, kMaxActivationGroup);
  std::atomic<int64_t> next_chunk{0};
  pool.run([&](int, int) {
    while (true) {
      const int64_t begin = next_chunk.fetch_add(chunk_rows, std::memory_order_relaxed);
      if (begin >= n_out) return;
      const int64_t end = std::min(n_out, begin + chunk_rows);
      for (int64_t r = 0; r < n_rows; r += group_rows) {
        const int64_t n_group = std::min(group_rows, n_rows - r);
        const uint8_t* group = act + static_cast<size_t>(r) * act_row_bytes;
        dot_tile(n_in, weight.row(begin), weight.bytes_per_row(), end - begin, group, act_row_bytes, n_group,
                 y + r * n_out + begin, n_out);
      }
    }
  });
}

}  // namespace rwd::kernels::cpu
