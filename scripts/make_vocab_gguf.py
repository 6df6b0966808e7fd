#!/usr/bin/env python3
"""Copy the tokenizer of a GGUF model into a small vocab-only GGUF (no tensors).

Keeps every tokenizer.* key with its exact value types, plus general.architecture, so tests can load a real
model's vocab without the weights. Usage:

    python3 scripts/make_vocab_gguf.py MODEL.gguf OUT.gguf

Needs the `gguf` package (scripts/requirements-tools.txt).
"""

import argparse
import sys

import gguf
from gguf import GGUFValueType


def raw_value(field, index):
    """One element of a field as the writer wants it: bytes for strings (kept byte-exact), Python scalars else."""
    part = field.parts[index]
    element_type = field.types[-1]
    if element_type == GGUFValueType.STRING:
        return bytes(part)
    value = part.tolist()
    return value[0] if isinstance(value, list) else value


def copy_field(writer, field):
    value_type = field.types[0]
    if value_type == GGUFValueType.ARRAY:
        # An empty array records no element type in the reader; STRING is what llama.cpp writes for merges.
        sub_type = field.types[1] if len(field.types) > 1 else GGUFValueType.STRING
        values = [raw_value(field, i) for i in field.data]
        writer.add_key_value(field.name, values, GGUFValueType.ARRAY, sub_type)
    else:
        writer.add_key_value(field.name, raw_value(field, field.data[0]), value_type)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="input GGUF model")
    parser.add_argument("output", help="vocab-only GGUF to write")
    args = parser.parse_args()

    reader = gguf.GGUFReader(args.model)
    arch_field = reader.fields.get("general.architecture")
    if arch_field is None:
        sys.exit(f"{args.model}: no general.architecture key")
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode("utf-8")

    writer = gguf.GGUFWriter(args.output, arch)
    n_copied = 0
    for name, field in reader.fields.items():
        if name.startswith("tokenizer."):
            copy_field(writer, field)
            n_copied += 1
    if n_copied == 0:
        sys.exit(f"{args.model}: no tokenizer.* keys to copy")

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{args.output}: architecture {arch}, {n_copied} tokenizer keys")


if __name__ == "__main__":
    main()
