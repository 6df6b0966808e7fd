#!/usr/bin/env python3
"""Speculative decoding on a real draft/target pair, rewind beside llama.cpp, same files, prompts and settings.

    scripts/pair_bench.py --target TARGET.gguf --draft DRAFT.gguf [--llama-bin ~/llama.cpp/build/bin]

For each prompt (code completion, code editing, an open question), greedy, one slot, --threads threads, up to
--n-predict tokens (stopping at end of sequence), it runs:
  rewind:    plain, --spec draft (the draft model), --spec ngram          (`rewind run --json`), and with
             --draft-vocab N also the draft model scoring only ids below N
  llama.cpp: plain (llama-completion), draft-simple and ngram-simple      (llama-speculative-simple)
and prints generation tokens/s, the speed-up over the same engine's plain decoding, and draft acceptance.
The prompt is formatted once, by rewind (the model's chat template for the chat prompts), and handed to
llama.cpp as the same text with special tokens parsed; the script checks both engines saw the same number of
prompt tokens. Runs alternate engine by engine and repeat --reps times; medians are reported, because the
machine's speed drifts between runs. Greedy outputs of rewind's three modes must be identical (exactness);
a difference stops the script. Standard library only.
"""
import argparse
import json
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


def rewind_run(args, prompt_ids, mode):
    command = [args.rewind, "run", "-m", args.target, "--prompt-ids", ",".join(map(str, prompt_ids)),
               "-n", str(args.n_predict), "--temp", "0", "-t", str(args.threads), "--json"]
    if mode.startswith("draft"):
        command += ["--spec", "draft", "--draft-model", args.draft, "--draft-max", str(args.draft_max)]
        if mode == "draft-vocab":
            command += ["--draft-vocab", str(args.draft_vocab)]
    elif mode == "ngram":
        command += ["--spec", "ngram", "--draft-max", str(args.draft_max)]
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


def llama_run(args, text, mode):
    bin_dir = Path(args.llama_bin)
    common = ["-m", args.target, "-p", text, "-n", str(args.n_predict), "-t", str(args.threads), "--temp", "0",
              "-c", "4096"]
    if mode == "plain":
        log = run([str(bin_dir / "llama-completion"), *common, "-no-cnv"]).stderr
        prompt = re.search(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens", log)
        evals = re.search(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs", log)
        if not prompt or not evals:
            sys.exit(f"could not read llama-completion's timings:\n{log[-2000:]}")
        seconds, n = float(evals.group(1)) / 1000.0, int(evals.group(2))
        return {"tps": n / seconds, "n": n, "n_prompt": int(prompt.group(1)), "drafted": 0, "accepted": 0}
    spec = ["--spec-draft-n-max", str(args.draft_max)]
    if mode == "draft":
        spec += ["--spec-type", "draft-simple", "-md", args.draft]
    else:
        spec += ["--spec-type", "ngram-simple"]
    log = run([str(bin_dir / "llama-speculative-simple"), *common, *spec]).stderr
    encoded = re.search(r"encoded\s+(\d+) tokens", log)
    decoded = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", log)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", log)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", log)
    if not (encoded and decoded and drafted and accepted):
        sys.exit(f"could not read llama-speculative-simple's summary:\n{log[-2000:]}")
    n, seconds = int(decoded.group(1)), float(decoded.group(2))
    return {"tps": n / seconds, "n": n, "n_prompt": int(encoded.group(1)), "drafted": int(drafted.group(1)),
            "accepted": int(accepted.group(1))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft", required=True)
    parser.add_argument("--rewind", default=str(Path(__file__).resolve().parent.parent / "build/apps/rewind"))
    parser.add_argument("--llama-bin", help="llama.cpp's build/bin (llama-completion, llama-speculative-simple)")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("-n", "--n-predict", type=int, default=192)
    parser.add_argument("--draft-max", type=int, default=8)
    parser.add_argument("-r", "--reps", type=int, default=3)
    parser.add_argument("--draft-vocab", type=int, default=0,
                        help="also run rewind's draft with --draft-vocab N (the draft scores only ids below N)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.threads < 1 or args.n_predict < 1 or args.reps < 1 or not 1 <= args.draft_max <= 32:
        sys.exit("--threads, --n-predict, --reps must be >= 1 and --draft-max in [1, 32]")

    engines = {"rewind": ["plain", "draft", "ngram"] + (["draft-vocab"] if args.draft_vocab else [])}
    if args.llama_bin:
        engines["llama.cpp"] = ["plain", "draft", "ngram"]
    results = []
    for name, kind, text in PROMPTS:
        prompt_ids, llama_text = format_prompt(args, kind, text)
        samples = {(engine, mode): [] for engine, modes in engines.items() for mode in modes}
        for _ in range(args.reps):
            for engine, modes in engines.items():
                for mode in modes:
                    if engine == "rewind":
                        sample = rewind_run(args, prompt_ids, mode)
                    else:
                        sample = llama_run(args, llama_text, mode)
                        if sample["n_prompt"] != len(prompt_ids):
                            sys.exit(f"{name}: llama.cpp read {sample['n_prompt']} prompt tokens, rewind {len(prompt_ids)}")
                    samples[(engine, mode)].append(sample)
        plain_ids = samples[("rewind", "plain")][0]["ids"]
        for mode in engines["rewind"][1:]:
            for sample in samples[("rewind", mode)]:
                if sample["ids"] != plain_ids:
                    sys.exit(f"{name}: rewind --spec {mode} emitted other tokens than plain decoding")
        for engine, modes in engines.items():
            plain_tps = statistics.median(s["tps"] for s in samples[(engine, "plain")])
            for mode in modes:
                runs = samples[(engine, mode)]
                tps = statistics.median(s["tps"] for s in runs)
                drafted = sum(s["drafted"] for s in runs)
                accepted = sum(s["accepted"] for s in runs)
                results.append({"prompt": name, "engine": engine, "mode": mode, "prompt_tokens": len(prompt_ids),
                                "generated": runs[0]["n"], "tokens_per_second": tps, "speedup": tps / plain_tps,
                                "acceptance": accepted / drafted if drafted else None})

    print("| prompt | engine | mode | tokens | tokens/s | vs plain | acceptance |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in results:
        acceptance = f"{100 * r['acceptance']:.0f} %" if r["acceptance"] is not None else "–"
        print(f"| {r['prompt']} | {r['engine']} | {r['mode']} | {r['generated']} | {r['tokens_per_second']:.2f} | "
              f"{r['speedup']:.2f}× | {acceptance} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
