#!/usr/bin/env bash
# Usage: scripts/webgpu-page.sh DIR [TIMEOUT_S]
# (Carried in the repository from the CI's ../shared/ci/webgpu-page.sh, so the browser test
# runs from a clone; needs chromium and python3.)
# Serves DIR on 127.0.0.1, opens DIR/index.html in headless Chromium with WebGPU
# (SwiftShader fallback adapter), waits for a console.log line starting with
# "WEBGPU_RESULT PASS" or "WEBGPU_RESULT FAIL", prints the page's console, exits 0 only on PASS.
set -u
DIR=${1:?usage: webgpu-page.sh DIR [TIMEOUT_S]}; TMO=${2:-60}
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$DIR" >"$WORK/http.log" 2>&1 &
SRV=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
# --no-sandbox: CI runs as root. --enable-unsafe-webgpu: without it requestAdapter() returns null here.
chromium --headless=new --no-sandbox --enable-unsafe-webgpu \
  --user-data-dir="$WORK/profile" --enable-logging=stderr --v=0 \
  "http://127.0.0.1:$PORT/index.html" >"$WORK/chromium.out" 2>"$WORK/chromium.err" &
CHR=$!   # /usr/bin/chromium is a shell wrapper that execs the browser, so this is the browser's PID
for _ in $(seq $((TMO * 10))); do
  grep -q '"WEBGPU_RESULT ' "$WORK/chromium.err" && break
  kill -0 "$CHR" 2>/dev/null || { echo "chromium exited early"; break; }
  sleep 0.1
done
kill "$CHR" 2>/dev/null; wait "$CHR" 2>/dev/null
kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null
# console lines look like: [pid:tid:time:INFO:CONSOLE:6] "text", source: http://... (6)
sed -n 's/^\[[^]]*:CONSOLE[^]]*\] "\(.*\)", source: .*$/\1/p' "$WORK/chromium.err"
if grep -q '"WEBGPU_RESULT PASS' "$WORK/chromium.err"; then rc=0
else
  rc=1; echo "--- no WEBGPU_RESULT PASS (page reported FAIL, or nothing within ${TMO}s); chromium stderr without dbus noise:"
  grep -v -e dbus -e CONSOLE "$WORK/chromium.err" | tail -n 30
fi
rm -rf "$WORK"
exit $rc
