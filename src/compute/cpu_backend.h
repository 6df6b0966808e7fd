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

// pool may be null (one thread: the state maintenance of a commit or a rewind outside a forward).
std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool);

// The name of the CPU kernel set dispatch picked ("avx512vnni", "avx2", ..., REWIND_ISA's spelling).
const char* cpu_kernel_set();

}  // namespace rwd::compute
