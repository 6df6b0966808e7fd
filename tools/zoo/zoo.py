"""Shared helpers for the tiny real-layout model zoo (tests/data/zoo/README.md says what they made and how).

Each make_<family>.py builds a random-init HF checkpoint from a shrunk copy of the
family's published config, converts it with llama.cpp's own convert_hf_to_gguf.py
(through convert_qwen2pre.py, which only forces the BPE pre-tokenizer name "qwen2"),
quantizes it with llama-quantize and records llama.cpp's greedy output with refgen.
"""
import json, math, os, subprocess, sys, codecs, hashlib
from pathlib import Path

# Outputs go under the working folder; llama.cpp (a built checkout) and refgen (the libllama reference program)
# are found through LLAMA_CPP_DIR and REFGEN, defaulting to where they were when the zoo was made.
ZOO = Path.cwd()
SCRIPTS = Path(__file__).resolve().parent
LLAMA = Path(os.environ.get("LLAMA_CPP_DIR", "/work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp"))
BIN = LLAMA / "build/bin"
REFGEN = os.environ.get("REFGEN", "/work/llama/refgen/refgen")
PROMPT_TEXT = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,"  # the text of tests/data/*-tiny-f32.json prompts
OUT = ZOO / "out"
HF = ZOO / "hf"
VOCAB = 512

def corpus() -> str:
    import this  # noqa: F401  (prints the Zen; harmless)
    zen = codecs.decode(this.s, "rot13")
    fox = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,"
    return "\n".join([zen, fox] * 4)

def build_tokenizer(d: Path):
    """Byte-level BPE, 512 entries: 256 byte symbols, merges learned on a fixed text,
    special tokens <|endoftext|>, <|im_start|>, <|im_end|>. GPT-2/Qwen2-style pre-tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, Regex
    tok = Tokenizer(models.BPE())
    qwen2_pat = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(qwen2_pat), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([corpus()], trainer=trainer)
    d.mkdir(parents=True, exist_ok=True)
    tok.save(str(d / "tokenizer.json"))
    n = tok.get_vocab_size()
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "unk_token": None, "model_max_length": 4096, "add_bos_token": False,
    }, indent=1))
    return n, tok.token_to_id("<|endoftext|>")

def reinit(model, seed: int, lm_head_gain: float = 2.0):
    """Deterministic re-init so that greedy decoding is decisive:
    every matrix N(0, 1/fan_in) (fan_in = last dim), lm_head x lm_head_gain,
    biases N(0, 0.1), norm weights += N(0, 0.1); SSM A_log / dt_bias / D as HF inits them.
    Every value is rounded through float16, so an f16 GGUF holds exactly the checkpoint."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            short = name.split(".")[-1]
            if short in ("A_log", "dt_bias", "D", "dt_proj_bias") or "A_log" in name or "dt_bias" in name:
                pass
            elif p.dim() >= 2:
                std = 1.0 / math.sqrt(p.shape[-1])
                if "lm_head" in name:
                    std *= lm_head_gain
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif "norm" in name or "layernorm" in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            p.copy_(p.half().float())

def save(model, d: Path, arch_name: str | None = None, extra_tensors: dict | None = None, cfg_edit=None, rename=None):
    import torch
    from safetensors.torch import save_file
    d.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(d), safe_serialization=True)
    if rename:
        from safetensors.torch import load_file
        f = d / "model.safetensors"
        sd = {rename(k): v for k, v in load_file(str(f)).items()}
        save_file(sd, str(f), metadata={"format": "pt"})
    if extra_tensors:
        from safetensors.torch import load_file
        f = d / "model.safetensors"
        sd = load_file(str(f))
        sd.update({k: v.contiguous() for k, v in extra_tensors.items()})
        save_file(sd, str(f), metadata={"format": "pt"})
    cfg = json.loads((d / "config.json").read_text())
    if arch_name:
        cfg["architectures"] = [arch_name]
    if cfg_edit:
        cfg_edit(cfg)
    (d / "config.json").write_text(json.dumps(cfg, indent=1))

def sh(cmd, log=None):
    print("+", " ".join(map(str, cmd)), flush=True)
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if log is not None:
        log.write("$ " + " ".join(map(str, cmd)) + "\n" + r.stdout[-4000:] + r.stderr[-8000:] + "\n")
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-6000:])
        raise SystemExit(f"failed: {cmd[0]}")
    return r

def pipeline(name: str, hfdir: Path, outtype: str = "f16", extra_convert_args=(), raw_config=False):
    """convert -> quantize (Q8_0, Q4_K_M, IQ4_XS) -> refgen for each file."""
    OUT.mkdir(exist_ok=True)
    (ZOO / "logs").mkdir(exist_ok=True)
    log = open(ZOO / f"logs/{name}.log", "w")
    os.environ["ZOO_RAW_CONFIG"] = "1" if raw_config else "0"
    base = OUT / f"{name}-{outtype}.gguf"
    sh([sys.executable, SCRIPTS / "convert_qwen2pre.py", hfdir, "--outtype", outtype, "--outfile", base, *extra_convert_args], log)
    files = [base]
    for q in ("Q8_0", "Q4_K_M", "IQ4_XS"):
        dst = OUT / f"{name}-{q}.gguf"
        if q == "IQ4_XS":
            (OUT / "iq4xs").mkdir(exist_ok=True)
            dst = OUT / "iq4xs" / f"{name}-{q}.gguf"
        sh([BIN / "llama-quantize", base, dst, q, "2"], log)
        files.append(dst)
    for f in files:
        sh([REFGEN, "-m", f, "-n", 64, "-t", 2, "-o", f.with_suffix(".json"),
            "--text", PROMPT_TEXT, "--full", 4, "--model-name", f.name], log)
    log.close()
    for f in files:
        print(f"{f.stat().st_size:>10}  {f.relative_to(OUT)}")
    return files

def qwen_mtp_tensors(model_cls, cfg, seed: int, dense_layer_cfg_overrides=None):
    """MTP (nextn) block as the Qwen3-Next / Qwen3.5 HF checkpoints store it (mtp.*):
    fc [H, 2H], pre_fc_norm_embedding, pre_fc_norm_hidden, norm, and layers.0 = one full-attention
    decoder layer of the trunk's kind. transformers does not instantiate it, so it is made from a
    1-layer model of the same config and renamed."""
    import copy, torch
    c = copy.deepcopy(cfg)
    c.num_hidden_layers = 1
    c.layer_types = ["full_attention"]
    for k, v in (dense_layer_cfg_overrides or {}).items():
        setattr(c, k, v)
    torch.manual_seed(seed)
    m1 = model_cls(c).float()
    reinit(m1, seed)
    out = {}
    for k, v in m1.state_dict().items():
        if k.startswith("model.layers.0."):
            out["mtp.layers.0." + k[len("model.layers.0."):]] = v.clone()
    g = torch.Generator().manual_seed(seed + 1)
    H = cfg.hidden_size
    out["mtp.fc.weight"] = (torch.randn(H, 2 * H, generator=g) / math.sqrt(2 * H)).half().float()
    for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        # these checkpoints use (1 + w) RMSNorm with zero-centred weights, as the trunk's norms
        out[f"mtp.{n}.weight"] = (torch.randn(H, generator=g) * 0.1).half().float()
    return out
