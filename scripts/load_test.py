#!/usr/bin/env python3
"""Bounded load test for `rewind serve` (or any OpenAI-compatible server that streams SSE).

Sends --requests streaming completions from --concurrency client threads (one keep-alive connection each) and
reports errors, throughput, time to first token (TTFT), time per output token (TPOT) and speculative acceptance.
Standard library only.

Target a running server:
    scripts/load_test.py --url http://127.0.0.1:8080 --requests 200 --concurrency 8

Or launch one: everything after `--` is the server command line; the port comes from its --port (or --url).
The server's output goes to a log file in /tmp (path printed); it is stopped when the run ends, fails or is
interrupted:
    scripts/load_test.py --requests 200 --concurrency 8 -- build/apps/rewind serve -m model.gguf --port 8091 --slots 4

Compare 4 slots with and without speculation against 1 slot, as one markdown table:
    M=model.gguf; L="scripts/load_test.py --requests 200 --concurrency 8 --markdown"
    scripts/load_test.py --markdown-header
    $L --label "4 slots, ngram" -- build/apps/rewind serve -m $M --port 8091 --slots 4 --spec ngram
    $L --label "4 slots, none"  -- build/apps/rewind serve -m $M --port 8091 --slots 4 --spec none
    $L --label "1 slot, none"   -- build/apps/rewind serve -m $M --port 8091 --slots 1 --spec none

Multi-turn conversations (--turns K, chat): --requests conversations of K turns each, every turn's request the
whole history (system, earlier questions and the server's answers) plus a new question, as chat clients send
them. The report adds, per turn, TTFT and the prompt tokens the server reused (usage.prompt_tokens_details.
cached_tokens); --no-cache-prompt sends "cache_prompt": false to measure the same conversations without reuse:
    scripts/load_test.py --chat --turns 5 --requests 8 --concurrency 2 -- build/apps/rewind serve -m M --port 8091
    scripts/load_test.py --chat --turns 5 --requests 8 --concurrency 2 --no-cache-prompt -- build/apps/rewind ...
Through a load balancer, --session-key header (or user) names each conversation so it stays on one replica.

Metrics (client-side clocks): TTFT = request sent -> first chunk with non-empty text (or the final chunk if
none); TPOT = (last text chunk - first text chunk) / (usage.completion_tokens - 1), for requests with >= 2
completion tokens. Errors: non-200 status, an {"error": ...} chunk, a stream without [DONE], exceptions; 429s
count as errors and are also reported as rejected_429. Throughput and latency use successful requests only.
Exit status: 0 if any request succeeded, 1 if none did or the server could not be started.
"""
import argparse
import http.client
import itertools
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

# Varied prompts; several have repetitive structure (lists, code, refrains) so n-gram drafting finds matches.
PROMPTS = [
    "The history of the harbour town begins with a fishing village",
    "List the days of the week, one per line: Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday. "
    "Now list them again, one per line:",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
    "def factorial(n):\n",
    "Row, row, row your boat, gently down the stream. Merrily, merrily, merrily, merrily, life is but a dream. "
    "Row, row, row your boat,",
    "Write a short note about the weather in the mountains.",
    "Count from one to twenty in words: one, two, three, four, five,",
    "A list of things to pack for a week of hiking:\n1. Tent\n2. Sleeping bag\n3.",
    "Explain in simple terms why the sky is blue.",
    "<ul>\n  <li>Apples</li>\n  <li>Bananas</li>\n  <li>Cherries</li>\n  <li>",
    "Once upon a time, in a small village by the sea,",
    "Q: What is the capital of France?\nA: Paris.\nQ: What is the capital of Spain?\nA: Madrid.\n"
    "Q: What is the capital of Italy?\nA:",
    "for (int i = 0; i < n; ++i) {\n    sum += a[i];\n}\nfor (int i = 0; i < n; ++i) {\n",
    "Summarize the main causes of the First World War in a few sentences.",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick",
    "Translate into French: Good morning, how are you today?",
    "| Name | Age | City |\n|------|-----|------|\n| Alice | 30 | Paris |\n| Bob | 25 | London |\n|",
]

