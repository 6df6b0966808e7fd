#!/usr/bin/env python3
"""Dequantization test vectors for the read-only GGUF quant types (k-quants, i-quants, ternary, mxfp4), from an
implementation nobody here wrote.

For each type: random raw blocks (every payload byte uniform in 0..255, so every bit pattern of levels, scales
and ternary digits occurs; the fp16 scale fields finite, including fp16 subnormals, and the mxfp4 e8m0 byte
kept where d * 12 stays finite), plus a few edge blocks (all payload bytes 0x00, all 0xFF), and the floats the
PyPI `gguf` package's numpy dequantizer (gguf.quants.dequantize) returns for them.

Writes tests/data/quant/<type>.bin = the raw blocks, then the dequantized values as little-endian float32, and
tests/data/quant/manifest.json (block counts, sizes, seed, gguf version). tests/kernels/test_quant.cpp reads them.
Run from the repository root:  python3 tools/quant/make_dequant_vectors.py
"""

import json
import os
import sys
from importlib import metadata

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

SEED = 20261201
N_RANDOM_BLOCKS = 14  # plus 2 edge blocks: 16 blocks per type

# Byte offsets of the fp16 scale fields in each block (ggml's block structs, as in src/tensor/quant/blocks.h).
TYPES = {
    "q2_K": (T.Q2_K, {"d": 80, "dmin": 82}),
    "q3_K": (T.Q3_K, {"d": 108}),
    "iq4_nl": (T.IQ4_NL, {"d": 0}),
    "iq4_xs": (T.IQ4_XS, {"d": 0}),
    "tq1_0": (T.TQ1_0, {"d": 52}),
    "tq2_0": (T.TQ2_0, {"d": 64}),
    "mxfp4": (T.MXFP4, {}),  # byte 0 is the e8m0 scale
    "iq2_xxs": (T.IQ2_XXS, {"d": 0}),
    "iq2_xs": (T.IQ2_XS, {"d": 0}),
    "iq2_s": (T.IQ2_S, {"d": 0}),
    "iq3_xxs": (T.IQ3_XXS, {"d": 0}),
    "iq3_s": (T.IQ3_S, {"d": 0}),
    "iq1_s": (T.IQ1_S, {"d": 0}),
    "iq1_m": (T.IQ1_M, {}),  # d is the top nibbles of the four scale words (bytes 48..55)
}


def random_half(rng: np.random.Generator, positive: bool) -> np.ndarray:
    """A finite fp16 of magnitude 2^[-20, 4): fp16 subnormals included."""
    value = np.float16(2.0 ** rng.uniform(-20.0, 4.0))
    if not positive and rng.random() < 0.5:
        value = -value
    assert np.isfinite(value)
    return np.frombuffer(np.float16(value).tobytes(), dtype=np.uint8)


def make_blocks(name: str, rng: np.random.Generator) -> np.ndarray:
    qtype, fields = TYPES[name]
    _, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(N_RANDOM_BLOCKS + 2, block_bytes), dtype=np.uint8)
    blocks[N_RANDOM_BLOCKS] = 0x00
    blocks[N_RANDOM_BLOCKS + 1] = 0xFF
    for b in range(blocks.shape[0]):
        for field, offset in fields.items():
            # q2_K's d and dmin are non-negative as ggml writes them; the other scales take either sign.
            blocks[b, offset:offset + 2] = random_half(rng, positive=(name == "q2_K"))
        if name == "iq1_m":
            # The fp16 d spread over the top nibble of each 16-bit scale word, low nibble of d first.
            d = int.from_bytes(random_half(rng, positive=False).tobytes(), "little")
            for i in range(4):
                word = int.from_bytes(blocks[b, 48 + 2 * i:50 + 2 * i].tobytes(), "little")
                word = (word & 0x0FFF) | (((d >> (4 * i)) & 0xF) << 12)
                blocks[b, 48 + 2 * i:50 + 2 * i] = np.frombuffer(word.to_bytes(2, "little"), dtype=np.uint8)
        if name == "mxfp4":
            # e = 0 and 1 (subnormal scales) in the first blocks, then anything with 2^(e-128) * 12 finite.
            blocks[b, 0] = b if b < 2 else rng.integers(2, 200)
    return blocks


def main() -> int:
    out_dir = os.path.join("tests", "data", "quant")
    if not os.path.isdir(os.path.join("tests", "data")):
        print("run from the repository root", file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    manifest = {
        "generator": "tools/quant/make_dequant_vectors.py",
        "reference": "gguf.quants.dequantize (PyPI gguf %s, numpy %s)" % (metadata.version("gguf"), np.__version__),
        "seed": SEED,
        "layout": "<type>.bin: n_blocks raw blocks, then n_blocks * block_size little-endian float32 values",
        "types": {},
    }
    for name, (qtype, _) in TYPES.items():
        block_size, block_bytes = GGML_QUANT_SIZES[qtype]
        blocks = make_blocks(name, rng)
        with np.errstate(all="raise"):
            values = gguf.quants.dequantize(blocks.reshape(-1), qtype).astype("<f4")
        assert values.size == blocks.shape[0] * block_size
        assert np.all(np.isfinite(values)), name
        with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
            f.write(blocks.tobytes())
            f.write(values.tobytes())
        manifest["types"][name] = {
            "ggml_type": int(qtype),
            "n_blocks": int(blocks.shape[0]),
            "block_size": block_size,
            "block_bytes": block_bytes,
        }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
