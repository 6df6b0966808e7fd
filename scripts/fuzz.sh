#!/usr/bin/env bash
# Builds the GGUF reader fuzz target with clang (libFuzzer, AddressSanitizer, UBSan) and runs it for a
# bounded time. Usage: scripts/fuzz.sh [seconds]  (default 60).
# Environment: BUILD_DIR (default <repo>/build-fuzz), JOBS (build parallelism, default 2).
# Exits non-zero when the fuzzer finds a crash, a sanitizer error, a leak or a timeout; the input that
# triggered it is left in $BUILD_DIR/fuzz/artifacts/ and can be replayed with `fuzz_gguf_reader <file>`.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: $0 [seconds > 0]" >&2
  exit 2
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$repo/build-fuzz}"

CC=clang CXX=clang++ cmake -S "$repo" -B "$build" -DREWIND_FUZZ=ON -DREWIND_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_gguf_reader gguf_fuzz_seeds -j "${JOBS:-2}"

seeds="$build/fuzz/seeds"
corpus="$build/fuzz/corpus"
artifacts="$build/fuzz/artifacts"
mkdir -p "$seeds" "$corpus" "$artifacts"
"$build/tests/fuzz/gguf_fuzz_seeds" "$seeds" >/dev/null

# New inputs go to the first directory (kept between runs); the seeds are only read.
"$build/tests/fuzz/fuzz_gguf_reader" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_funcs=0 -dict="$repo/tests/fuzz/gguf.dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
  "$corpus" "$seeds"