MD_HEADER = ("| label | req | err | tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | acceptance |\n"
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default 'linear' method); None if empty."""
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(values):
    return {"p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99),
            "mean": statistics.fmean(values) if values else None, "n": len(values)}


class Result:
    __slots__ = ("ok", "status", "error", "ttft", "tpot", "completion_tokens", "prompt_tokens", "draft_n",
                 "draft_n_accepted", "cached_tokens", "text", "turn")

    def __init__(self):
        self.ok = False
        self.status = None
        self.error = None
        self.ttft = self.tpot = None
        self.completion_tokens = self.prompt_tokens = 0
        self.draft_n = self.draft_n_accepted = 0
        self.cached_tokens = 0
        self.text = ""
        self.turn = 0


class Client:
    def __init__(self, host, port, args, prompts):
        self.host, self.port, self.args, self.prompts = host, port, args, prompts
        self.path = "/v1/chat/completions" if args.chat else "/v1/completions"
        self.conn = None
        self.used = False  # whether self.conn has carried a request (a stale keep-alive socket may be retried)

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn, self.used = None, False

    def body(self, i, messages=None, session=None):
        a, prompt = self.args, self.prompts[i % len(self.prompts)]
        req = {"max_tokens": a.max_tokens, "temperature": a.temperature, "stream": True, "seed": i}
        if session is not None and a.session_key == "user":
            req["user"] = session
        if a.no_cache_prompt:
            req["cache_prompt"] = False
        if messages is not None:
            req["messages"] = messages
        elif a.chat:
            req["messages"] = [{"role": "user", "content": prompt}]
        else:
            req["prompt"] = prompt
        if a.speculative_type:
            req["speculative"] = {"type": a.speculative_type}
        return json.dumps(req).encode()

    def run(self, i, messages=None, session=None):
        r = Result()
        body = self.body(i, messages, session)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if session is not None and self.args.session_key == "header":
            headers["X-Session-Id"] = session
        if self.args.no_keep_alive:
            headers["Connection"] = "close"
            self.close()
        if self.args.api_key:
            headers["Authorization"] = "Bearer " + self.args.api_key
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.args.timeout)
            reused = self.used
            self.used = True
            try:
                t0 = time.perf_counter()
                self.conn.request("POST", self.path, body, headers)
                resp = self.conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                # The server may close an idle keep-alive connection; retry once on a fresh one.
                self.close()
                if reused and attempt == 0:
                    continue
                r.error = f"{type(e).__name__}: {e}"
                return r
            except Exception as e:
                self.close()
                r.error = f"{type(e).__name__}: {e}"
                return r
            break
        r.status = resp.status
        try:
            if resp.status != 200:
                text = resp.read().decode("utf-8", "replace").strip()
                r.error = f"HTTP {resp.status}: {text[:200]}"
                if resp.will_close:
                    self.close()
                return r
            self.read_stream(resp, t0, r)
        except Exception as e:
            r.ok = False
            r.error = f"{type(e).__name__}: {e}"
        if not r.ok:
            # The stream may be mid-flight; the connection state is unknown.
            self.close()
        elif resp.will_close:
            self.close()
        return r

    def read_stream(self, resp, t0, r):
        first = last = final_t = None
        usage = timings = None
        done = False
        # One JSON object per `data:` line (what the server sends); multi-line SSE events are not reassembled.
        while True:
            raw = resp.readline()
            if not raw:
                break
            now = time.perf_counter()
            line = raw.decode("utf-8", "replace").strip()
            if not line or line.startswith(":") or not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            try:
                obj = json.loads(payload)
            except ValueError:
                r.error = f"bad JSON chunk: {payload[:200]}"
                return
            if not isinstance(obj, dict):
                r.error = f"unexpected chunk: {payload[:200]}"
                return
            if "error" in obj:
                err = obj["error"]
                r.error = "error chunk: " + (err.get("message", json.dumps(err)) if isinstance(err, dict)
                                             else str(err))[:200]
                return
            for ch in obj.get("choices") or []:
                text = ch.get("delta", {}).get("content") if self.args.chat else ch.get("text")
                if text:
                    r.text += text
                    if first is None:
                        first = now
                    last = now
                if ch.get("finish_reason") is not None:
                    final_t = now
            if obj.get("usage"):
                usage, final_t = obj["usage"], now
            if obj.get("timings"):
                timings = obj["timings"]
        if not done:
            r.error = "stream ended without [DONE]"
            return
        r.ok = True
        try:
            resp.read()  # consume the chunked terminator so the keep-alive connection can carry the next request
        except (OSError, http.client.HTTPException):
            self.close()
        if first is None:
            first = final_t if final_t is not None else now
        r.ttft = first - t0
        usage, timings = usage or {}, timings or {}
        r.completion_tokens = int(usage.get("completion_tokens", timings.get("predicted_n", 0)) or 0)
        r.prompt_tokens = int(usage.get("prompt_tokens", timings.get("prompt_n", 0)) or 0)
        if r.completion_tokens >= 2 and last is not None:
            r.tpot = (last - first) / (r.completion_tokens - 1)
        r.cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                              or timings.get("cache_n") or 0)
        r.draft_n = int(timings.get("draft_n") or 0)
        r.draft_n_accepted = int(timings.get("draft_n_accepted") or 0)


def conversation_message(prompts, i, turn):
    # Three prompts per question, so that each turn adds a paragraph to the history.
    return " ".join(prompts[(i * 7 + turn * 3 + j) % len(prompts)] for j in range(3))


def run_conversation(client, i, args, prompts, stop):
    """Turns of conversation i on one connection; each turn's Result carries its turn number."""
    messages = [{"role": "system", "content": "You are a helpful assistant. Answer briefly."}]
    results = []
    for turn in range(args.turns):
        if stop.is_set():
            break
        messages.append({"role": "user", "content": conversation_message(prompts, i, turn)})
        r = client.run(i * args.turns + turn, messages, session=f"conversation-{i}")
        r.turn = turn
        results.append(r)
        if not r.ok:
            break
        messages.append({"role": "assistant", "content": r.text})
    return results


