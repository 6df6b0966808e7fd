// matmul: quantizes the activation rows once into the weight type's partner format, then threads take chunks
// of weight (output) rows and apply each to every activation row: through the packed kernel where the weight
// was packed at load for the set in use (packed_weights.h), through panels of 8 interleaved rows where the table
// has panel kernels and there are enough rows, through a narrow panel of up to 4 rows for a verify batch, or of
// the one row of a decode step (q4_0, q5_0), where the table has one, else (and for rows too few to fill a
// panel) through the table's tile, a few activation rows at a time. Every output is computed by one kernel
// whose arithmetic depends on n_in alone (the packed, panel, tile and one-row kernels agree bit for bit), which
// is what makes y[r] independent of n_rows and of the threads.
// Not here: the kernels themselves (vec_dot*.cpp, packed_*.cpp) and the choice of ISA (dispatch.cpp).
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "base/check.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu {
namespace {

// Threads take chunks of weight rows from a shared counter (a thread slowed by another process or a busier core
// then costs one chunk, not half the matmul), about kChunksPerThread per thread, at most kWeightTileBytes of
// weight (kept in L2). Each chunk meets the activations a panel at a time (the panel stays in L1 while the
// chunk's rows stream past it), or, on the pair path, in groups of about kActivationGroupBytes. Which thread
// computes an output never changes its bits.
constexpr int64_t kChunksPerThread = 8;
constexpr int64_t kMinChunkRows = 8;
constexpr size_t kWeightTileBytes = 256 * 1024;
constexpr size_t kActivationGroupBytes = 24 * 1024;
constexpr int64_t kMaxActivationGroup = 8;

constexpr size_t kCacheLine = 64;

// Below this many activation values, quantizing on the calling thread beats waking the pool for it.
constexpr int64_t kParallelQuantizeValues = 64 * 1024;

struct ActivationFormat {
  QuantizeRowFn quantize = nullptr;  // null for f32 activations, used as they are
  int64_t block_size = 1;
  size_t block_bytes = 0;
  size_t row_bytes = 0;
};

ActivationFormat activation_format(KernelIsa isa, tensor::DType act_type, int64_t n_in) {
  ActivationFormat format;
  if (act_type == tensor::DType::f32) {
    format.row_bytes = static_cast<size_t>(n_in) * sizeof(float);
    return format;
  }
  const tensor::DTypeTraits& traits = tensor::dtype_traits(act_type);
  format.quantize = quantize_row_fn(isa, act_type);
  REWIND_CHECK(format.quantize != nullptr, "matmul: no quantizer for activation type {}", traits.name);
  format.block_size = traits.block_size;
  format.block_bytes = traits.block_bytes;
  format.row_bytes = tensor::row_bytes(act_type, n_in);
  return format;
}

// Quantizes rows [row_begin, row_end) of x; blocks are independent, so any split gives the same bytes.
void quantize_rows(const ActivationFormat& format, const float* x, int64_t n_in, int64_t row_begin, int64_t row_end,
                   uint8_t* out) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    format.quantize(x + row * n_in, out + static_cast<size_t>(row) * format.row_bytes, n_in);
  }
}

