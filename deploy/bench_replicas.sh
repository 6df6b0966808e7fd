#!/usr/bin/env bash
# One replica against two behind HAProxy (deploy/haproxy.cfg) on this machine, with the same cores and slots in
# all, under multi-turn chat load from scripts/load_test.py (a new connection per request, as API clients behind
# a shared front end make them: with one connection per conversation, any balancer keeps a conversation
# together). Prints one markdown table. Two replicas on one machine show what routing costs and what
# conversation affinity keeps, not added hardware.
#   deploy/bench_replicas.sh MODEL.gguf [conversations] [turns] [concurrency] [extra rewind serve flags...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="${1:?usage: deploy/bench_replicas.sh MODEL.gguf [conversations] [turns] [concurrency] [serve flags...]}"
conversations="${2:-8}"
turns="${3:-5}"
concurrency="${4:-4}"
shift $(( $# < 4 ? $# : 4 ))
extra=("$@")
rewind="${REWIND_BINARY:-$root/build/apps/rewind}"
haproxy="$(command -v haproxy || echo /usr/sbin/haproxy)"
cores="$(nproc)"
base_port="${REWIND_BENCH_PORT:-18400}"
lb_port=$base_port
ports=($((base_port + 1)) $((base_port + 2)))
work="$(mktemp -d /tmp/rewind_bench_replicas.XXXXXX)"
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
trap stop_all EXIT

wait_healthy() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" > /dev/null && return 0
    sleep 0.2
  done
  echo "replica on port $1 never became healthy (log: $work)" >&2
  exit 1
}

# run LABEL N_REPLICAS SESSION_KEY
run() {
  local label="$1" n="$2" key="$3" threads=$(( cores / $2 )) slots=$(( 4 / $2 ))
  (( threads >= 1 )) || threads=1
  for i in $(seq 0 $((n - 1))); do
    "$rewind" serve -m "$model" --port "${ports[$i]}" -t "$threads" -s "$slots" -c 4096 "${extra[@]}" \
      > "$work/replica$i.$n.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n - 1))); do wait_healthy "${ports[$i]}"; done
  # With one replica the second address has nobody: its health checks fail and HAProxy stops using it.
  REWIND_LB_BIND="127.0.0.1:$lb_port" REWIND_REPLICA_1="127.0.0.1:${ports[0]}" \
    REWIND_REPLICA_2="127.0.0.1:${ports[1]}" "$haproxy" -db -f "$root/deploy/haproxy.cfg" > "$work/haproxy.$n.log" 2>&1 &
  pids+=($!)
  sleep 3  # health checks settle (rise 2 x inter 1 s)
  python3 "$root/scripts/load_test.py" --url "http://127.0.0.1:$lb_port" --chat --turns "$turns" \
    --requests "$conversations" --concurrency "$concurrency" --max-tokens 48 --session-key "$key" --no-keep-alive \
    --label "$label" --json "$work/$label.json" > /dev/null
  stop_all
}

run "1 replica (-t $cores, 4 slots)" 1 header
run "2 replicas (-t $((cores / 2)), 2 slots each), by conversation" 2 header
run "2 replicas (-t $((cores / 2)), 2 slots each), least connections" 2 none

python3 - "$work" "$turns" <<'EOF'
import glob, json, os, sys
work, turns = sys.argv[1], int(sys.argv[2])
print(f"| setup | conversations × turns | errors | tok/s | TTFT p50 ms | turn-{turns} TTFT p50 ms | prompt tokens reused |")
print("|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(work, "*.json")), key=os.path.getmtime):
    r = json.load(open(path))
    last = r["turns"][-1]["ttft_ms"]["p50"] if r["turns"] else None
    reused = r["cached_tokens"] / r["prompt_tokens"] if r["prompt_tokens"] else 0
    print(f"| {r['label']} | {r['requests'] // turns} × {turns} | {r['errors']} | {r['throughput_tok_s']:.1f} | "
          f"{r['ttft_ms']['p50']:.0f} | {last:.0f} | {reused:.0%} |")
EOF