def run_load(host, port, args, prompts, stop):
    results = [None] * args.requests
    counter = itertools.count()
    lock = threading.Lock()

    def worker():
        client = Client(host, port, args, prompts)
        try:
            while not stop.is_set():
                with lock:
                    i = next(counter)
                if i >= args.requests:
                    return
                if args.turns > 1:
                    results[i] = run_conversation(client, i, args, prompts, stop)
                else:
                    results[i] = [client.run(i)]
        finally:
            client.close()

    # Daemon threads so Ctrl-C is not held up by requests in flight.
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(args.concurrency, args.requests))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    return [r for turns in results if turns is not None for r in turns], time.perf_counter() - t0


def report(results, wall, args, url, server_cmd):
    ok = [r for r in results if r.ok]
    errs = [r for r in results if not r.ok]
    rejected = sum(1 for r in errs if r.status == 429)
    tokens = sum(r.completion_tokens for r in ok)
    draft_n = sum(r.draft_n for r in ok)
    accepted = sum(r.draft_n_accepted for r in ok)
    samples = []
    for r in errs:
        if r.error not in samples:
            samples.append(r.error)
        if len(samples) >= 5:
            break
    ms = lambda xs: [x * 1e3 for x in xs if x is not None]
    by_turn = []
    for turn in range(args.turns if args.turns > 1 else 0):
        rs = [r for r in ok if r.turn == turn]
        by_turn.append({"turn": turn + 1, "n": len(rs), "ttft_ms": summarize(ms(r.ttft for r in rs)),
                        "prompt_tokens": summarize([r.prompt_tokens for r in rs]),
                        "cached_tokens": summarize([r.cached_tokens for r in rs])})
    return {
        "label": args.label,
        "url": url,
        "endpoint": "/v1/chat/completions" if args.chat else "/v1/completions",
        "server_command": shlex.join(server_cmd) if server_cmd else None,
        "requests": len(results),
        "requests_planned": args.requests,
        "ok": len(ok),
        "errors": len(errs),  # includes rejected_429
        "rejected_429": rejected,
        "error_samples": samples,
        "wall_s": wall,
        "completion_tokens": tokens,
        "prompt_tokens": sum(r.prompt_tokens for r in ok),
        "throughput_tok_s": tokens / wall if wall > 0 else None,
        "requests_per_s": len(ok) / wall if wall > 0 else None,  # successful requests only
        "ttft_ms": summarize(ms(r.ttft for r in ok)),
        "tpot_ms": summarize(ms(r.tpot for r in ok)),
        "draft_n": draft_n,
        "draft_n_accepted": accepted,
        "acceptance_rate": accepted / draft_n if draft_n else None,
        "cached_tokens": sum(r.cached_tokens for r in ok),
        "turns": by_turn,
        "percentile_method": "linear interpolation",
        "config": {"concurrency": args.concurrency, "max_tokens": args.max_tokens,
                   "temperature": args.temperature, "chat": args.chat,
                   "speculative_type": args.speculative_type, "prompts": args.prompt_file or "built-in",
                   "turns": args.turns, "cache_prompt": not args.no_cache_prompt},
    }


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def print_summary(rep):
    t, p = rep["ttft_ms"], rep["tpot_ms"]
    acc = rep["acceptance_rate"]
    lines = [
        f"label:        {rep['label'] or '-'}",
        f"server:       {rep['server_command'] or rep['url']}",
        f"endpoint:     {rep['url']}{rep['endpoint']}",
        f"requests:     {rep['requests']} ({rep['ok']} ok, {rep['errors']} errors of which "
        f"{rep['rejected_429']} rejected with 429)",
        f"wall:         {rep['wall_s']:.2f} s",
        f"tokens:       {rep['completion_tokens']} completion, {rep['prompt_tokens']} prompt",
        f"throughput:   {fmt(rep['throughput_tok_s'])} tok/s, {fmt(rep['requests_per_s'], '.2f')} req/s",
        f"TTFT ms:      p50 {fmt(t['p50'])}  p90 {fmt(t['p90'])}  p99 {fmt(t['p99'])}  mean {fmt(t['mean'])}"
        f"  (n={t['n']})",
        f"TPOT ms:      p50 {fmt(p['p50'], '.2f')}  p90 {fmt(p['p90'], '.2f')}  p99 {fmt(p['p99'], '.2f')}  "
        f"mean {fmt(p['mean'], '.2f')}  (n={p['n']})",
        f"acceptance:   " + ("-" if acc is None else
                             f"{acc:.1%} ({rep['draft_n_accepted']}/{rep['draft_n']} drafted tokens)"),
    ]
    if rep["turns"]:
        lines.append(f"prompt reuse: {rep['cached_tokens']} of {rep['prompt_tokens']} prompt tokens taken from the "
                     f"server's state")
        lines.append("turn | n | TTFT p50 ms | prompt tokens p50 | cached tokens p50")
        for t in rep["turns"]:
            lines.append(f"{t['turn']:4d} | {t['n']} | {fmt(t['ttft_ms']['p50'])} | "
                         f"{fmt(t['prompt_tokens']['p50'], '.0f')} | {fmt(t['cached_tokens']['p50'], '.0f')}")
    for e in rep["error_samples"]:
        lines.append(f"error:        {e}")
    print("\n".join(lines), flush=True)


