#!/usr/bin/env bash
# Configures and builds rewind in build/ (Release). Extra arguments go to cmake's configure step.
# REWIND_BUILD_TARGETS (space-separated) builds only those targets, e.g. "rewind" for the binary alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${REWIND_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" > "$build_dir.configure.log" 2>&1 \
  || { cat "$build_dir.configure.log"; exit 1; }
targets=()
for target in ${REWIND_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
