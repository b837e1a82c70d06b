#!/usr/bin/env bash
# The browser test: builds web/pkg (scripts/web-build.sh), serves web/test with pkg/ and the
# model folder beside it, and runs it in headless Chromium with WebGPU (SwiftShader) through
# scripts/webgpu-page.sh, which passes only on the page's `WEBGPU_RESULT PASS`.
# Then the demo page (web/index.html?check: its op timings). Installs chromium with apt once;
# where it cannot be had, prints a `SKIP web:` line and exits 0, or fails under
# RAYO_REQUIRE_WEB=1 (scripts/test.sh sets it, as the GPU sections set RAYO_REQUIRE_GPU).
# Usage: scripts/web-test.sh [TIMEOUT_S]   (WEBGPU_PAGE=PATH: another page runner)
set -euo pipefail
cd "$(dirname "$0")/.."
tmo=${1:-600}
page=${WEBGPU_PAGE:-scripts/webgpu-page.sh}
# RAYO_REQUIRE_BROWSER is the variable's old name.
require=${RAYO_REQUIRE_WEB:-${RAYO_REQUIRE_BROWSER:-0}}
skip() {
  [ "$require" = 1 ] && { echo "web: FAILED: RAYO_REQUIRE_WEB=1 but $1" >&2; exit 1; }
  echo "SKIP web: $1"
  exit 0
}
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
    skip "chromium could not be installed (apt-get install chromium failed)"
fi
[ -x "$page" ] || { echo "web: $page (the headless-page runner) is absent or not executable" >&2; exit 1; }
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || ./scripts/fetch-smollm2.sh >/dev/null
./scripts/web-build.sh
# the page's folder: its files, the package, and the (ignored) model folder, linked
dir=$(mktemp -d)
trap 'rm -rf "$dir" "$dir.log"' EXIT
for f in web/test/*; do ln -s "$PWD/$f" "$dir/"; done
ln -s "$PWD/web/pkg" "$dir/pkg"
ln -s "$(cd .cache/models && pwd -P)" "$dir/models"
start=$(date +%s)
"$page" "$dir" "$tmo" | tee "$dir.log"
echo "web: the browser test took $(($(date +%s) - start)) s"
# in cargo's words, for test.sh's count: each `ok ` line of the page is one check that passed
echo "test result: ok. $(grep -c '^ok ' "$dir.log") passed (browser checks)"
# the demo page too: web/index.html?check times every op and reports through the same protocol
demo=$(mktemp -d)
trap 'rm -rf "$dir" "$dir.log" "$demo"' EXIT
ln -s "$PWD/web/pkg" "$demo/pkg"
ln -s "$PWD/web/index.html" "$demo/demo.html"
ln -s "$PWD/web/demo.js" "$demo/demo.js"
echo '<script>location.replace("demo.html?check")</script>' >"$demo/index.html"
"$page" "$demo" 120