def markdown_row(rep):
    t, p, acc = rep["ttft_ms"], rep["tpot_ms"], rep["acceptance_rate"]
    err = str(rep["errors"]) + (f" ({rep['rejected_429']}x429)" if rep["rejected_429"] else "")
    return (f"| {rep['label'] or '-'} | {rep['requests']} | {err} | {fmt(rep['throughput_tok_s'])} | "
            f"{fmt(t['p50'])} | {fmt(t['p99'])} | {fmt(p['p50'], '.2f')} | {fmt(p['p99'], '.2f')} | "
            f"{'-' if acc is None else format(acc, '.1%')} |")


class Server:
    """A launched server: own process group, output to a log file, always stopped in stop()."""

    def __init__(self, cmd):
        self.cmd = cmd
        fd, self.log_path = tempfile.mkstemp(prefix="rewind_load_test_", suffix=".log", dir="/tmp")
        self.log = os.fdopen(fd, "wb")
        try:
            # A new session keeps the terminal's Ctrl-C away from the server, so shutdown is ours to order.
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        except OSError:
            self.log.close()
            os.unlink(self.log_path)
            raise
        log(f"launched server pid {self.proc.pid}: {shlex.join(cmd)}")
        log(f"server log: {self.log_path}")

    def _signal(self, sig):
        try:
            os.killpg(self.proc.pid, sig)  # the group is ours: start_new_session made pgid == pid
        except ProcessLookupError:
            pass
        except PermissionError:
            self.proc.send_signal(sig)

    def stop(self, grace=10.0):
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"server did not exit within {grace:.0f} s of SIGTERM; sending SIGKILL")
                self._signal(signal.SIGKILL)
                self.proc.wait()
        else:
            # Still reap anything the server left in its group.
            self._signal(signal.SIGKILL)
        self.log.close()
        log(f"server stopped (exit status {self.proc.returncode}); log: {self.log_path}")

    def tail(self, n=30):
        self.log.flush()
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


