// main() of rewind_bench_kernels, in place of benchmark_main: measures the machine's read bandwidth once per
// matmul thread count, prints it to stderr (stdout may carry --benchmark_format=json) and records it in the
// benchmark context (console header and the JSON "context"), registers the matmul benchmarks against it, then
// runs Google Benchmark as benchmark_main would. The other benchmarks register themselves (BENCHMARK macros).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "read_ceiling.h"
#include "rewind/tools.h"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);  // handles --help and exits
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  rwd::kernels::cpu::ReadCeiling ceiling;
  for (int n_threads : rwd::kernels::cpu::kMatmulThreadCounts) {
    const double gbps = rwd::measure_read_bandwidth_gbps(n_threads);
    ceiling.gbps_by_threads[n_threads] = gbps;
    // Google Benchmark prints bytes_per_second in binary units ("G/s" = GiB/s), hence both.
    std::fprintf(stderr, "read bandwidth (the ceiling of of_ceiling_%%), %d thread%s: %.2f GB/s = %.2f GiB/s\n",
                 n_threads, n_threads == 1 ? "" : "s", gbps, gbps * 1e9 / 1073741824.0);
    char value[32];
    std::snprintf(value, sizeof value, "%.2f", gbps);
    benchmark::AddCustomContext("read_bandwidth_gbps_threads_" + std::to_string(n_threads), value);
  }
  std::fflush(stderr);
  rwd::kernels::cpu::register_matmul_benchmarks(ceiling);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
