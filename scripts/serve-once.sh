#!/usr/bin/env bash
# One served request, the last step of the README's main job: `rayo serve` with SmolLM2 on a
# free loopback port, one chat completion through OpenAI's API (python3's urllib, no packages),
# the answer printed, then SIGTERM (the server drains and exits 0).
# Usage: scripts/serve-once.sh [RAYO_BIN]   (default target/release/rayo, or CARGO_TARGET_DIR's)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${CARGO_TARGET_DIR:-target}/release/rayo}
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || ./scripts/fetch-smollm2.sh >/dev/null
log=$(mktemp)
"$bin" serve --model "$model" --port 0 --parallel 2 --threads 2 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
addr=
for _ in $(seq 300); do
  addr=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | sed 's/listening on //') || true
  [ -n "$addr" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "serve-once: the server did not start" >&2; cat "$log" >&2; exit 1; }
python3 - "$addr" <<'PY'
import json, sys, time, urllib.request, urllib.error
base = sys.argv[1]
for _ in range(300):  # /health is 503 until the model is loaded
    try:
        urllib.request.urlopen(base + "/health", timeout=5)
        break
    except (urllib.error.URLError, ConnectionError):
        time.sleep(0.1)
body = {"messages": [{"role": "user", "content": "Name three colours of the rainbow."}], "max_tokens": 40, "temperature": 0}
req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
t0 = time.time()
r = json.load(urllib.request.urlopen(req, timeout=120))
u = r["usage"]
print(f"POST {base}/v1/chat/completions -> {r['choices'][0]['message']['content']!r}")
print(f"({u['prompt_tokens']} prompt tokens, {u['completion_tokens']} completion tokens, {time.time() - t0:.2f} s)", file=sys.stderr)
PY
kill -TERM $pid
wait $pid
