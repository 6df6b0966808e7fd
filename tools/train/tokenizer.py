"""Byte-level BPE trained on the train split, and the token streams of both splits.

The pre-tokenizer is Qwen2's split regex followed by GPT-2 byte-level mapping, the layout llama.cpp reads as
tokenizer model "gpt2" with pre-tokenizer "qwen2" (export.py forces that name, as the hash of a home-made
vocabulary is unknown to the converter). Writes into --out: tokenizer.json, tokenizer_config.json,
train.npy and heldout.npy (uint16 token ids, documents separated by <|endoftext|>).
"""
import argparse, json
from pathlib import Path
import numpy as np
import corpus

SPECIALS = [corpus.EOT, "<|im_start|>", "<|im_end|>"]
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
               r"""\s*[\r\n]+|\s+(?!\S)|\s+""")


def train_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, Regex
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def write_tokenizer_files(tok, d: Path):
    d.mkdir(parents=True, exist_ok=True)
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None, "eos_token": corpus.EOT, "pad_token": corpus.EOT,
        "unk_token": None, "model_max_length": 262144, "add_bos_token": False,
    }, indent=1))


def encode_docs(tok, docs: list[tuple[str, str]]) -> np.ndarray:
    eot = tok.token_to_id(corpus.EOT)
    ids = []
    for enc in tok.encode_batch([text for _, text in docs], add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot)
    return np.asarray(ids, dtype=np.uint16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--stdlib", type=Path, default=corpus.stdlib_root())
    a = ap.parse_args()
    if not 256 + len(SPECIALS) < a.vocab <= 65536:
        raise SystemExit(f"--vocab {a.vocab}: must exceed the 256 byte symbols + specials and fit uint16")
    parts = corpus.split(a.stdlib)
    tok = train_tokenizer([t for _, t in parts["train"]], a.vocab)
    write_tokenizer_files(tok, a.out)
    for k, docs in parts.items():
        arr = encode_docs(tok, docs)
        np.save(a.out / f"{k}.npy", arr)
        chars = sum(len(t) for _, t in docs)
        print(f"{k}: {len(docs)} files, {arr.size} tokens ({chars / arr.size:.2f} chars/token), digest {corpus.digest(docs)}")
    (a.out / "corpus.json").write_text(json.dumps({
        "stdlib": str(a.stdlib), "vocab": tok.get_vocab_size(),
        **{k: {"files": len(d), "digest": corpus.digest(d)} for k, d in parts.items()}}, indent=1))


if __name__ == "__main__":
    main()
