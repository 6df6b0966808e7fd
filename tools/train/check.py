"""Greedy agreement of exported files: rewind and llama.cpp (through refgen, the zoo's libllama reference
program) on the same prompt must give the same ids; with --mtp, rewind's --spec mtp run must give the plain run's
ids (speculation is exact). Where llama.cpp and rewind part, the step's top-2 margin in llama.cpp is shown: a
margin near zero is a near tie, not a disagreement about the model.
"""
import argparse, json, os, subprocess, tempfile
from pathlib import Path

REWIND = os.environ.get("REWIND", "build/apps/rewind")
REFGEN = os.environ.get("REFGEN", "/work/llama/refgen/refgen")


def rewind_ids(gguf: Path, prompt: str, n: int, *extra) -> list[int]:
    r = subprocess.run([REWIND, "run", "-m", str(gguf), "-p", prompt, "-n", str(n), "--temp", "0", "--json",
                        "-t", "2", *extra], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"rewind failed on {gguf} {' '.join(extra)}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)["ids"]


def llama_ids(gguf: Path, prompt: str, n: int) -> tuple[list[int], list[float]]:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "ref.json"
        r = subprocess.run([REFGEN, "-m", str(gguf), "-n", str(n), "-t", "2", "-o", str(out), "--text", prompt],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"refgen (llama.cpp) failed on {gguf}:\n{r.stderr[-3000:]}")
        doc = json.loads(out.read_text())
    return doc["greedy"]["ids"], [s["margin"] for s in doc["steps"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("-p", "--prompt", default="def ")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--mtp", action="store_true", help="also check rewind --spec mtp")
    a = ap.parse_args()
    failed = False
    for f in a.files:
        ours = rewind_ids(f, a.prompt, a.n)
        theirs, margins = llama_ids(f, a.prompt, a.n)
        same = ours == theirs
        line = f"{f.name}: rewind {ours}\n{'':{len(f.name)}}  llama  {theirs}  {'same' if same else 'DIFFER'}"
        if not same:
            k = next(i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y)
            line += f" from step {k} (llama.cpp top-2 margin there {margins[k]:.4f})"
            failed = True
        if a.mtp:
            spec = rewind_ids(f, a.prompt, a.n, "--spec", "mtp")
            line += f"\n{'':{len(f.name)}}  --spec mtp {'same as plain' if spec == ours else f'DIFFERS: {spec}'}"
            failed |= spec != ours
        print(line, flush=True)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
