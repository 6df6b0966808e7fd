// inspect_file and measure_read_bandwidth_gbps of include/rewind/tools.h.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "rewind/tools.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rwd {

Result<FileSummary> inspect_file(const std::string& path) {
  REWIND_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::open(path));
  FileSummary summary;
  summary.path = path;
  summary.version = file->version();
  summary.file_bytes = file->file_bytes();
  for (const auto& [key, value] : file->metadata()) summary.metadata.emplace_back(key, file->value_to_string(value));
  for (const gguf::TensorInfo& info : file->tensors()) {
    TensorSummary t;
    t.name = info.tensor.name;
    t.type = std::string(tensor::dtype_name(info.tensor.dtype));
    for (int i = info.tensor.n_dims - 1; i >= 0; --i) t.shape.push_back(info.tensor.ne[i]);
    t.n_bytes = info.n_bytes;
    summary.tensors.push_back(std::move(t));
  }
  return summary;
}

namespace {

// Sums a buffer with wide loads; the result is consumed so the reads cannot be optimised away.
__attribute__((target("avx2"))) uint64_t sum_words_avx2(const uint64_t* data, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256(), a2 = _mm256_setzero_si256(),
          a3 = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  uint64_t total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) total += data[i];
  return total;
}

uint64_t sum_words_scalar(const uint64_t* data, size_t n) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += data[i];
  return total;
}

}  // namespace

double measure_read_bandwidth_gbps(int n_threads) {
  constexpr size_t kBytes = size_t{512} << 20;  // far beyond any last-level cache here
  const size_t n_words = kBytes / sizeof(uint64_t);
  uint64_t* data = static_cast<uint64_t*>(std::aligned_alloc(64, kBytes));
  if (data == nullptr) return 0.0;
  ThreadPool pool(n_threads);
  pool.parallel_for(static_cast<int64_t>(n_words), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) data[i] = static_cast<uint64_t>(i);
  });
  const bool avx2 = __builtin_cpu_supports("avx2");
  std::vector<uint64_t> sinks(static_cast<size_t>(pool.n_threads()), 0);
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pool.run([&](int ith, int nth) {
      const size_t begin = (n_words * ith / nth) & ~size_t{15};
      const size_t end = ith == nth - 1 ? n_words : (n_words * (ith + 1) / nth) & ~size_t{15};
      sinks[ith] += avx2 ? sum_words_avx2(data + begin, end - begin) : sum_words_scalar(data + begin, end - begin);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(kBytes) / seconds / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sinks) keep = keep + s;
  std::free(data);
  return best;
}

}  // namespace rwd
