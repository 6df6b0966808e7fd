"""The training corpus: the Python standard library's own sources, split into train and held-out files.

Split rule (fixed, so every machine with the same stdlib gets the same split): a file is held out when the
first byte of sha256(its path relative to the stdlib root, '/'-separated, UTF-8) is below 13 (about 5 %).
site-packages and dist-packages are third-party code, not the stdlib, so they are left out; files that are not
valid UTF-8 (a few encoding tests) are skipped. Documents are joined with <|endoftext|>.
"""
import argparse, hashlib, sysconfig
from pathlib import Path

EOT = "<|endoftext|>"
HELD_OUT_BELOW = 13


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def files(root: Path) -> list[tuple[str, Path]]:
    if not root.is_dir():
        raise SystemExit(f"corpus: stdlib folder {root} does not exist")
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.split("/")[0] in ("site-packages", "dist-packages") or "__pycache__" in rel:
            continue
        out.append((rel, p))
    if not out:
        raise SystemExit(f"corpus: no .py files under {root}")
    return out


def is_held_out(rel: str) -> bool:
    return hashlib.sha256(rel.encode("utf-8")).digest()[0] < HELD_OUT_BELOW


def split(root: Path) -> dict[str, list[tuple[str, str]]]:
    """{'train': [(rel, text)], 'heldout': [(rel, text)]}, each sorted by relative path."""
    parts = {"train": [], "heldout": []}
    for rel, p in files(root):
        try:
            text = p.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        parts["heldout" if is_held_out(rel) else "train"].append((rel, text))
    return parts


def digest(docs: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for rel, text in docs:
        h.update(rel.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser(description="Show the corpus split.")
    ap.add_argument("--stdlib", type=Path, default=stdlib_root())
    ap.add_argument("--list", choices=("train", "heldout"))
    a = ap.parse_args()
    parts = split(a.stdlib)
    if a.list:
        print("\n".join(rel for rel, _ in parts[a.list]))
        return
    for k, docs in parts.items():
        print(f"{k}: {len(docs)} files, {sum(len(t) for _, t in docs)} chars, digest {digest(docs)}")


if __name__ == "__main__":
    main()
