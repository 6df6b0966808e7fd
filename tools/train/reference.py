"""Reference logits for tests/models/test_trained_reference.cpp: the training framework's own forward
(transformers' Qwen3_5ForCausalLM and model.py's MTP block, in float64) on a short prompt, next to the f32 GGUF
that export.py made from the same checkpoint.

JSON: tokens (the prompt ids), logits[i] = main-head logits at position i (predicting tokens[i+1]),
mtp_positions and mtp_logits[j] = the MTP head at position p = mtp_positions[j]: it reads tokens[p+1] and the
trunk's final hidden state at p, predicts tokens[p+2], and (as in rewind and llama.cpp) attends causally over
the MTP rows 0..p.
"""
import argparse, json, shutil
from pathlib import Path
import torch
from tokenizers import Tokenizer
import export

PROMPT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n"


def rows(t: torch.Tensor) -> list[list[float]]:
    return [[float(f"{v:.7g}") for v in row] for row in t.tolist()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--gguf", type=Path, required=True, help="the f32 export of --ckpt, copied next to the JSON")
    ap.add_argument("--out", type=Path, required=True, help="folder for the GGUF copy and the JSON")
    ap.add_argument("--mtp-positions", default="0,5,11,17,22")
    a = ap.parse_args()
    net = export.load_checkpoint(a.ckpt).double()
    if net.mtp is None:
        raise SystemExit(f"{a.ckpt}: the reference test wants a model with an MTP block")
    ids = Tokenizer.from_file(str(a.data / "tokenizer.json")).encode(PROMPT, add_special_tokens=False).ids
    positions = [int(p) for p in a.mtp_positions.split(",")]
    if max(positions) > len(ids) - 2:
        raise SystemExit(f"--mtp-positions: the prompt has {len(ids)} tokens, so MTP rows run 0..{len(ids) - 2}")
    with torch.no_grad():
        logits, mtp_logits = net(torch.tensor([ids]))
        f32_logits, _ = export.load_checkpoint(a.ckpt)(torch.tensor([ids]))
    print(f"{len(ids)} tokens; max |float64 - float32 forward| of the main head: "
          f"{(logits.float() - f32_logits).abs().max().item():.2e}")
    a.out.mkdir(parents=True, exist_ok=True)
    shutil.copy(a.gguf, a.out / a.gguf.name)
    doc = {
        "model": a.gguf.name,
        "made_by": "tools/train/reference.py (transformers Qwen3_5ForCausalLM + tools/train/model.py MTPBlock, float64)",
        "prompt": PROMPT, "tokens": ids,
        "logits": rows(logits[0]),
        "mtp_positions": positions, "mtp_logits": rows(mtp_logits[0, positions]),
    }
    out = a.out / (a.gguf.stem + ".json")
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
