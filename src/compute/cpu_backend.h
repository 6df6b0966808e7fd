// The CPU backend: each op of compute/backend.h forwarded to the fused kernels of kernels/cpu (dispatched at
// run time to the scalar, AVX2, AVX-VNNI or AVX-512 VNNI set), the small ops as plain loops. Views are host
// memory. One backend per forward context: it owns the matmul's activation scratch, which grows to the
// largest call and is then reused, so a warm step allocates nothing.
#pragma once

#include <memory>

#include "compute/backend.h"

namespace rwd {
class ThreadPool;
}

namespace rwd::compute {

// Which kernels a CPU backend runs: the set dispatch picked for this CPU (REWIND_ISA may force one), or one set
// named, whatever dispatch picked; the tee backend (compute/tee_backend.h) runs two side by side, the AVX2
// path against the scalar one. The float kernels have a scalar and an AVX2 path; every set but scalar takes
// the AVX2 one.
enum class CpuKernels { dispatched, scalar, avx2, avxvnni, avx512vnni, vnni_emulated };

// pool may be null (one thread: the state maintenance of a commit or a rewind outside a forward). The CPU must
// support the kernels (cpu_supports).
std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool, CpuKernels kernels = CpuKernels::dispatched);
bool cpu_supports(CpuKernels kernels);
// "dispatched", or the set's REWIND_ISA spelling.
const char* cpu_kernels_name(CpuKernels kernels);

// The name of the CPU kernel set dispatch picked ("avx512vnni", "avx2", ..., REWIND_ISA's spelling).
const char* cpu_kernel_set();

}  // namespace rwd::compute
