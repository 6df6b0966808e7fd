#include "compute/packed_weights.h"

#include "base/log.h"
#include "kernels/cpu/packed_weights.h"

namespace rwd::compute {

struct PackedWeights::Buffers {
  std::vector<kernels::cpu::PackedBuffer> owned;
};

PackedWeights::PackedWeights() : buffers_(std::make_unique<Buffers>()) {}
PackedWeights::~PackedWeights() = default;

bool PackedWeights::pack(tensor::Tensor& weight) {
  const kernels::cpu::KernelIsa isa = kernels::cpu::kernel_isa();
  const size_t bytes = kernels::cpu::packed_weight_bytes(isa, weight);
  if (bytes == 0) return false;
  if (const auto found = packed_by_data_.find(weight.data); found != packed_by_data_.end()) {
    weight.packed = found->second;
    return true;
  }
  kernels::cpu::PackedBuffer packed = kernels::cpu::allocate_packed(bytes);
  if (packed == nullptr) {
    log_warn("cannot allocate {} bytes for the packed copy of {}; it stays in the file's layout", bytes, weight.name);
    return false;
  }
  kernels::cpu::pack_weight(isa, weight, packed.get());
  packed_by_data_.emplace(weight.data, packed.get());
  weight.packed = packed.get();
  buffers_->owned.push_back(std::move(packed));
  return true;
}

}  // namespace rwd::compute
