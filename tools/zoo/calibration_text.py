#!/usr/bin/env python3
"""The calibration text of the zoo's importance matrix (llama-imatrix), from sources every Python has.

llama-quantize refuses the 1- and 2-bit i-quants without an importance matrix; the zoo's i-quant files were
quantized with one computed by llama-imatrix on this text: the Zen of Python and the docstrings of six standard
library modules, joined by blank lines. Usage: python3 tools/zoo/calibration_text.py > calib.txt
"""

import argparse
import codecs
import collections
import contextlib
import difflib
import functools
import inspect
import io
import json
import sys
import textwrap

with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
    import this

MODULES = [json, textwrap, difflib, argparse, collections, functools]


def main() -> int:
    parts = [codecs.decode(this.s, "rot13")] + [inspect.getdoc(module) for module in MODULES]
    sys.stdout.write("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
