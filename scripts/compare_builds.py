#!/usr/bin/env python3
"""Two rewind builds, the same outputs: greedy ids, top logprobs and drafts, bit for bit.

    scripts/compare_builds.py --before OLD/build/apps/rewind [--after build/apps/rewind] [--dtypes f32,q8_0]

For a refactor that must not change a bit (issue 40's compute seam): over every architecture the `mkmodel`
generator knows (a tiny random model of each, written by the --after build), every proposer the architecture
supports (none, ngram, oracle, draft with a noisy twin, mtp where it has an MTP block), every rollback policy
(replay, snapshot, checkpoint; models without recurrent state: replay) and 1 and 4 slots (four prompts decoded
together), it runs `rewind run --json --top-logprobs 4 --temp 0 --fixed-draft` with both builds and compares
each prompt's ids and top logprobs (float values printed to round-trip) and, for speculative runs, what was
drafted and accepted at each position (fixed drafts do not depend on timing). The first difference is printed
with its command; the exit status is 1 if any run differs. Standard library only.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ["Once upon a time there was", "def parse(line):\n    fields = line.split(',')\n    return fields",
           "The quick brown fox jumps over the lazy dog. The quick brown fox", "1, 2, 3, 4, 5, 6, 7, 8,"]
POLICIES = ["replay", "snapshot", "checkpoint"]


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"compare_builds: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def architectures(binary):
    done = subprocess.run([binary, "mkmodel", "--arch", "?", "-o", "/dev/null"], capture_output=True, text=True)
    found = re.search(r"available: ([^)]*)\)", done.stderr)
    if not found:
        sys.exit(f"compare_builds: could not read the architectures from {binary} mkmodel:\n{done.stderr}")
    return [name.strip() for name in found.group(1).split(",")]


def essentials(stdout):
    """Per prompt (in prompt order): ids, top logprobs and the speculation's per-position counts."""
    outputs = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        out = json.loads(line)
        spec = out.get("spec", {})
        outputs.append({"prompt": out.get("prompt_index", 0), "ids": out["ids"], "top_logprobs": out["top_logprobs"],
                        "drafted": spec.get("drafted"), "accepted": spec.get("accepted"),
                        "acceptance_by_position": spec.get("acceptance_by_position")})
    return sorted(outputs, key=lambda o: o["prompt"])


def first_difference(a, b, path="output"):
    if type(a) is not type(b):
        return f"{path}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: present in one build only"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} entries vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the rewind binary before the change")
    parser.add_argument("--after", default=str(ROOT / "build/apps/rewind"), help="the rewind binary after it")
    parser.add_argument("--dtypes", default="f32,q8_0", help="weight types of the generated models")
    parser.add_argument("-n", "--n-predict", type=int, default=24)
    parser.add_argument("--archs", help="architectures, comma-separated (default: every one mkmodel knows)")
    args = parser.parse_args()
    archs = args.archs.split(",") if args.archs else architectures(args.after)
    runs = differences = 0
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        prompts_file = work / "prompts.txt"
        prompts_file.write_text("\n".join(p.replace("\n", " ") for p in PROMPTS) + "\n")
        for arch in archs:
            for dtype in args.dtypes.split(","):
                model = work / f"{arch}-{dtype}.gguf"
                run([args.after, "mkmodel", "--arch", arch, "--dtype", dtype, "--seed", "3", "-o", str(model)])
                draft = work / f"{arch}-{dtype}-twin.gguf"
                run([args.after, "mkmodel", "--twin-of", str(model), "--noise", "0.3", "--seed", "4", "-o", str(draft)])
                info = json.loads(run([args.after, "run", "-m", str(model), "-p", "a", "-n", "1", "--temp", "0",
                                       "--json"]).splitlines()[0])
                recurrent = info["state"]["recurrent"] > 0 or info["state"]["conv"] > 0
                proposers = [("none", [])]
                proposers += [("ngram", ["--spec", "ngram", "--ngram-min", "1", "--ngram-max", "3"]),
                              ("oracle", ["--spec", "oracle", "--oracle-error-rate", "0.3"]),
                              ("draft", ["--spec", "draft", "--draft-model", str(draft)])]
                mtp = subprocess.run([args.after, "run", "-m", str(model), "-p", "a", "-n", "1", "--spec", "mtp"],
                                     capture_output=True, text=True).returncode == 0
                if mtp:
                    proposers.append(("mtp", ["--spec", "mtp"]))
                for name, spec in proposers:
                    policies = POLICIES if recurrent and name != "none" else ["replay"]
                    for policy in policies:
                        for slots in (1, 4):
                            common = ["run", "-m", str(model), "-n", str(args.n_predict), "--temp", "0", "-t", "2",
                                      "--json", "--top-logprobs", "4", "--ignore-eos", "--fixed-draft",
                                      "--draft-max", "3", "--rollback", policy, *spec]
                            common += ["-p", PROMPTS[0]] if slots == 1 else ["--prompts-file", str(prompts_file)]
                            before = essentials(run([args.before, *common]))
                            after = essentials(run([args.after, *common]))
                            runs += 1
                            found = first_difference(before, after)
                            label = f"{arch} {dtype} {name} {policy} {slots} slot(s)"
                            if found:
                                differences += 1
                                print(f"DIFFERENT {label}: {found}\n  rewind {' '.join(common)}")
                            else:
                                print(f"same      {label}")
    print(f"\n{runs} runs, {differences} different")
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
