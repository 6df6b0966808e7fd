#!/usr/bin/env python3
"""Tree drafts against chains in tokens/s, with the adaptive policy choosing shapes: for each proposer, several
invocations of `rewind bench spec --interleave` with a chain row and a tree row at the same depth.

    scripts/tree_speed.py -m models/stdlib-target-q8_0.gguf [--spec ngram,mtp] [--draft-max 4] [--nodes 32]
        [--invocations 8] [--reps 6] [--prompts FILE.jsonl --max-prompts N --chat]

Within an invocation the plain, chain and tree configurations take turns rep by rep (--interleave), so a drift
of the machine's speed lands on all three; the tree row comes first in half of the invocations, because the
configuration that runs later in a turn was measured up to 5 % faster on this shared machine. Prints, per
proposer, the medians over the invocations of tree/chain output tokens/s (prefill included, as the bench counts
it) and of chain/tree time per output token (decode only), each configuration's speed-up over plain, and the
share of rounds the policy drafted a tree in. Greedy; a row that differs from plain decoding stops the script.
Standard library only.
"""
import argparse
import json
import statistics
import subprocess
import sys


def invocation(args, spec, tree_first):
    budgets = f"{args.nodes},0" if tree_first else f"0,{args.nodes}"
    cmd = [args.rewind, "bench", "spec", "-m", args.model, "--prompts", args.prompts, "--spec", spec,
           "--rollback", "replay", "--draft-max", str(args.draft_max), "--draft-tree-nodes", budgets,
           "--slots", "1", "-r", str(args.reps), "-n", str(args.n), "-t", str(args.threads), "--interleave",
           "--max-prompts", str(args.max_prompts), "--json"] + (["--chat"] if args.chat else [])
    rows = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["rows"]
    by_nodes = {}
    for row in rows:
        if row["spec"] == "none":
            continue
        if row["error"] or row["identical_to_plain"] is False:
            sys.exit(f"tree_speed: {spec} with {row['tree_nodes']} nodes: {row['error'] or 'differs from plain'}")
        by_nodes[row["tree_nodes"]] = row
    return by_nodes[0], by_nodes[args.nodes]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--rewind", default="build/apps/rewind")
    parser.add_argument("--prompts", default="bench/prompts/stdlib-heldout.jsonl")
    parser.add_argument("--spec", default="ngram,mtp")
    parser.add_argument("--draft-max", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--invocations", type=int, default=8)
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("-n", type=int, default=128)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--max-prompts", type=int, default=0, help="the first N prompts of the file (0: all)")
    parser.add_argument("--chat", action="store_true", help="format each prompt with the model's chat template")
    args = parser.parse_args()
    if args.nodes < 1 or args.invocations < 1:
        sys.exit("tree_speed: --nodes and --invocations must be >= 1")

    print(f"| proposer | tree/chain tok/s | chain/tree TPOT | chain vs plain | tree vs plain | tree rounds |")
    print("|---|---:|---:|---:|---:|---:|")
    for spec in args.spec.split(","):
        speed, tpot, chain_gain, tree_gain, tree_share = [], [], [], [], []
        for i in range(args.invocations):
            chain, tree = invocation(args, spec, tree_first=i % 2 == 1)
            speed.append(tree["tokens_per_second"]["median"] / chain["tokens_per_second"]["median"])
            tpot.append(chain["tpot_ms"]["p50"] / tree["tpot_ms"]["p50"])
            chain_gain.append(chain["speedup_vs_plain"])
            tree_gain.append(tree["speedup_vs_plain"])
            tree_share.append(tree["tree_rounds"] / max(1, tree["rounds"]))
            print(f"{spec} {i + 1}/{args.invocations}: tree/chain {speed[-1]:.3f}, TPOT {tpot[-1]:.3f}, "
                  f"vs plain {chain_gain[-1]:.2f}/{tree_gain[-1]:.2f}, trees in {tree_share[-1]:.1%} of rounds",
                  file=sys.stderr, flush=True)
        med = statistics.median
        print(f"| {spec} | {med(speed):.3f} ({min(speed):.2f}–{max(speed):.2f}) | {med(tpot):.3f} "
              f"({min(tpot):.2f}–{max(tpot):.2f}) | {med(chain_gain):.2f}× | {med(tree_gain):.2f}× | "
              f"{med(tree_share):.1%} |", flush=True)


if __name__ == "__main__":
    main()
