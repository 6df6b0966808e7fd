#!/usr/bin/env python3
"""Speculative decoding on a real draft/target pair, rewind beside llama.cpp, same files, prompts and settings.

    scripts/pair_bench.py --target TARGET.gguf --draft DRAFT.gguf [--llama-bin ~/llama.cpp/build/bin]
    scripts/pair_bench.py --target T.gguf --draft D.gguf --modes plain,mtp,draft,ngram --draft-max 1,3 \
        --prompts bench/prompts/stdlib-heldout.jsonl --temp 0.7 --llama-bin ...

For each prompt (by default code completion, code editing, an open question; or the raw-text prompts of a
--prompts JSONL file), one slot, --threads threads, up to --n-predict tokens (stopping at end of sequence),
greedy unless --temp, it runs each of --modes at each --draft-max:
  rewind:    plain, --spec draft (the draft model, --draft-vocab auto), --spec ngram, --spec mtp
             (`rewind run --json`), and with --draft-vocab V also the draft model with --draft-vocab V (0: every id)
  llama.cpp: plain (llama-completion), draft-simple, ngram-simple, draft-mtp    (llama-speculative-simple)
  baseline:  with --rewind-baseline BIN, rewind's modes again with another build (before and after a change)
and prints generation tokens/s, the speed-up over the same engine's plain decoding, and draft acceptance, per
prompt and pooled over the prompts (speed-up: geometric mean; acceptance: all drafted tokens together).
The prompt is formatted once, by rewind (the model's chat template for the chat prompts), and handed to
llama.cpp as the same text with special tokens parsed; the script checks both engines saw the same number of
prompt tokens. Runs alternate engine by engine and repeat --reps times; medians are reported, because the
machine's speed drifts between runs. Greedy outputs of rewind's modes must be identical (exactness); a
difference stops the script. Sampled runs (--temp > 0) use seed 1 in both engines and are not compared.
Standard library only.
"""
import argparse
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

CODE_COMPLETION = '''import json
from dataclasses import dataclass


@dataclass
class Order:
    order_id: int
    customer: str
    items: list[tuple[str, int, float]]

    def total(self) -> float:
'''

CODE_TO_EDIT = '''def load_users(path):
    users = []
    with open(path) as f:
        for line in f:
            name, age, city = line.strip().split(",")
            users.append({"name": name, "age": int(age), "city": city})
    return users


def oldest_user(users):
    oldest = None
    for user in users:
        if oldest is None or user["age"] > oldest["age"]:
            oldest = user
    return oldest
'''

PROMPTS = [
    ("code completion", "text", CODE_COMPLETION),
    ("code editing", "chat", "Add type hints and a docstring to every function of this code. Reply with the "
                             "whole code only.\n\n" + CODE_TO_EDIT),
    ("open question", "chat", "Why is the sky blue? Answer in one paragraph."),
]


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-3000:]}")
    return result


def rewind_run(args, binary, prompt_ids, mode, depth):
    command = [binary, "run", "-m", args.target, "--prompt-ids", ",".join(map(str, prompt_ids)),
               "-n", str(args.n_predict), "--temp", str(args.temp), "--seed", "1", "-t", str(args.threads), "--json"]
    if mode.startswith("draft"):
        command += ["--spec", "draft", "--draft-model", args.draft, "--draft-max", str(depth)]
        if mode == "draft-vocab":
            command += ["--draft-vocab", str(args.draft_vocab)]
    elif mode in ("ngram", "mtp"):
        command += ["--spec", mode, "--draft-max", str(depth)]
    out = json.loads(run(command).stdout)
    timing = out["timings"]
    spec = out.get("spec", {})
    return {"tps": timing["generation_tokens_per_second"], "ids": out["ids"], "n": timing["generated_tokens"],
            "drafted": spec.get("drafted", 0), "accepted": spec.get("accepted", 0)}


def format_prompt(args, kind, text):
    """The prompt's ids and its text with special tokens spelled out (what llama.cpp is given)."""
    command = [args.rewind, "run", "-m", args.target, "-p", text, "-n", "1", "--temp", "0", "--json"]
    if kind == "chat":
        command.append("--chat")
    out = json.loads(run(command).stdout)
    return out["prompt_ids"], out["prompt_text"]


