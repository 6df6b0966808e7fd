#!/usr/bin/env python3
"""The anchor's verify cost: how long llama.cpp takes to run a batch of 1 + k tokens, against one decode step.

rewind's `rewind bench -m MODEL --verify 1,3,7` reports the same ratio for rewind (a verify forward plus its
commit against a plain step). This script measures llama.cpp on the same file with its own llama-bench, on a
build the user points it at, so the anchor figures in README come from a command anyone can rerun:

    scripts/llamacpp_verify_ratio.py --llama-bench ~/llama.cpp/build/bin/llama-bench -m MODEL.gguf -t 2 -k 1,3,7

For each batch size n = 1 + k, llama-bench runs `-p n -n 0 -d DEPTH` (a prompt chunk of n tokens after DEPTH
tokens of context: one batch, as a verify batch is) and `-p 0 -n 16 -d DEPTH` (decoding one token at a time).
The time of one batch is n / (pp tokens/s); of one step, 1 / (tg tokens/s); the ratio is their quotient.
Medians of --reps runs (llama-bench's own -r). Standard library only.
"""
import argparse
import json
import statistics
import subprocess
import sys


def llama_bench(args, n_prompt, n_gen):
    command = [args.llama_bench, "-m", args.model, "-t", str(args.threads), "-p", str(n_prompt), "-n", str(n_gen),
               "-d", str(args.depth), "-r", str(args.reps), "-o", "json"]
    if args.batch_size:
        command += ["-b", str(args.batch_size), "-ub", str(args.batch_size)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"llama_bench failed ({' '.join(command)}):\n{result.stderr[-2000:]}")
    try:
        rows = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        sys.exit(f"llama-bench printed no JSON ({error}); is {args.llama_bench} llama.cpp's llama-bench?")
    if len(rows) != 1 or "samples_ts" not in rows[0]:
        sys.exit(f"unexpected llama-bench output: {result.stdout[:500]}")
    # Per-run tokens/s; the median is robust to one run disturbed by another process.
    return statistics.median(rows[0]["samples_ts"]), rows[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-bench", required=True, help="path to llama.cpp's llama-bench binary")
    parser.add_argument("-m", "--model", required=True, help="GGUF file")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("-k", "--draft-lengths", default="1,3,7",
                        help="draft lengths k, comma-separated: batches of 1 + k tokens")
    parser.add_argument("-d", "--depth", type=int, default=64, help="tokens of context before each measurement")
    parser.add_argument("-r", "--reps", type=int, default=15)
    parser.add_argument("-b", "--batch-size", type=int, default=0, help="llama-bench -b/-ub (default: its own)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    try:
        lengths = [int(k) for k in args.draft_lengths.split(",")]
    except ValueError:
        sys.exit(f"--draft-lengths must be integers separated by commas, got '{args.draft_lengths}'")
    if not lengths or min(lengths) < 1 or max(lengths) > 32:
        sys.exit("--draft-lengths must be in [1, 32]")
    if args.threads < 1 or args.reps < 1 or args.depth < 0:
        sys.exit("--threads and --reps must be >= 1, --depth >= 0")

    tg, info = llama_bench(args, 0, 16)
    step_ms = 1e3 / tg
    print(f"llama.cpp {info.get('build_commit', '?')} ({info.get('cpu_info', '?')}, backend {info.get('backends', '?')}),"
          f" {args.model}, {args.threads} threads, depth {args.depth}, medians of {args.reps}")
    print("| k | tokens | batch ms | step ms | batch / step |")
    print("|---:|---:|---:|---:|---:|")
    results = []
    for k in lengths:
        n = 1 + k
        pp, _ = llama_bench(args, n, 0)
        batch_ms = 1e3 * n / pp
        results.append({"k": k, "tokens": n, "batch_ms": batch_ms, "step_ms": step_ms, "ratio": batch_ms / step_ms})
        print(f"| {k} | {n} | {batch_ms:.2f} | {step_ms:.2f} | {batch_ms / step_ms:.2f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "threads": args.threads, "depth": args.depth,
                       "build_commit": info.get("build_commit"), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
