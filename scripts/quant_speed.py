#!/usr/bin/env python3
"""Decode and prefill speed per quant type, rewind beside llama.cpp, on one model requantized to every type.

llama.cpp's own tools make the files: llama-imatrix computes an importance matrix on a fixed calibration text
(tools/zoo/calibration_text.py; llama-quantize refuses the 1- and 2-bit i-quants without one), llama-quantize
requantizes the source GGUF to each type (the same per-tensor mix hub files of that type have). Then, type by
type, `rewind bench` and `llama-bench` run the same file with the same threads and repetitions, one after the
other, and the table gives both engines' medians and their ratio.

The source should have rows that are multiples of 256 (Qwen2.5-Coder-1.5B: 1536 and 8960), or llama-quantize
falls back to other types for most tensors. Requantizing from Q4_K_M costs quality, not speed.

  python3 scripts/quant_speed.py --llama-bin LLAMA_CPP/build/bin \\
      --source ~/.cache/rewind/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --work /tmp/quant_speed
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# llama-quantize ftype names; MXFP4 quantizes dense weights only with --pure.
DEFAULT_TYPES = [
    "Q8_0", "Q4_K_M", "Q3_K_M", "Q2_K", "IQ4_XS", "IQ4_NL", "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ2_XXS",
    "IQ1_M", "IQ1_S", "TQ2_0", "TQ1_0", "MXFP4_MOE",
]


def run(command: list[str], log_path: str) -> str:
    with open(log_path, "w") as log:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True)
    if result.returncode != 0:
        sys.exit("%s failed (exit %d); see %s" % (command[0], result.returncode, log_path))
    return result.stdout


def imatrix_for(args) -> str:
    path = os.path.join(args.work, "source.imatrix")
    if os.path.exists(path):
        return path
    calib = os.path.join(args.work, "calib.txt")
    with open(calib, "w") as f:
        f.write(subprocess.run([sys.executable, os.path.join(ROOT, "tools", "zoo", "calibration_text.py")],
                               stdout=subprocess.PIPE, text=True, check=True).stdout)
    run([os.path.join(args.llama_bin, "llama-imatrix"), "-m", args.source, "-f", calib, "-o", path, "-c", "256",
         "-t", str(args.threads)], os.path.join(args.work, "imatrix.log"))
    return path


def quantized(args, ftype: str, imatrix: str) -> str:
    path = os.path.join(args.work, "model-%s.gguf" % ftype)
    if os.path.exists(path):
        return path
    command = [os.path.join(args.llama_bin, "llama-quantize"), "--allow-requantize", "--imatrix", imatrix]
    if ftype == "MXFP4_MOE":
        command.append("--pure")
    command += [args.source, path, ftype, str(args.threads)]
    run(command, os.path.join(args.work, "quantize-%s.log" % ftype))
    return path


def rewind_speed(args, path: str) -> dict:
    out = run([args.rewind, "bench", "-m", path, "-t", str(args.threads), "-p", "64", "-n", "64", "-r", str(args.reps),
               "--json"], os.path.join(args.work, "rewind-bench.log"))
    row = json.loads(out)[0]
    return {"pp64": row["pp_tokens_per_second"], "tg64": row["tg_tokens_per_second"]}


def llama_speed(args, path: str) -> dict:
    out = run([os.path.join(args.llama_bin, "llama-bench"), "-m", path, "-t", str(args.threads), "-p", "64", "-n",
               "64", "-r", str(args.reps), "-o", "json"], os.path.join(args.work, "llama-bench.log"))
    speeds = {}
    for row in json.loads(out):
        key = "pp64" if row["n_prompt"] > 0 else "tg64"
        speeds[key] = statistics.median(row["samples_ts"])
    return speeds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-bin", required=True, help="llama.cpp's build/bin (llama-quantize, -imatrix, -bench)")
    parser.add_argument("--source", required=True, help="GGUF to requantize")
    parser.add_argument("--work", required=True, help="folder for the files (reused when present)")
    parser.add_argument("--rewind", default=os.path.join(ROOT, "build", "apps", "rewind"))
    parser.add_argument("--types", default=",".join(DEFAULT_TYPES))
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("-r", "--reps", type=int, default=3)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    imatrix = imatrix_for(args)

    rows = []
    print("| type | file MiB | rewind pp64 | llama.cpp pp64 | rewind tg64 | llama.cpp tg64 | tg64 ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for ftype in args.types.split(","):
        path = quantized(args, ftype, imatrix)
        ours, theirs = rewind_speed(args, path), llama_speed(args, path)
        row = {"type": ftype, "mib": os.path.getsize(path) / 2**20, "rewind": ours, "llama_cpp": theirs}
        rows.append(row)
        print("| %s | %.0f | %.1f | %.1f | %.2f | %.2f | %.2f× |" % (
            ftype, row["mib"], ours["pp64"], theirs["pp64"], ours["tg64"], theirs["tg64"],
            ours["tg64"] / theirs["tg64"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
