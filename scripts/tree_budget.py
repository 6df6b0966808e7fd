#!/usr/bin/env python3
"""Tree drafts against chains at the same verified-token budget: accepted drafts per verify of the best chain of
at most B tokens beside the best tree of B nodes, for each proposer, from `rewind bench spec --fixed-draft`.

    scripts/tree_budget.py -m models/stdlib-target-q8_0.gguf [--spec mtp,ngram,oracle] [--budgets 4,8,16,32]
        [--topk 2,4] [--depths 2,3,4,6,8,12,16,24,32] [--oracle-error-rates 0.3,0.5] [--markdown]

Each --topk value is one `rewind bench spec` invocation over every depth and budget (tree budgets are nodes;
a tree row whose depth exceeds its budget is a tree of `depth` nodes, as the bench drafts it), so a budget's best
tree is the best over depths and branching. Fixed drafts: every round drafts the whole shape, so the numbers
are what the proposer offers, not what the adaptive policy would buy. Speed-ups are each row's against plain
decoding in the same invocation. Standard library only.
"""
import argparse
import json
import subprocess
import sys


def bench(args, spec, oracle_error_rate, topk):
    budgets = ",".join(["0"] + [str(b) for b in args.budgets])
    cmd = [args.rewind, "bench", "spec", "-m", args.model, "--prompts", args.prompts, "--spec", spec,
           "--rollback", "replay", "--draft-max", ",".join(str(d) for d in args.depths),
           "--draft-tree-nodes", budgets, "--draft-tree-topk", str(topk), "--slots", "1", "-r", "1",
           "-n", str(args.n), "-t", str(args.threads), "--fixed-draft", "--max-prompts", str(args.max_prompts),
           "--ngram-min", str(args.ngram_min), "--oracle-error-rate", str(oracle_error_rate), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [r for r in json.loads(out)["rows"] if r["spec"] != "none"]
    for row in rows:
        if row["error"]:
            sys.exit(f"tree_budget: {row['spec']} depth {row['draft_max']} failed: {row['error']}")
        if row["identical_to_plain"] is False:
            sys.exit(f"tree_budget: {row['spec']} depth {row['draft_max']} differs from plain decoding")
        row["topk"] = topk
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--rewind", default="build/apps/rewind")
    parser.add_argument("--prompts", default="bench/prompts/stdlib-heldout.jsonl")
    parser.add_argument("--spec", default="mtp,ngram,oracle")
    parser.add_argument("--oracle-error-rates", default="0.3,0.5")
    parser.add_argument("--budgets", default="4,8,16,32")
    parser.add_argument("--topk", default="2,4")
    parser.add_argument("--depths", default="2,3,4,6,8,12,16,24,32")
    parser.add_argument("-n", type=int, default=128)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--max-prompts", type=int, default=8)
    parser.add_argument("--ngram-min", type=int, default=2)
    parser.add_argument("--markdown", action="store_true", help="one markdown table, ratios only")
    args = parser.parse_args()
    args.budgets = [int(b) for b in args.budgets.split(",")]
    args.depths = [int(d) for d in args.depths.split(",")]
    if min(args.budgets) < 1 or min(args.depths) < 1:
        sys.exit("tree_budget: budgets and depths must be >= 1")

    # (label, spec, error rate): the oracle once per error rate, the others once.
    runs = []
    for spec in args.spec.split(","):
        if spec == "oracle":
            runs += [(f"oracle, {float(e):.0%} wrong", spec, float(e)) for e in args.oracle_error_rates.split(",")]
        else:
            runs.append((spec, spec, 0.3))
    table = []
    for label, spec, error_rate in runs:
        rows = []
        for topk in [int(k) for k in args.topk.split(",")]:
            rows += bench(args, spec, error_rate, topk)
        cells = []
        for budget in args.budgets:
            chains = [r for r in rows if not r["tree_nodes"] and r["draft_max"] <= budget]
            trees = [r for r in rows if r["tree_nodes"] and r["tree_rounds"] > 0 and
                     max(r["tree_nodes"], r["draft_max"]) == budget]
            if not chains or not trees:
                cells.append(None)
                continue
            chain = max(chains, key=lambda r: r["accepted_per_round"])
            tree = max(trees, key=lambda r: r["accepted_per_round"])
            cells.append((chain, tree))
        table.append((label, cells))

    if args.markdown:
        print("| proposer | " + " | ".join(f"budget {b}: chain / tree" for b in args.budgets) + " |")
        print("|---|" + "---:|" * len(args.budgets))
        for label, cells in table:
            text = []
            for cell in cells:
                if cell is None:
                    text.append("-")
                    continue
                chain, tree = cell
                ratio = tree["accepted_per_round"] / chain["accepted_per_round"]
                text.append(f"{chain['accepted_per_round']:.2f} / {tree['accepted_per_round']:.2f} ({ratio:.2f}×)")
            print(f"| {label} | " + " | ".join(text) + " |")
        return
    for label, cells in table:
        for budget, cell in zip(args.budgets, cells):
            if cell is None:
                print(f"{label:20} budget {budget:3}: no tree of that size was verified")
                continue
            chain, tree = cell
            ratio = tree["accepted_per_round"] / chain["accepted_per_round"]
            print(f"{label:20} budget {budget:3}: chain k={chain['draft_max']:<2} {chain['accepted_per_round']:.2f} "
                  f"({chain['speedup_vs_plain']:.2f}x plain)   tree depth {tree['draft_max']:<2} top-{tree['topk']} "
                  f"{tree['accepted_per_round']:.2f} ({tree['speedup_vs_plain']:.2f}x plain, "
                  f"{tree['verified_per_round']:.1f} verified)   {ratio:.2f}x")


if __name__ == "__main__":
    main()
