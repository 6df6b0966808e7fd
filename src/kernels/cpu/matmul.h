// y = x · Wᵀ for a weight W stored [n_out, n_in] in any supported dtype and float activations.
// Activations are quantized once per call to the weight type's partner format (for several rows, interleaved
// into panels of 8); threads split output rows (weight rows), and each chunk of weight rows is applied to all
// n_rows activation rows while it sits in cache, so the weights stream from memory once per call.
// Batch-invariant: row r of y is bit-identical whatever n_rows is and however many threads run.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/cpu/vec_dot.h"
#include "tensor/tensor.h"

namespace rwd {
class ThreadPool;
}

namespace rwd::kernels::cpu {

// Reusable scratch for quantized activations and their panels; grows to the largest call and is then reused,
// so a token step does not allocate once warmed up.
struct MatmulScratch {
  std::vector<uint8_t> activations;
  std::vector<uint8_t> activation_terms;  // per-block terms of the blocks-of-32 packed kernels (packed_layout.h)
};

// x: [n_rows, n_in] float, y: [n_rows, n_out] float (must not alias x).
void matmul(const tensor::Tensor& weight, const float* x, int64_t n_rows, float* y, MatmulScratch& scratch,
            ThreadPool& pool);

// The same with the kernels and quantizers of a given ISA in place of the dispatched ones (tests and benchmarks
// of each set); the CPU must support it (vec_dot_impl.h isa_supported).
void matmul(KernelIsa isa, const tensor::Tensor& weight, const float* x, int64_t n_rows, float* y,
            MatmulScratch& scratch, ThreadPool& pool);

// One weight of matmul_shared_input: y = x · weightᵀ, [n_rows, weight rows].
struct MatmulOutput {
  const tensor::Tensor* weight;
  float* y;
};

// Several weights over the same x (q, k and v; an FFN's gate and up; a mixer's side projections), with the
// results of separate matmul() calls bit for bit. For the few rows of a decode step, x is quantized once and
// all the weights' row chunks are shared out in one pool round instead of one round per weight, which is what
// a decode step of small matrices spends its time waiting on.
void matmul_shared_input(std::initializer_list<MatmulOutput> outputs, const float* x, int64_t n_rows,
                         MatmulScratch& scratch, ThreadPool& pool);

}  // namespace rwd::kernels::cpu