// Splits the quantization by blocks across the pool when it is large enough to pay for the wake-up.
void quantize_all_rows(const ActivationFormat& format, const float* x, int64_t n_in, int64_t n_rows, uint8_t* out,
                       ThreadPool& pool) {
  const int64_t blocks_per_row = n_in / format.block_size;
  auto quantize_range = [&](int64_t begin, int64_t end) {  // global block indices
    while (begin < end) {
      const int64_t row = begin / blocks_per_row;
      const int64_t first = begin % blocks_per_row;
      const int64_t count = std::min(end - begin, blocks_per_row - first);
      format.quantize(x + row * n_in + first * format.block_size,
                      out + static_cast<size_t>(row) * format.row_bytes + first * format.block_bytes,
                      count * format.block_size);
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

// The first cache-line boundary at or after p: panels start there, so their 32-byte loads never straddle two
// lines.
uint8_t* cache_line_aligned(uint8_t* p) {
  return p + (kCacheLine - reinterpret_cast<uintptr_t>(p) % kCacheLine) % kCacheLine;
}

// Rows per chunk of weight rows for the threads to share.
int64_t chunk_rows_for(const tensor::Tensor& weight, int n_threads) {
  const int64_t tile_rows = std::max<int64_t>(1, static_cast<int64_t>(kWeightTileBytes / weight.bytes_per_row()));
  return std::min(tile_rows, std::max(kMinChunkRows, weight.n_rows() / (kChunksPerThread * n_threads)));
}

// The packed kernel for a weight packed at load (packed_weights.h), or null: only the set the packing was made
// for reads it, and only whole groups of rows (a view of the first rows of a packed weight stays packed).
PackedDotFn packed_for(KernelIsa isa, const tensor::Tensor& weight) {
  if (isa != KernelIsa::avx512vnni || weight.packed == nullptr || weight.n_rows() % kPackedGroupRows != 0) {
    return nullptr;
  }
  return avx512vnni::packed_dot_fn(weight.dtype);
}

// Rows per chunk for a packed weight: whole groups.
int64_t packed_chunk_rows(const tensor::Tensor& weight, int n_threads) {
  return (chunk_rows_for(weight, n_threads) + kPackedGroupRows - 1) / kPackedGroupRows * kPackedGroupRows;
}

// The sum and the float scale of every q8_0 block of the rows, for the blocks-of-32 packed kernels.
const Block32ActivationTerms* block32_terms(const uint8_t* rows, size_t row_bytes, int64_t n_in, int64_t n_rows,
                                            MatmulScratch& scratch) {
  const int64_t n_blocks = n_in / tensor::quant::kBlock32;
  scratch.activation_terms.resize(static_cast<size_t>(n_rows * n_blocks) * sizeof(Block32ActivationTerms));
  auto* terms = reinterpret_cast<Block32ActivationTerms*>(scratch.activation_terms.data());
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blocks = reinterpret_cast<const tensor::quant::BlockQ8_0*>(rows + static_cast<size_t>(r) * row_bytes);
    for (int64_t b = 0; b < n_blocks; ++b) {
      int32_t sum = 0;
      for (int8_t v : blocks[b].qs) sum += v;
      terms[r * n_blocks + b] = {sum, fp16_to_fp32(blocks[b].d)};
    }
  }
  return terms;
}

// Runs body(begin, end) over chunks of weight rows taken from a shared counter by every thread of the pool.
template <typename Body>
void for_each_weight_chunk(int64_t n_out, int64_t chunk_rows, ThreadPool& pool, Body&& body) {
  std::atomic<int64_t> next_chunk{0};
  pool.run([&](int, int) {
    while (true) {
      const int64_t begin = next_chunk.fetch_add(chunk_rows, std::memory_order_relaxed);
      if (begin >= n_out) return;
      body(begin, std::min(n_out, begin + chunk_rows));
    }
  });
}

// The panel kernel that takes n_rows activation rows, or null where the tiles do.
const PanelKernel* panel_for(const VecDotKernel& kernel, int64_t n_rows) {
  if (kernel.panel.dot != nullptr && n_rows >= kernel.panel.min_rows) return &kernel.panel;
  const PanelKernel& narrow = kernel.narrow_panel;
  if (narrow.dot != nullptr && n_rows >= narrow.min_rows && n_rows <= narrow.rows) return &narrow;
  return nullptr;
}

// Panels for the rows of full panels and, when what is left would pay for a panel (n_rows % rows >= min_rows),
// for those too; otherwise the tile takes the last n_rows % rows rows, after the panels, while the chunk's
// weights are still in L2 (a panel costs a full panel's rows of work whatever the count).
void matmul_panels(const tensor::Tensor& weight, const VecDotKernel& kernel, const PanelKernel& panel,
                   const ActivationFormat& format, const float* x, int64_t n_rows, float* y, MatmulScratch& scratch,
                   ThreadPool& pool) {
  const int64_t n_in = weight.n_cols();
  const int64_t n_out = weight.n_rows();
  const int64_t n_tail = n_rows % panel.rows < panel.min_rows ? n_rows % panel.rows : 0;
  const int64_t n_panel_rows = n_rows - n_tail;
  const int64_t n_panels = (n_panel_rows + panel.rows - 1) / panel.rows;
  const size_t panel_bytes = panel.panel_bytes(n_in);
  const size_t rows_bytes = format.row_bytes * static_cast<size_t>(n_rows);
  const size_t needed = rows_bytes + kCacheLine + panel_bytes * static_cast<size_t>(n_panels);
  if (scratch.activations.size() < needed) scratch.activations.resize(needed);
  uint8_t* rows = scratch.activations.data();
  uint8_t* panels = cache_line_aligned(rows + rows_bytes);

  auto prepare = [&](int64_t p_begin, int64_t p_end) {
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int64_t row_begin = p * panel.rows;
      const int64_t row_end = std::min(n_panel_rows, row_begin + panel.rows);
      quantize_rows(format, x, n_in, row_begin, row_end, rows);
      panel.pack(n_in, rows + static_cast<size_t>(row_begin) * format.row_bytes, format.row_bytes,
                 row_end - row_begin, panels + static_cast<size_t>(p) * panel_bytes);
    }
  };
  if (n_panels == 1 || pool.n_threads() == 1) {
    prepare(0, n_panels);
  } else {
    pool.parallel_for(n_panels, prepare);
  }
  quantize_rows(format, x, n_in, n_panel_rows, n_rows, rows);

  const size_t weight_row_bytes = weight.bytes_per_row();
  for_each_weight_chunk(n_out, chunk_rows_for(weight, pool.n_threads()), pool, [&](int64_t begin, int64_t end) {
    for (int64_t p = 0; p < n_panels; ++p) {
      const int64_t row_begin = p * panel.rows;
      panel.dot(n_in, weight.row(begin), weight_row_bytes, end - begin, panels + static_cast<size_t>(p) * panel_bytes,
                std::min(panel.rows, n_panel_rows - row_begin), y + row_begin * n_out + begin, n_out);
    }
    if (n_tail > 0) {
      kernel.tile(n_in, weight.row(begin), weight_row_bytes, end - begin,
                  rows + static_cast<size_t>(n_panel_rows) * format.row_bytes, format.row_bytes, n_tail,
                  y + n_panel_rows * n_out + begin, n_out);
    }
  });
}

// The pair path for rows too few for panels, of one weight or of several that share x and its activation
// format: one quantization, then every weight's chunks of rows from one counter in one pool round. Activation
// rows go in groups of equal size (9 rows as 5 + 4, not 8 + 1): the tiles share each weight load among a
// group's rows, and a group of one row shares nothing. An output's bits depend only on its group. With
// `panel` (the one panel all the weights' kernels take these rows with), the rows are packed once into it and
// each weight's chunks go through its own kernel's dot on that panel instead.
void matmul_pairs(KernelIsa isa, std::initializer_list<MatmulOutput> outputs, const ActivationFormat& format,
                  const float* x, int64_t n_rows, const PanelKernel* panel, MatmulScratch& scratch,
                  ThreadPool& pool) {
  const int64_t n_in = outputs.begin()->weight->n_cols();
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  uint8_t* panel_data = nullptr;
  if (format.quantize != nullptr) {
    const size_t rows_bytes = format.row_bytes * static_cast<size_t>(n_rows);
    const size_t needed = rows_bytes + (panel != nullptr ? kCacheLine + panel->panel_bytes(n_in) : 0);
    if (scratch.activations.size() < needed) scratch.activations.resize(needed);
    quantize_all_rows(format, x, n_in, n_rows, scratch.activations.data(), pool);
    act = scratch.activations.data();
    if (panel != nullptr) {
      panel_data = cache_line_aligned(scratch.activations.data() + rows_bytes);
      panel->pack(n_in, act, format.row_bytes, n_rows, panel_data);
    }
  }
  const size_t act_row_bytes = format.row_bytes;
  const int64_t max_group_rows =
      std::clamp<int64_t>(static_cast<int64_t>(kActivationGroupBytes / act_row_bytes), 1, kMaxActivationGroup);
  const int64_t n_groups = (n_rows + max_group_rows - 1) / max_group_rows;
  const int64_t group_rows = (n_rows + n_groups - 1) / n_groups;

  struct Part {
    const tensor::Tensor* weight;
    float* y;
    VecDotTileFn tile;
    PanelDotFn panel_dot;    // set where the rows were packed into a panel
    PackedDotFn packed_dot;  // set for a weight packed at load (then the rows are plain, never in a panel)
    int64_t chunk_rows;
    int64_t first_chunk;  // index of its first chunk in the shared count
  };
  constexpr size_t kMaxParts = 8;
  Part parts[kMaxParts];
  size_t n_parts = 0;
  int64_t n_chunks = 0;
  for (const MatmulOutput& output : outputs) {
    const PackedDotFn packed_dot = packed_for(isa, *output.weight);
    const int64_t chunk_rows = packed_dot != nullptr ? packed_chunk_rows(*output.weight, pool.n_threads())
                                                     : chunk_rows_for(*output.weight, pool.n_threads());
    const VecDotKernel kernel = vec_dot_kernel(isa, output.weight->dtype);
    const PanelDotFn panel_dot = panel_data != nullptr ? panel_for(kernel, n_rows)->dot : nullptr;
    parts[n_parts++] = {output.weight, output.y, kernel.tile, panel_dot, packed_dot, chunk_rows, n_chunks};
    n_chunks += (output.weight->n_rows() + chunk_rows - 1) / chunk_rows;
  }
  // Weights packed at load read the plain rows, and those of blocks of 32 the rows' per-block terms too.
  PackedActivations packed_act{act, act_row_bytes, nullptr};
  for (size_t i = 0; i < n_parts; ++i) {
    if (parts[i].packed_dot == nullptr || !packed_needs_block_terms(parts[i].weight->dtype)) continue;
    packed_act.terms = block32_terms(act, act_row_bytes, n_in, n_rows, scratch);
    break;
  }
  std::atomic<int64_t> next_chunk{0};
  pool.run([&](int, int) {
    size_t part_index = 0;
    while (true) {
      const int64_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= n_chunks) return;
      while (part_index + 1 < n_parts && parts[part_index + 1].first_chunk <= chunk) ++part_index;
      const Part& part = parts[part_index];
      const tensor::Tensor& weight = *part.weight;
      const int64_t n_out = weight.n_rows();
      const int64_t begin = (chunk - part.first_chunk) * part.chunk_rows;
      const int64_t end = std::min(n_out, begin + part.chunk_rows);
      if (part.packed_dot != nullptr) {
        const size_t group_bytes = packed_group_bytes(weight.dtype, n_in);
        part.packed_dot(n_in, static_cast<const uint8_t*>(weight.packed) + begin / kPackedGroupRows * group_bytes,
                        (end - begin) / kPackedGroupRows, packed_act, n_rows, part.y + begin, n_out);
        continue;
      }
      if (part.panel_dot != nullptr) {
        part.panel_dot(n_in, weight.row(begin), weight.bytes_per_row(), end - begin, panel_data, n_rows,
                       part.y + begin, n_out);
        continue;
      }
      for (int64_t r = 0; r < n_rows; r += group_rows) {
        const int64_t n_group = std::min(group_rows, n_rows - r);
        part.tile(n_in, weight.row(begin), weight.bytes_per_row(), end - begin,
                  act + static_cast<size_t>(r) * act_row_bytes, act_row_bytes, n_group, part.y + r * n_out + begin,
                  n_out);
      }
    }
  });
}

}  // namespace

