"""Held-out code prompts for measuring speculation on the trained models (bench/prompts/stdlib-heldout.jsonl).

Rule (fixed, so the prompts follow from the corpus split alone): take the held-out files in path order; in
each, find the first line at or after line 40 that starts a function (`def ` after optional indentation) and
is followed by at least 20 more lines; the prompt is the text up to and including that line, cut at a line
start so that it keeps at most --chars characters. Files without such a line are skipped. The model then writes
the function body, code it has never seen.
"""
import argparse
import json
import re
from pathlib import Path

import corpus

DEF_LINE = re.compile(r"^\s*def \w")


def prompt_of(text: str, max_chars: int, first_line: int = 40, lines_after: int = 20) -> str | None:
    lines = text.splitlines(keepends=True)
    for i in range(first_line, len(lines) - lines_after):
        if not DEF_LINE.match(lines[i]):
            continue
        head = lines[: i + 1]
        start = 0
        while sum(len(line) for line in head[start:]) > max_chars:
            start += 1
        if start > i:
            return None
        return "".join(head[start:])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stdlib", type=Path, default=corpus.stdlib_root())
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--chars", type=int, default=1200)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    prompts = []
    for rel, text in corpus.split(a.stdlib)["heldout"]:
        prompt = prompt_of(text, a.chars)
        if prompt:
            prompts.append({"prompt": prompt, "source": rel})
        if len(prompts) == a.count:
            break
    if len(prompts) < a.count:
        raise SystemExit(f"prompts: only {len(prompts)} held-out files have a qualifying function")
    a.out.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts))
    print(f"wrote {len(prompts)} prompts to {a.out}: " + ", ".join(p["source"] for p in prompts))


if __name__ == "__main__":
    main()