def llama_summary(command, patterns):
    """Runs a llama.cpp program and reads its closing log lines: one match per pattern, or exits.

    The log echoes the prompt, which may itself say "encoded" or "eval time": only lines that start with the
    logger's timestamp count (not always at a line start: the generated text may lack a newline). llama.cpp
    logs from a worker thread, and now and then the process exits before the last lines are written; the run
    is then repeated with the same settings."""
    for _ in range(5):
        log = run(command).stderr
        found = [re.search(r"\d+\.\d+\.\d+\.\d+ I " + pattern, log) for pattern in patterns]
        if all(found):
            return found
    sys.exit(f"could not read the summary of {' '.join(command)}:\n{log[-2000:]}")


def llama_run(args, text, mode, depth):
    bin_dir = Path(args.llama_bin)
    common = ["-m", args.target, "-p", text, "-n", str(args.n_predict), "-t", str(args.threads), "--temp",
              str(args.temp), "--seed", "1", "-c", "4096", "--no-escape"]  # the prompt is code: keep its backslashes
    if mode == "plain":
        prompt, evals = llama_summary([str(bin_dir / "llama-completion"), *common, "-no-cnv"],
                                      [r"common_perf_print: prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens",
                                       r"common_perf_print:\s+eval time =\s*([\d.]+) ms /\s*(\d+) runs"])
        seconds, n = float(evals.group(1)) / 1000.0, int(evals.group(2))
        return {"tps": n / seconds, "n": n, "n_prompt": int(prompt.group(1)), "drafted": 0, "accepted": 0}
    spec = ["--spec-draft-n-max", str(depth)]
    if mode == "draft":
        spec += ["--spec-type", "draft-simple", "-md", args.draft]
    elif mode == "mtp":
        spec += ["--spec-type", "draft-mtp"]
    else:
        spec += ["--spec-type", "ngram-simple"]
    encoded, decoded, drafted, accepted = llama_summary(
        [str(bin_dir / "llama-speculative-simple"), *common, *spec],
        [r"encoded\s+(\d+) tokens in", r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", r"n_drafted\s*=\s*(\d+)",
         r"n_accept\s*=\s*(\d+)"])
    n, seconds = int(decoded.group(1)), float(decoded.group(2))
    return {"tps": n / seconds, "n": n, "n_prompt": int(encoded.group(1)), "drafted": int(drafted.group(1)),
            "accepted": int(accepted.group(1))}


