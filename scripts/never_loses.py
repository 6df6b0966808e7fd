#!/usr/bin/env python3
"""Does the adaptive policy (the default) ever lose to plain decoding? The grid of issue 39, one command.

    scripts/never_loses.py [--rewind build/apps/rewind] [--workloads oracle,mtp,ngram-prose,draft]
        [-n 48,512] [--slots 1,4] [--reps 9,3] [--json results.json]

Each workload is one `rewind bench spec --interleave` invocation per generation length: plain decoding and the
adaptive proposer on the same prompts, their reps taking turns (so the machine's drift lands on both), at each
slot count, greedy, the rollback policy replay, the engine's default draft length (8) unless the workload says
otherwise. Workloads:

  oracle-E     the trained hybrid (models/stdlib-target-q8_0.gguf), held-out code prompts, oracle drafts with a
               fraction E of wrong tokens, E in 0, 0.3, 0.7, 0.9, 1.0
  mtp          the trained hybrid with its own MTP head, every held-out prompt
  ngram-prose  Qwen2.5-Coder-1.5B-Instruct answering open questions (bench/prompts/knowledge.jsonl as chat, the
               first four): prose that repeats little of its prompt or of itself
  draft-KIND   Qwen2.5-Coder-0.5B drafting for 1.5B (Q4_K_M, scripts/fetch_models.sh), chat prompts of each
               kind: code, prose, knowledge (the first four of each)

Prints one row per workload, length and slot count: plain and adaptive tokens/s (medians of the interleaved
reps, prefill included, as bench spec reports them), their ratio, the time per output token ratio, how the
policy spent its steps, and whether the output equalled plain decoding's. Exits 1 when any adaptive row falls
below --floor (0.97) or differs from plain. Workloads whose models are missing are skipped with a note.
Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("REWIND_MODEL_CACHE", Path.home() / ".cache/rewind/models"))
HYBRID = ROOT / "models/stdlib-target-q8_0.gguf"
HELD_OUT = ROOT / "bench/prompts/stdlib-heldout.jsonl"
QWEN_TARGET = CACHE / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_DRAFT = CACHE / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def workloads():
    out = {}
    for error in ("0", "0.3", "0.7", "0.9", "1.0"):
        out[f"oracle-{error}"] = dict(model=HYBRID, prompts=HELD_OUT, spec="oracle",
                                      extra=["--oracle-error-rate", error, "--max-prompts", "4"])
    out["mtp"] = dict(model=HYBRID, prompts=HELD_OUT, spec="mtp", extra=["--draft-max", "3"])
    out["ngram-prose"] = dict(model=QWEN_TARGET, prompts=ROOT / "bench/prompts/knowledge.jsonl", spec="ngram",
                              extra=["--chat", "--max-prompts", "4"])
    for kind in ("code", "prose", "knowledge"):
        out[f"draft-{kind}"] = dict(model=QWEN_TARGET, prompts=ROOT / f"bench/prompts/{kind}.jsonl", spec="draft",
                                    extra=["--chat", "--max-prompts", "4", "--draft-model", str(QWEN_DRAFT)],
                                    needs=[QWEN_DRAFT])
    return out


def run_workload(args, name, workload, n_gen, reps):
    command = [args.rewind, "bench", "spec", "-m", str(workload["model"]), "--prompts", str(workload["prompts"]),
               "--spec", workload["spec"], "--rollback", "replay", "--slots", args.slots, "-r", str(reps),
               "-n", str(n_gen), "-t", str(args.threads), "-c", "2048", "--interleave", "--json"]
    extra = list(workload["extra"])
    if "--draft-max" not in extra:
        extra += ["--draft-max", "8"]
    command += extra
    print(f"never_loses: {name}, -n {n_gen}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"never_loses: {name} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rewind", default=str(ROOT / "build/apps/rewind"))
    parser.add_argument("--workloads", default="oracle,mtp,ngram-prose,draft",
                        help="names or prefixes, comma-separated (oracle selects every oracle-E)")
    parser.add_argument("-n", "--n-gen", default="48,512", help="generation lengths, comma-separated")
    parser.add_argument("--slots", default="1,4")
    parser.add_argument("-r", "--reps", default="9,3",
                        help="reps per generation length, comma-separated like -n (one value: all lengths)")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--floor", type=float, default=0.97)
    parser.add_argument("--json", help="write every invocation's results here")
    args = parser.parse_args()
    wanted = args.workloads.split(",")
    chosen = {name: w for name, w in workloads().items()
              if any(name == p or name.startswith(p + "-") for p in wanted)}
    if not chosen:
        sys.exit(f"never_loses: no workload matches {args.workloads}")
    machine = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                   "unknown CPU")
    print(f"machine: {machine}, {os.cpu_count()} cores, {args.threads} threads")
    print("| workload | -n | slots | plain tok/s | adaptive tok/s | vs plain | TPOT ratio | rounds / plain steps "
          "| acceptance | identical |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    everything = []
    failures = []
    for name, workload in chosen.items():
        missing = [p for p in [workload["model"], *workload.get("needs", [])] if not Path(p).is_file()]
        if missing:
            print(f"never_loses: skipping {name}: {', '.join(map(str, missing))} not found "
                  "(scripts/fetch_models.sh)", file=sys.stderr)
            continue
        lengths = [int(x) for x in args.n_gen.split(",")]
        reps = [int(x) for x in args.reps.split(",")]
        reps = reps * len(lengths) if len(reps) == 1 else reps
        if len(reps) != len(lengths):
            sys.exit("never_loses: --reps needs one value or one per -n length")
        for n_gen, n_reps in zip(lengths, reps):
            results = run_workload(args, name, workload, n_gen, n_reps)
            everything.append({"workload": name, "n_gen": n_gen, "results": results})
            plain = {row["slots"]: row for row in results["rows"] if row["spec"] == "none"}
            for row in results["rows"]:
                if row["spec"] == "none":
                    continue
                if row["error"]:
                    failures.append(f"{name} -n {n_gen} {row['slots']} slot(s): {row['error']}")
                    continue
                base = plain[row["slots"]]
                speedup = row["speedup_vs_plain"]
                tpot = base["tpot_ms"]["p50"] / row["tpot_ms"]["p50"] if row["tpot_ms"]["p50"] else float("nan")
                identical = row["identical_to_plain"] is not False
                acceptance = row["acceptance_rate"]
                print(f"| {name} | {n_gen} | {row['slots']} | {base['tokens_per_second']['median']:.1f} "
                      f"| {row['tokens_per_second']['median']:.1f} | {speedup:.3f}x | {tpot:.3f} "
                      f"| {row['rounds']} / {row['plain_steps']} "
                      f"| {'-' if acceptance is None else f'{100 * acceptance:.0f} %'} "
                      f"| {'yes' if identical else 'NO'} |", flush=True)
                if speedup < args.floor or not identical:
                    failures.append(f"{name} -n {n_gen} {row['slots']} slot(s): {speedup:.3f}x"
                                    f"{'' if identical else ', output differs from plain'}")
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))
    if failures:
        print("below the floor or not identical:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"every adaptive row >= {args.floor}x plain and identical to it")


if __name__ == "__main__":
    main()