void matmul_shared_input(std::initializer_list<MatmulOutput> outputs, const float* x, int64_t n_rows,
                         MatmulScratch& scratch, ThreadPool& pool) {
  REWIND_CHECK(outputs.size() >= 1 && outputs.size() <= 8, "matmul_shared_input: {} weights, expected 1 .. 8",
               outputs.size());
  const KernelIsa isa = kernel_isa();
  const tensor::Tensor& first = *outputs.begin()->weight;
  bool shared = n_rows > 0;
  // The panel the first weight takes these rows with; the others must take them with one of the same layout,
  // in a single panel, for the rows to be packed once. Weights packed at load take plain rows, so they share x
  // only with other such weights.
  const bool weights_packed = packed_for(isa, first) != nullptr;
  const VecDotKernel first_kernel = vec_dot_kernel(isa, first.dtype);
  const PanelKernel* panel = n_rows > 0 && !weights_packed ? panel_for(first_kernel, n_rows) : nullptr;
  if (panel != nullptr && n_rows > panel->rows) shared = false;
  for (const MatmulOutput& output : outputs) {
    const tensor::Tensor& weight = *output.weight;
    REWIND_CHECK(weight.n_cols() == first.n_cols(), "matmul_shared_input: {} has {} inputs, {} has {}", weight.name,
                 weight.n_cols(), first.name, first.n_cols());
    const VecDotKernel kernel = vec_dot_kernel(isa, weight.dtype);
    REWIND_CHECK(kernel.tile != nullptr && weight.data != nullptr, "matmul_shared_input: no CPU kernel or data for {}",
                 weight.name);
    // Rows that take several panels, panels of different layouts, or another activation format, go through
    // matmul() one weight at a time.
    const PanelKernel* own_panel = weights_packed ? nullptr : panel_for(kernel, n_rows);
    const bool same_panel = own_panel == nullptr ? panel == nullptr : panel != nullptr && own_panel->pack == panel->pack;
    shared = shared && (packed_for(isa, weight) != nullptr) == weights_packed;
    shared = shared && tensor::dtype_traits(weight.dtype).vec_dot_type == tensor::dtype_traits(first.dtype).vec_dot_type &&
             same_panel && weight.n_rows() > 0;
  }
  if (!shared) {
    for (const MatmulOutput& output : outputs) matmul(isa, *output.weight, x, n_rows, output.y, scratch, pool);
    return;
  }
  const ActivationFormat format =
      activation_format(isa, tensor::dtype_traits(first.dtype).vec_dot_type, first.n_cols());
  matmul_pairs(isa, outputs, format, x, n_rows, panel, scratch, pool);
}