def load_prompts(path):
    prompts = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        entry = json.loads(line)
        if not isinstance(entry, dict) or not isinstance(entry.get("prompt"), str):
            sys.exit(f"{path} line {number}: expected a JSON object with a string \"prompt\"")
        prompts.append((entry.get("source", f"prompt {len(prompts) + 1}"), "text", entry["prompt"]))
    if not prompts:
        sys.exit(f"{path}: no prompts")
    return prompts


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft", help="draft model (needed for the draft modes)")
    parser.add_argument("--rewind", default=str(Path(__file__).resolve().parent.parent / "build/apps/rewind"))
    parser.add_argument("--rewind-baseline",
                        help="another rewind binary (an earlier build) run as a third engine, 'baseline', with the "
                             "same modes, rep by rep in turn with the others")
    parser.add_argument("--llama-bin", help="llama.cpp's build/bin (llama-completion, llama-speculative-simple)")
    parser.add_argument("--modes", default="plain,draft,ngram",
                        help="comma-separated: plain (always run), draft, ngram, mtp (the target's own MTP layer)")
    parser.add_argument("--prompts", help="JSONL file of raw-text prompts ({\"prompt\": ...}) instead of the built-in three")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("-n", "--n-predict", type=int, default=192)
    parser.add_argument("--draft-max", default="8", help="draft lengths, comma-separated")
    parser.add_argument("--temp", type=float, default=0.0, help="sampling temperature (0: greedy)")
    parser.add_argument("-r", "--reps", type=int, default=3)
    parser.add_argument("--draft-vocab",
                        help="also run rewind's draft with --draft-vocab V (0: it scores every id; N: ids below N)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    depths = [int(d) for d in args.draft_max.split(",") if d]
    modes = [m for m in args.modes.split(",") if m and m != "plain"]
    if args.threads < 1 or args.n_predict < 1 or args.reps < 1 or not depths or not all(1 <= d <= 32 for d in depths):
        sys.exit("--threads, --n-predict, --reps must be >= 1 and every --draft-max in [1, 32]")
    if unknown := [m for m in modes if m not in ("draft", "ngram", "mtp")]:
        sys.exit(f"--modes: unknown {', '.join(unknown)} (known: plain, draft, ngram, mtp)")
    if "draft" in modes and not args.draft:
        sys.exit("--modes draft needs --draft")
    if args.temp < 0:
        sys.exit("--temp must be >= 0")

    rewind_modes = modes + (["draft-vocab"] if args.draft_vocab is not None and "draft" in modes else [])
    engines = {"rewind": [("plain", 0)] + [(m, d) for m in rewind_modes for d in depths]}
    binaries = {"rewind": args.rewind}
    if args.rewind_baseline:
        engines["baseline"] = list(engines["rewind"])
        binaries["baseline"] = args.rewind_baseline
    if args.llama_bin:
        engines["llama.cpp"] = [("plain", 0)] + [(m, d) for m in modes for d in depths]
    results = []
    for name, kind, text in (load_prompts(args.prompts) if args.prompts else PROMPTS):
        prompt_ids, llama_text = format_prompt(args, kind, text)
        samples = {(engine, run): [] for engine, runs in engines.items() for run in runs}
        for _ in range(args.reps):
            for engine, runs in engines.items():
                for mode, depth in runs:
                    if engine in binaries:
                        sample = rewind_run(args, binaries[engine], prompt_ids, mode, depth)
                    else:
                        sample = llama_run(args, llama_text, mode, depth)
                        if sample["n_prompt"] != len(prompt_ids):
                            sys.exit(f"{name}: llama.cpp read {sample['n_prompt']} prompt tokens, rewind {len(prompt_ids)}")
                    samples[(engine, (mode, depth))].append(sample)
        for engine in binaries if args.temp == 0 else ():
            plain_ids = samples[(engine, ("plain", 0))][0]["ids"]
            for run in engines[engine][1:]:
                for sample in samples[(engine, run)]:
                    if sample["ids"] != plain_ids:
                        sys.exit(f"{name}: {engine} --spec {run[0]} --draft-max {run[1]} emitted other tokens than plain")
        for engine, runs in engines.items():
            plain_tps = statistics.median(s["tps"] for s in samples[(engine, ("plain", 0))])
            for mode, depth in runs:
                taken = samples[(engine, (mode, depth))]
                tps = statistics.median(s["tps"] for s in taken)
                results.append({"prompt": name, "engine": engine, "mode": mode, "draft_max": depth,
                                "prompt_tokens": len(prompt_ids), "generated": taken[0]["n"],
                                "tokens_per_second": tps, "speedup": tps / plain_tps,
                                "drafted": sum(s["drafted"] for s in taken),
                                "accepted": sum(s["accepted"] for s in taken)})

    def acceptance_text(drafted, accepted):
        return f"{100 * accepted / drafted:.0f} %" if drafted else "–"

    print("| prompt | engine | mode | k | tokens | tokens/s | vs plain | acceptance |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['prompt']} | {r['engine']} | {r['mode']} | {r['draft_max'] or '–'} | {r['generated']} | "
              f"{r['tokens_per_second']:.2f} | {r['speedup']:.2f}× | {acceptance_text(r['drafted'], r['accepted'])} |")
    prompts = sorted({r["prompt"] for r in results})
    if len(prompts) > 1:
        print(f"\nPooled over {len(prompts)} prompts (speed-up: geometric mean of the per-prompt ratios):\n")
        print("| engine | mode | k | tokens/s (median of prompts) | vs plain | acceptance |")
        print("|---|---|---|---:|---:|---:|")
        for engine, runs in engines.items():
            for mode, depth in runs:
                rows = [r for r in results if r["engine"] == engine and r["mode"] == mode and r["draft_max"] == depth]
                print(f"| {engine} | {mode} | {depth or '–'} | "
                      f"{statistics.median(r['tokens_per_second'] for r in rows):.2f} | "
                      f"{geometric_mean([r['speedup'] for r in rows]):.2f}× | "
                      f"{acceptance_text(sum(r['drafted'] for r in rows), sum(r['accepted'] for r in rows))} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
