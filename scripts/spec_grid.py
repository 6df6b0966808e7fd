#!/usr/bin/env python3
"""Speculative decoding grid: rollback policy x draft length x slots x draft error rate, with acceptance set by
the oracle proposer (it drafts the target's own greedy output with errors injected at a set rate), measured
with `rewind run --json` side by side with plain decoding in the same session.

Usage: scripts/spec_grid.py --rewind build/apps/rewind -m model.gguf [--depths 1,2,4,8] [--slots 1,4]
       [--errors 0.3,0.6,0.9] [--policies replay,snapshot,checkpoint] [-n 64] [--reps 3] [--adaptive]
Prints a markdown table; --json writes every run's numbers too.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile

PROMPTS = [
    "The history of the harbour town begins with a fishing village",
    "Write a short note about the weather in the mountains",
    "A list of things to pack for a week of hiking:",
    "Once upon a time, in a small village by the sea,",
]


def run(args, model, slots, extra):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(PROMPTS[:slots]) + "\n")
        prompts = f.name
    cmd = [args.rewind, "run", "-m", model, "--prompts-file", prompts, "-n", str(args.n), "--temp", "0",
           "--ignore-eos", "-t", str(args.threads), "--json", "-c", "512"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    # Aggregate tokens/s: all slots' tokens over the longest generation time (they run together).
    tokens = sum(r["timings"]["generated_tokens"] - 1 for r in rows)
    seconds = max(r["timings"]["generation_seconds"] for r in rows)
    return rows, tokens / seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rewind", required=True)
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--depths", default="1,2,3,4,5,6,7,8")
    parser.add_argument("--slots", default="1,4")
    parser.add_argument("--errors", default="0.3,0.6,0.9")
    parser.add_argument("--policies", default="replay,snapshot,checkpoint")
    parser.add_argument("-n", type=int, default=64)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--adaptive", action="store_true", help="let the draft-length policy choose (k = max)")
    parser.add_argument("--json", help="write all runs here")
    args = parser.parse_args()
    depths = [int(x) for x in args.depths.split(",")]
    slot_counts = [int(x) for x in args.slots.split(",")]
    errors = [float(x) for x in args.errors.split(",")]
    policies = args.policies.split(",")
    results = []
    print("| slots | error | policy | k | acceptance | tok/s | vs plain | ms/token | state MiB | written KiB/round "
          "| spec/plain steps |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for slots in slot_counts:
        for error in errors:
            for policy in policies:
                for k in depths:
                    plain_tps, spec_tps, last = [], [], None
                    for _ in range(args.reps):
                        _, tps = run(args, args.model, slots, ["--spec", "none"])
                        plain_tps.append(tps)
                        extra = ["--spec", "oracle", "--oracle-error-rate", str(error), "--rollback", policy,
                                 "--draft-max", str(k), "--draft-min", "1"]
                        if not args.adaptive:
                            extra.append("--fixed-draft")
                        rows, tps = run(args, args.model, slots, extra)
                        spec_tps.append(tps)
                        last = rows
                    spec = [r["spec"] for r in last]
                    drafted = sum(s["drafted"] for s in spec)
                    accepted = sum(s["accepted"] for s in spec)
                    rounds = sum(s["rounds"] for s in spec)
                    plain_steps = sum(s["policy"]["plain_steps"] for s in spec)
                    written = sum(s["rollback_bytes_written"] for s in spec)
                    state = last[0]["state"]
                    state_bytes = sum(state[key] for key in ("conv", "recurrent", "records", "snapshots",
                                                             "checkpoint_copies", "scratch"))
                    p, s = statistics.median(plain_tps), statistics.median(spec_tps)
                    row = {"slots": slots, "error": error, "policy": policy, "k": k,
                           "acceptance": accepted / drafted if drafted else 0.0, "plain_tps": p, "spec_tps": s,
                           "ratio": s / p, "ms_per_token": 1e3 / s, "state_bytes": state_bytes,
                           "written_per_round": written / rounds if rounds else 0.0, "state": state,
                           "spec_steps": rounds, "plain_steps": plain_steps,
                           "mostly_plain": plain_steps > rounds,
                           "policy_decisions": [x["policy"] for x in spec]}
                    results.append(row)
                    print(f"| {slots} | {error} | {policy} | {k} | {row['acceptance']:.2f} | {s:.1f} | "
                          f"{s / p:.2f} | {1e3 / s:.2f} | {state_bytes / 2**20:.2f} | "
                          f"{row['written_per_round'] / 1024:.1f} | {rounds}/{plain_steps}"
                          f"{' mostly plain' if plain_steps > rounds else ''} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
