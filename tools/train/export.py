"""Export a train.py checkpoint: HF checkpoint folder (with the MTP block as mtp.*, the names real Qwen3.5
checkpoints use) -> llama.cpp's convert_hf_to_gguf.py -> f32 / f16 GGUF -> llama-quantize Q8_0.

The conversion goes through tools/zoo/convert_qwen2pre.py, which runs the converter unchanged except that it
names the BPE pre-tokenizer "qwen2" (the converter knows pre-tokenizers by a hash of known vocabularies).
llama.cpp is found through LLAMA_CPP_DIR (default: the checkout the zoo was made with).
"""
import argparse, json, os, shutil, subprocess, sys
from pathlib import Path
import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3_5TextConfig
import model as M

REPO = Path(__file__).resolve().parents[2]
CONVERT = REPO / "tools/zoo/convert_qwen2pre.py"
LLAMA = Path(os.environ.get("LLAMA_CPP_DIR", "/work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp"))


def load_checkpoint(path: Path) -> M.Qwen35WithMTP:
    if not path.is_file():
        raise SystemExit(f"export: no checkpoint at {path}")
    state = torch.load(path, weights_only=False)
    net = M.Qwen35WithMTP(Qwen3_5TextConfig.from_dict(state["config"]))
    net.load_state_dict(state["model"])
    return net.eval()


def write_hf(net: M.Qwen35WithMTP, data: Path, hf: Path):
    hf.mkdir(parents=True, exist_ok=True)
    net.lm.save_pretrained(str(hf), safe_serialization=True)
    if net.mtp is not None:
        f = hf / "model.safetensors"
        sd = load_file(str(f))
        sd.update({f"mtp.{k}": v.detach().contiguous().clone() for k, v in net.mtp.state_dict().items()})
        save_file(sd, str(f), metadata={"format": "pt"})
    cfg = json.loads((hf / "config.json").read_text())
    cfg["architectures"] = ["Qwen3_5ForCausalLM"]
    (hf / "config.json").write_text(json.dumps(cfg, indent=1))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(data / name, hf / name)


def run(cmd):
    print("+", " ".join(map(str, cmd)), flush=True)
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, env={**os.environ, "ZOO_RAW_CONFIG": "0"})
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-6000:])
        raise SystemExit(f"export: {cmd[0]} failed with exit status {r.returncode}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, required=True, help="ckpt.pt written by train.py")
    ap.add_argument("--data", type=Path, required=True, help="folder written by tokenizer.py (tokenizer files)")
    ap.add_argument("--out", type=Path, required=True, help="output folder: hf/ and the GGUF files")
    ap.add_argument("--name", required=True, help="file name stem, e.g. stdlib-target")
    ap.add_argument("--types", default="f32,f16,q8_0", help="comma-separated subset of f32,f16,q8_0")
    a = ap.parse_args()
    types = a.types.split(",")
    if not set(types) <= {"f32", "f16", "q8_0"}:
        raise SystemExit(f"--types {a.types}: only f32, f16 and q8_0 are made")
    net = load_checkpoint(a.ckpt)
    hf = a.out / "hf"
    write_hf(net, a.data, hf)
    extra = [] if net.mtp is not None else ["--no-mtp"]  # the converter insists on MTP tensors otherwise
    made = {}
    for t in ("f32", "f16"):
        if t in types or (t == "f32" and "q8_0" in types):
            made[t] = a.out / f"{a.name}-{t}.gguf"
            run([sys.executable, CONVERT, hf, "--outtype", t, "--outfile", made[t], *extra])
    if "q8_0" in types:
        made["q8_0"] = a.out / f"{a.name}-q8_0.gguf"
        run([LLAMA / "build/bin/llama-quantize", made["f32"], made["q8_0"], "Q8_0", "2"])
        if "f32" not in types:
            made.pop("f32").unlink()
    for t, f in made.items():
        print(f"{f.stat().st_size:>12}  {f}")


if __name__ == "__main__":
    main()