void matmul(const tensor::Tensor& weight, const float* x, int64_t n_rows, float* y, MatmulScratch& scratch,
            ThreadPool& pool) {
  matmul(kernel_isa(), weight, x, n_rows, y, scratch, pool);
}

void matmul(KernelIsa isa, const tensor::Tensor& weight, const float* x, int64_t n_rows, float* y,
            MatmulScratch& scratch, ThreadPool& pool) {
  const tensor::DTypeTraits& traits = tensor::dtype_traits(weight.dtype);
  const VecDotKernel kernel = vec_dot_kernel(isa, weight.dtype);
  REWIND_CHECK(kernel.tile != nullptr, "matmul: no CPU kernel for {} weight {}", traits.name, weight.name);
  REWIND_CHECK(weight.data != nullptr, "matmul: weight {} has no data", weight.name);
  if (n_rows <= 0 || weight.n_rows() <= 0) return;
  const ActivationFormat format = activation_format(isa, traits.vec_dot_type, weight.n_cols());
  if (packed_for(isa, weight) != nullptr) {
    matmul_pairs(isa, {{&weight, y}}, format, x, n_rows, nullptr, scratch, pool);
  } else if (const PanelKernel* panel = panel_for(kernel, n_rows)) {
    matmul_panels(weight, kernel, *panel, format, x, n_rows, y, scratch, pool);
  } else {
    matmul_pairs(isa, {{&weight, y}}, format, x, n_rows, nullptr, scratch, pool);
  }
}

}  // namespace rwd::kernels::cpu
