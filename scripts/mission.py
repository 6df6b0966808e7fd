#!/usr/bin/env python3
"""rewind's point in one run: exact speculative decoding on a hybrid model (Gated DeltaNet + attention), with
little rollback state, and a policy that speculates only where it pays. Called by scripts/demo.sh.

For one held-out code prompt, the hybrid trained for this repository (models/) decodes greedily with each
proposer in turn: its own MTP head, then n-gram lookup; with --draft-model (and --draft-target), a real
draft/target pair on a code prompt as chat too. Each proposer's runs of `rewind run --json` alternate with
plain runs of the same prompt (--reps times; medians, since single runs on a shared machine are noisy), then
one more with --rollback snapshot, rewind's implementation of llama.cpp's scheme (one full recurrent + conv
state per draft position), reads the state that scheme holds. Printed per proposer: whether the output equals
plain decoding, the acceptance by draft position, generation tokens/s against plain, and the rollback state of
both schemes. Exits 1 if any output differs from plain decoding. Standard library only.
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(args, model, prompt, chat, extra):
    command = [args.rewind, "run", "-m", str(model), "-p", prompt, "-n", str(args.n_predict), "--temp", "0",
               "--ignore-eos", "-t", str(args.threads), "--json", *extra]
    if chat:
        command.append("--chat")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"mission: {' '.join(command[:4])} ... failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout)


def rollback_bytes(state):
    """The state a rollback scheme needs: the live recurrent + conv state and what it keeps to undo drafts."""
    return sum(state.get(part, 0) for part in ("recurrent", "conv", "records", "snapshots", "checkpoint_copies"))


def kib(n):
    return f"{n / 1024:.1f} KiB"


def prompt_of(path, index):
    lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    if not 0 <= index < len(lines):
        sys.exit(f"mission: --index {index} outside the {len(lines)} prompts of {path}")
    return json.loads(lines[index])


def section(args, title, model, entry, chat, proposers, kind="held-out code"):
    """Plain decoding and each proposer of `proposers` (name, label, spec arguments), runs alternated."""
    prompt = entry["prompt"]
    runs = {"plain": []}
    for name, _, _ in proposers:
        runs[name] = []
    for _ in range(args.reps):
        runs["plain"].append(run(args, model, prompt, chat, []))
        for name, _, spec in proposers:
            runs[name].append(run(args, model, prompt, chat, spec))
    plain = runs["plain"][0]
    plain_tps = statistics.median(r["timings"]["generation_tokens_per_second"] for r in runs["plain"])
    print(f"== {title}")
    tail = "".join(prompt.splitlines(keepends=True)[-4:])
    print(f"prompt ({entry.get('source', kind)}, {len(plain['prompt_ids'])} tokens), last lines:")
    print(tail.rstrip("\n"))
    print("---- generated (greedy; every proposer's output below is checked against it) ----")
    print(plain["text"].rstrip("\n"))
    print("----")
    identical_all = True
    for name, label, spec in proposers:
        snapshot = run(args, model, prompt, chat, spec + ["--rollback", "snapshot"])
        identical = all(r["ids"] == plain["ids"] for r in runs[name] + [snapshot])
        identical_all = identical_all and identical
        tps = statistics.median(r["timings"]["generation_tokens_per_second"] for r in runs[name])
        stats = runs[name][0]["spec"]
        policy = stats["policy"]
        by_position = ", ".join(f"{p['rate']:.2f}" for p in stats["acceptance_by_position"]) or "-"
        print(f"-- {label}")
        print(f"   output identical to plain decoding: {'yes' if identical else 'NO (a bug)'}")
        rate = f" ({100 * stats['acceptance_rate']:.0f} %)" if stats["drafted"] else ""
        print(f"   acceptance: {stats['accepted']} of {stats['drafted']} drafted tokens{rate}; "
              f"by draft position: {by_position}; {stats['rounds']} rounds, {policy['plain_steps']} plain steps")
        print(f"   speed ({args.threads} thread(s), median of {args.reps}, runs alternated with plain): "
              f"plain {plain_tps:.1f} tokens/s, {name} {tps:.1f} tokens/s = {tps / plain_tps:.2f}x")
        replay_state = rollback_bytes(runs[name][0]["state"])
        snapshot_state = rollback_bytes(snapshot["state"])
        if snapshot_state == 0:
            print("   rollback state: attention only, so a rollback truncates KV rows in either scheme")
        else:
            depth = stats["policy"]["rounds_by_length"]
            print(f"   rollback state at draft depth {len(depth) - 1}: rewind replay {kib(replay_state)} "
                  f"(recurrent + conv + records) vs llama.cpp's scheme {kib(snapshot_state)} "
                  f"(recurrent + conv + a snapshot per draft position) = {snapshot_state / replay_state:.1f}x less")
    print()
    return identical_all


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rewind", required=True)
    parser.add_argument("--model", default=str(ROOT / "models/stdlib-target-q8_0.gguf"))
    parser.add_argument("--prompts", default=str(ROOT / "bench/prompts/stdlib-heldout.jsonl"),
                        help="JSONL prompts; the --index-th is used")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--draft-target", help="a target model for --draft-model (e.g. Qwen2.5-Coder-1.5B)")
    parser.add_argument("--draft-model", help="its draft model (e.g. Qwen2.5-Coder-0.5B)")
    parser.add_argument("--draft-prompts", default=str(ROOT / "bench/prompts/code.jsonl"),
                        help="JSONL prompts for the pair, asked as chat; the --index-th is used")
    parser.add_argument("-n", "--n-predict", type=int, default=160)
    parser.add_argument("--draft-max", type=int, default=3)
    parser.add_argument("-t", "--threads", type=int, default=1,
                        help="threads (default 1: a 10 M-parameter model gains nothing from more)")
    parser.add_argument("-r", "--reps", type=int, default=5)
    args = parser.parse_args()
    if not Path(args.model).is_file():
        sys.exit(f"mission: model {args.model} not found")
    depth = ["--draft-max", str(args.draft_max)]
    identical = section(args, "The trained hybrid (Gated DeltaNet + attention, 10 M parameters), held-out code",
                        args.model, prompt_of(args.prompts, args.index), False,
                        [("mtp", "MTP: the model's own next-token head drafts", ["--spec", "mtp", *depth]),
                         ("ngram", "n-gram lookup in the prompt and output", ["--spec", "ngram", *depth])])
    if args.draft_model:
        if not args.draft_target or not Path(args.draft_target).is_file() or not Path(args.draft_model).is_file():
            sys.exit("mission: --draft-model needs --draft-target, and both files")
        pair_args = argparse.Namespace(**{**vars(args), "threads": 2, "reps": 3, "n_predict": 96})
        identical = section(pair_args, "A real pair: Qwen2.5-Coder-0.5B drafting for 1.5B (attention only), code "
                            "as chat", args.draft_target, prompt_of(args.draft_prompts, args.index), True,
                            [("draft", "the 0.5B drafts", ["--spec", "draft", "--draft-model", args.draft_model])],
                            kind="a code prompt") and identical
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
