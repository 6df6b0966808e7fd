#!/usr/bin/env bash
# Screenshot of the `rewind serve` chat page once it has streamed an answer.
#   scripts/chat_screenshot.sh URL OUT.png [WAIT_SECONDS]
# e.g. scripts/chat_screenshot.sh 'http://127.0.0.1:8080/?prompt=What+is+the+capital+of+France%3F' chat.png
# Headless Chromium is driven over the DevTools protocol: `--screenshot` (even with --virtual-time-budget)
# fires before a streaming fetch finishes, so we poll the page's document.body.dataset.state until it reads
# done, error or stopped, then capture. WAIT_SECONDS (default 120) bounds model loading plus generation.
# Exit status: 0 answer finished; 2 the page showed an error, was stopped or timed out (the PNG is still written,
# so you can see why); 1 anything else. Env: CHROMIUM (browser binary), CHAT_SCREENSHOT_SIZE (default 1000x800).
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 URL OUT.png [WAIT_SECONDS]" >&2
  exit 1
fi
url="$1"
out="$2"
wait_s="${3:-120}"
if ! [[ "$wait_s" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "chat_screenshot: WAIT_SECONDS must be a number, got '$wait_s'" >&2
  exit 1
fi
size="${CHAT_SCREENSHOT_SIZE:-1000x800}"
if ! [[ "$size" =~ ^[0-9]+x[0-9]+$ ]]; then
  echo "chat_screenshot: CHAT_SCREENSHOT_SIZE must look like 1000x800, got '$size'" >&2
  exit 1
fi

chromium="${CHROMIUM:-}"
if [[ -z "$chromium" ]]; then
  chromium="$(command -v chromium || true)"
  [[ -z "$chromium" && -x /usr/bin/chromium ]] && chromium=/usr/bin/chromium
fi
if [[ -z "$chromium" || ! -x "$chromium" ]]; then
  echo "chat_screenshot: chromium not found; install Debian's chromium (apt-get install chromium) or set CHROMIUM=/path/to/it" >&2
  exit 1
fi
if ! command -v python3 >/dev/null; then
  echo "chat_screenshot: python3 is needed to drive chromium" >&2
  exit 1
fi

# Stdlib only: no websocket package is assumed, so a minimal client is inlined.
exec python3 - "$chromium" "$url" "$out" "$wait_s" "$size" <<'PY'
import base64, json, os, shutil, signal, socket, struct, subprocess, sys, tempfile, time, urllib.request

chromium, url, out, wait_s, size = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
width, height = (int(v) for v in size.split("x"))


def die(msg):
    print("chat_screenshot: " + msg, file=sys.stderr)
    sys.exit(1)


class WebSocket:
    def __init__(self, ws_url):
        hostport, _, path = ws_url[len("ws://"):].partition("/")
        host, _, port = hostport.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        # No Origin header: Chrome rejects foreign origins unless --remote-allow-origins is given.
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("websocket handshake: connection closed")
            self.buf += data
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError("websocket handshake refused: " + head.decode(errors="replace"))

    def _read(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(max(65536, n - len(self.buf)))
            if not data:
                raise ConnectionError("websocket closed by chromium")
            self.buf += data
        chunk, self.buf = self.buf[:n], self.buf[n:]
        return chunk

    def _send_frame(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)  # clients must mask (RFC 6455 5.3)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("websocket closed by chromium")
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode()


class Cdp:
    def __init__(self, ws):
        self.ws, self.next_id = ws, 0

    def __call__(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:  # anything else is an event we did not subscribe to
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})


def on_sigterm(*_):
    sys.exit(1)  # run the finally block so chromium and its profile go away


signal.signal(signal.SIGTERM, on_sigterm)
profile = tempfile.mkdtemp(prefix="chat-screenshot-")
errlog = open(os.path.join(profile, "chromium.log"), "w+")
proc = None
status = 1
try:
    # Port 0 plus DevToolsActivePort avoids clashing with anything already listening.
    proc = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--hide-scrollbars", "--mute-audio", f"--window-size={width},{height}", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=errlog, stderr=errlog, start_new_session=True)

    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.time() + 30
    port = None
    while port is None:
        if proc.poll() is not None:
            errlog.seek(0)
            die(f"chromium exited with status {proc.returncode}:\n" + errlog.read()[-3000:])
        if time.time() > deadline:
            die("chromium did not open its DevTools port within 30 s")
        try:
            with open(port_file) as f:
                port = int(f.readline().strip())
        except (OSError, ValueError):
            time.sleep(0.1)

    page_ws = None
    while page_ws is None:
        if time.time() > deadline:
            die("chromium did not list a page target")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page" and "webSocketDebuggerUrl" in t]
            page_ws = pages[0]["webSocketDebuggerUrl"] if pages else None
        except OSError:
            pass
        if page_ws is None:
            time.sleep(0.1)

    cdp = Cdp(WebSocket(page_ws))
    cdp("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
    nav = cdp("Page.navigate", url=url)
    if nav.get("errorText"):
        die(f"could not load {url}: {nav['errorText']}")

    deadline = time.time() + wait_s
    state = ""
    while True:
        try:
            res = cdp("Runtime.evaluate", expression="document.body ? (document.body.dataset.state || '') : ''",
                      returnByValue=True)
            state = res.get("result", {}).get("value") or ""
        except RuntimeError:
            state = ""  # the context can vanish mid-navigation
        if state in ("done", "error", "stopped") or time.time() > deadline:
            break
        time.sleep(0.25)

    # Two animation frames so the last text and the final stats are painted.
    try:
        cdp("Runtime.evaluate", expression="new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))",
            awaitPromise=True)
    except RuntimeError:
        time.sleep(0.3)
    shot = cdp("Page.captureScreenshot", format="png")
    with open(out, "wb") as f:
        f.write(base64.b64decode(shot["data"]))

    if state == "done":
        print(f"chat_screenshot: wrote {out}")
        status = 0
    elif state in ("error", "stopped"):
        print(f"chat_screenshot: the page ended in state '{state}'; wrote {out} anyway", file=sys.stderr)
        status = 2
    else:
        print(f"chat_screenshot: no finished answer after {wait_s:g} s (state '{state or 'none'}'); "
              f"wrote {out} anyway", file=sys.stderr)
        status = 2
except (ConnectionError, OSError, RuntimeError) as e:
    print(f"chat_screenshot: {e}", file=sys.stderr)
    status = 1
finally:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # renderer/zygote children left behind, if any
        except OSError:
            pass
    errlog.close()
    shutil.rmtree(profile, ignore_errors=True)
sys.exit(status)
PY
