// Weights re-laid at load for the CPU backend's packed kernels (kernels/cpu/packed_weights.h: 16 rows
// interleaved for the AVX-512 VNNI set). The model keeps the file's bytes too (Tensor::packed beside
// Tensor::data); every other kernel set, and anything that reads rows one by one, reads the file's layout.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace rwd::compute {

class PackedWeights {
 public:
  PackedWeights();
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  // Sets weight.packed to a copy in the dispatched kernel set's packed layout, made once per tensor data
  // (weights sharing data share the copy); false, leaving it unpacked, where the set has no packed layout for it
  // or the memory cannot be had (slower then, never wrong).
  bool pack(tensor::Tensor& weight);

 private:
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
  std::map<const void*, const void*> packed_by_data_;
};

}  // namespace rwd::compute
