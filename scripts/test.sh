#!/usr/bin/env bash
# The whole test suite on a fresh machine: install packages, build (Release, warnings as errors), run every
# CTest test; then build with address + undefined sanitizers and run the unit, spec and server labels under them
# (their model grids thinned to a sample that still reaches every code path: tests/common/sanitizer_sample.h).
# Real-model tests run only when the models are in the cache (scripts/fetch_models.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="$(nproc)"
"$root/scripts/setup.sh"

REWIND_BUILD_DIR="$root/build" "$root/scripts/build.sh" -DREWIND_WERROR=ON
ctest --test-dir "$root/build" --output-on-failure -j "$jobs" --timeout 900

if [ "${REWIND_SKIP_SANITIZE:-0}" != "1" ]; then
  # -O1 -g1 (line tables, enough for the sanitizers' stack traces): instrumented, engine_impl.cpp compiles in
  # 41 s at -O2 -g and 19 s at -O1 -g1, while the sanitizer tests run only 12 % slower (7.6 -> 8.6 min).
  REWIND_BUILD_DIR="$root/build-asan" "$root/scripts/build.sh" -DREWIND_SANITIZE=ON -DREWIND_BUILD_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    "-DREWIND_TEST_LABELS=unit;spec;server"
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$jobs" -L "unit|spec|server" --timeout 900
fi
