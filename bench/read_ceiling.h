// The machine's read bandwidth, measured once by bench_main.cpp before any benchmark runs, per thread count the
// matmul benchmarks use: the ceiling their weight bytes/s are reported against ("of_ceiling"). Measured with
// rwd::measure_read_bandwidth_gbps, the same figure `rewind bench decode` prints beside decode's weight GB/s.
#pragma once

#include <map>

namespace rwd::kernels::cpu {

// Thread counts of the Matmul and MatmulCold benchmarks; the ceiling is measured for each.
inline constexpr int kMatmulThreadCounts[] = {1, 2};

struct ReadCeiling {
  std::map<int, double> gbps_by_threads;  // n_threads -> GB/s (1e9 bytes/s)

  double gbps(int n_threads) const {
    const auto found = gbps_by_threads.find(n_threads);
    return found == gbps_by_threads.end() ? 0.0 : found->second;
  }
};

// Registers BM_Matmul and BM_MatmulCold (bench_kernels.cpp) against `ceiling`, which must outlive the run.
void register_matmul_benchmarks(const ReadCeiling& ceiling);

}  // namespace rwd::kernels::cpu
