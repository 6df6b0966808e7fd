#!/usr/bin/env python3
"""Two rewind builds' speed side by side: prefill, decode and verify rounds, interleaved.

    scripts/compare_speed.py --before OLD/build/apps/rewind [--after build/apps/rewind] -m MODEL [-m MODEL ...]
                             [--rounds 5] [-p 512] [-n 64] [--verify 1,3,7] [-t 2]

For a change that must not lose speed (issue 40's compute seam): each round runs, per model, `rewind bench decode`
(pp and tg tokens/s) and `rewind bench decode --verify K,...` (a verify round of 1 + k tokens under replay) with
both builds, the build that goes first alternating between rounds so that the machine's drift lands on both
alike. Printed per model and measure: the median over rounds of after / before (a speed ratio: > 1 is faster),
and the spread of those ratios. Standard library only.
"""
import argparse
import json
import platform
import statistics
import subprocess
import sys


def bench(binary, model, args, extra):
    command = [binary, "bench", "decode", "-m", model, "-t", str(args.threads), "-p", str(args.n_prompt),
               "-n", str(args.n_gen), "-r", str(args.reps), "--json"] + extra
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"compare_speed: {' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def measure(binary, model, args):
    """{measure name: a speed (higher is faster)} for one build and model."""
    decode = bench(binary, model, args, [])[0]
    speeds = {"pp": decode["pp_tokens_per_second"], "tg": decode["tg_tokens_per_second"]}
    for row in bench(binary, model, args, ["--verify", args.verify, "--rollback", "replay"]):
        speeds[f"verify k={row['draft_length']}"] = 1.0 / row["round_seconds"]
    return speeds


def cpu_name():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the rewind binary before the change")
    parser.add_argument("--after", default="build/apps/rewind", help="the rewind binary after it")
    parser.add_argument("-m", "--model", action="append", required=True, help="a GGUF model (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-p", "--n-prompt", type=int, default=512)
    parser.add_argument("-n", "--n-gen", type=int, default=64)
    parser.add_argument("-r", "--reps", type=int, default=3, help="repetitions inside each bench (its median)")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--verify", default="1,3,7", help="draft lengths of the verify rounds")
    args = parser.parse_args()

    ratios = {}  # (model, measure) -> [after / before per round]
    for round_index in range(args.rounds):
        for model in args.model:
            order = [("before", args.before), ("after", args.after)]
            if round_index % 2 == 1:
                order.reverse()
            speeds = {name: measure(binary, model, args) for name, binary in order}
            for measure_name, before in speeds["before"].items():
                ratios.setdefault((model, measure_name), []).append(speeds["after"][measure_name] / before)
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)

    print(f"{cpu_name()}, {args.threads} threads; after / before speed, median of {args.rounds} interleaved rounds "
          f"(pp{args.n_prompt}, tg{args.n_gen}, verify of 1 + k tokens under replay)")
    print(f"{'model':40} {'measure':12} {'median':>8} {'min':>8} {'max':>8}")
    for (model, measure_name), values in ratios.items():
        print(f"{model[-40:]:40} {measure_name:12} {statistics.median(values):8.3f} {min(values):8.3f} "
              f"{max(values):8.3f}")


if __name__ == "__main__":
    main()