def wait_healthy(host, port, timeout, server=None):
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if server is not None and server.proc.poll() is not None:
            raise RuntimeError(f"server exited with status {server.proc.returncode} before becoming healthy")
        try:
            conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("GET", "/health")
            resp = conn.getresponse()
            resp.read()
            conn.close()
            if resp.status == 200:
                return
            last = f"HTTP {resp.status}" + (" (loading)" if resp.status == 503 else "")
        except (OSError, http.client.HTTPException) as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.25)
    raise RuntimeError(f"server not healthy after {timeout:.0f} s (last: {last})")


def port_in_use(host, port):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def port_from_cmd(cmd):
    for i, a in enumerate(cmd):
        if a == "--port" and i + 1 < len(cmd):
            return int(cmd[i + 1])
        if a.startswith("--port="):
            return int(a.split("=", 1)[1])
    return None


def host_from_cmd(cmd):
    for i, a in enumerate(cmd):
        h = cmd[i + 1] if a == "--host" and i + 1 < len(cmd) else a.split("=", 1)[1] if a.startswith(
            "--host=") else None
        if h:
            return "127.0.0.1" if h in ("0.0.0.0", "::", "[::]") else h
    return "127.0.0.1"


def parse_args(argv):
    # Split at the first `--` ourselves: argparse would otherwise try to parse the server's flags.
    server_cmd = []
    if "--" in argv:
        k = argv.index("--")
        argv, server_cmd = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 usage="%(prog)s [options] [--url URL | [--launch] -- SERVER COMMAND...]")
    ap.add_argument("--url", help="server base URL (default: http://127.0.0.1:PORT from the server command)")
    ap.add_argument("--launch", action="store_true", help="launch the server given after `--` (implied by `--`)")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--chat", action="store_true", help="use /v1/chat/completions")
    ap.add_argument("--api-key", help="sent as Authorization: Bearer KEY")
    ap.add_argument("--prompt-file", help="one prompt per line (replaces the built-in prompts)")
    ap.add_argument("--speculative-type", help='adds "speculative": {"type": X} to each request (none, ngram, ...)')
    ap.add_argument("--turns", type=int, default=1,
                    help="chat conversations of this many turns (each --requests is one conversation)")
    ap.add_argument("--no-cache-prompt", action="store_true",
                    help='send "cache_prompt": false (the server computes every prompt whole)')
    ap.add_argument("--session-key", choices=["none", "header", "user"], default="none",
                    help="with --turns: name each conversation in an X-Session-Id header or the body's \"user\" "
                         "field, so a load balancer (deploy/haproxy.cfg) keeps it on one replica")
    ap.add_argument("--no-keep-alive", action="store_true",
                    help="a new connection for every request (a load balancer then places each turn on its own)")
    ap.add_argument("--timeout", type=float, default=300.0, help="socket timeout per request, seconds")
    ap.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for GET /health = 200")
    ap.add_argument("--label", default="", help="tag for this run in the output")
    ap.add_argument("--json", metavar="OUT", help="write the report as JSON here")
    ap.add_argument("--markdown", action="store_true", help="print one markdown table row instead of the summary")
    ap.add_argument("--markdown-header", action="store_true",
                    help="print the table header first (alone, with no server, prints just the header)")
    args = ap.parse_args(argv)
    if args.launch and not server_cmd:
        ap.error("--launch needs the server command after `--`")
    if args.requests < 1 or args.concurrency < 1 or args.max_tokens < 1 or args.turns < 1:
        ap.error("--requests, --concurrency, --max-tokens and --turns must be positive")
    if args.turns > 1 and not args.chat:
        ap.error("--turns needs --chat (a conversation is a list of messages)")
    return ap, args, server_cmd


