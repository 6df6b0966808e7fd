#!/usr/bin/env python3
"""rewind's point in one run: a hybrid model (Gated DeltaNet + attention) speculating with its own MTP head,
exactly, faster than plain decoding, with little rollback state. Called by scripts/demo.sh.

For one held-out code prompt it runs `rewind run --json` greedily: plain decoding and --spec mtp alternately
(--reps times; medians, since single runs on a shared machine are noisy), then --spec mtp once with
--rollback snapshot, rewind's implementation of llama.cpp's scheme (one full recurrent + conv state per draft
position), to read the state that scheme holds. Prints the output, whether it equals plain decoding, the
acceptance by draft position, tokens/s of both, and the rollback state of both schemes. Standard library only.
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def run(args, prompt, extra):
    command = [args.rewind, "run", "-m", args.model, "-p", prompt, "-n", str(args.n_predict), "--temp", "0",
               "--ignore-eos", "-t", str(args.threads), "--json", *extra]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"mission: {' '.join(command[:4])} ... failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout)


def rollback_bytes(state):
    """The state a rollback scheme needs: the live recurrent + conv state and what it keeps to undo drafts."""
    return sum(state.get(part, 0) for part in ("recurrent", "conv", "records", "snapshots", "checkpoint_copies"))


def kib(n):
    return f"{n / 1024:.1f} KiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rewind", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True, help="JSONL prompts; the --index-th is used")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("-n", "--n-predict", type=int, default=160)
    parser.add_argument("--draft-max", type=int, default=3)
    parser.add_argument("-t", "--threads", type=int, default=1,
                        help="threads (default 1: a 10 M-parameter model gains nothing from more)")
    parser.add_argument("-r", "--reps", type=int, default=5)
    args = parser.parse_args()
    if not Path(args.model).is_file():
        sys.exit(f"mission: model {args.model} not found")
    lines = [line for line in Path(args.prompts).read_text().splitlines() if line.strip()]
    if not 0 <= args.index < len(lines):
        sys.exit(f"mission: --index {args.index} outside the {len(lines)} prompts of {args.prompts}")
    entry = json.loads(lines[args.index])
    prompt = entry["prompt"]
    spec = ["--spec", "mtp", "--draft-max", str(args.draft_max)]

    plain_runs, mtp_runs = [], []
    for _ in range(args.reps):
        plain_runs.append(run(args, prompt, []))
        mtp_runs.append(run(args, prompt, spec))
    snapshot = run(args, prompt, spec + ["--rollback", "snapshot"])

    plain, mtp = plain_runs[0], mtp_runs[0]
    identical = all(r["ids"] == plain["ids"] for r in mtp_runs + [snapshot])
    plain_tps = statistics.median(r["timings"]["generation_tokens_per_second"] for r in plain_runs)
    mtp_tps = statistics.median(r["timings"]["generation_tokens_per_second"] for r in mtp_runs)
    stats = mtp["spec"]
    by_position = ", ".join(f"{p['rate']:.2f}" for p in stats["acceptance_by_position"])
    replay_state = rollback_bytes(mtp["state"])
    snapshot_state = rollback_bytes(snapshot["state"])

    tail = "".join(prompt.splitlines(keepends=True)[-6:])
    print(f"prompt ({entry.get('source', 'held-out code')}, {len(plain['prompt_ids'])} tokens), last lines:")
    print(tail.rstrip("\n"))
    print("---- generated with --spec mtp (greedy) ----")
    print(mtp["text"].rstrip("\n"))
    print("----")
    print(f"output identical to plain decoding: {'yes' if identical else 'NO (a bug)'}")
    print(f"MTP acceptance: {stats['accepted']} of {stats['drafted']} drafted tokens "
          f"({100 * stats['acceptance_rate']:.0f} %); by draft position: {by_position}")
    print(f"speed ({args.threads} thread(s), median of {args.reps}): plain {plain_tps:.0f} tokens/s, "
          f"MTP {mtp_tps:.0f} tokens/s = {mtp_tps / plain_tps:.2f}x")
    print(f"rollback state at draft depth {args.draft_max}: rewind replay {kib(replay_state)} "
          f"(recurrent + conv + records) vs llama.cpp's scheme {kib(snapshot_state)} "
          f"(recurrent + conv + {args.draft_max} snapshots) = {snapshot_state / replay_state:.1f}x less")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