def main(argv=None):
    ap, args, server_cmd = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.url and not server_cmd:
        if args.markdown_header:
            print(MD_HEADER)
            return 0
        ap.error("give --url or a server command after `--`")

    if args.url:
        u = urllib.parse.urlsplit(args.url if "//" in args.url else "http://" + args.url)
        if u.scheme not in ("http", ""):
            ap.error("only http:// URLs are supported")
        host, port = u.hostname or "127.0.0.1", u.port or 80
    else:
        host, port = host_from_cmd(server_cmd), port_from_cmd(server_cmd)
        if port is None:
            ap.error("the server command has no --port; add one or give --url")
    url = f"http://{host}:{port}"

    if args.prompt_file:
        with open(args.prompt_file, encoding="utf-8") as f:
            prompts = [line.rstrip("\n") for line in f if line.strip()]
        if not prompts:
            ap.error(f"{args.prompt_file} has no prompts")
    else:
        prompts = PROMPTS

    # SIGTERM to us must still stop the server: turn it into the same path as Ctrl-C.
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    server = None
    stop = threading.Event()
    try:
        if server_cmd:
            if port_in_use(host, port):
                log(f"error: something already listens on {host}:{port}; refusing to launch a second server")
                return 1
            try:
                server = Server(server_cmd)
            except OSError as e:
                log(f"error: cannot launch {server_cmd[0]}: {e}")
                return 1
        log(f"waiting for {url}/health (up to {args.startup_timeout:.0f} s)")
        t = time.monotonic()
        try:
            wait_healthy(host, port, args.startup_timeout, server)
        except RuntimeError as e:
            log(f"error: {e}")
            if server is not None:
                log(f"--- last lines of {server.log_path} ---\n{server.tail()}\n---")
            return 1
        log(f"healthy after {time.monotonic() - t:.1f} s; sending {args.requests} requests "
            f"from {args.concurrency} connections")
        results, wall = run_load(host, port, args, prompts, stop)
        if server is not None and server.proc.poll() is not None:
            log(f"warning: server exited during the run (status {server.proc.returncode}); "
                f"log tail:\n{server.tail()}")
    except KeyboardInterrupt:
        stop.set()
        log("interrupted")
        return 130
    finally:
        stop.set()
        if server is not None:
            # Ignore further Ctrl-C while stopping, so the server is never left behind.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            server.stop()

    rep = report(results, wall, args, url, server_cmd)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=1)
            f.write("\n")
    if args.markdown or args.markdown_header:
        if args.markdown_header:
            print(MD_HEADER)
        print(markdown_row(rep), flush=True)
        for e in rep["error_samples"]:
            log(f"error: {e}")
    else:
        print_summary(rep)
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
