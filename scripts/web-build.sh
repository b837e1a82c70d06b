#!/usr/bin/env bash
# Builds crates/rayo-web for the browser into web/pkg/ (module rayo_web, `wasm-bindgen --target
# web`). wasm-bindgen-cli is pinned to the wasm-bindgen version in Cargo.lock and installed once
# into .cache/wasm-bindgen-VERSION/ (ignored). Usage: scripts/web-build.sh [--dev | --install-only]
# (--install-only: wasm-bindgen-cli and the target only, as scripts/test.sh's installs do)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release; flag=--release
[ "${1:-}" = "--dev" ] && { profile=debug; flag=; }
ver=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
[ -n "$ver" ] || { echo "web-build: no wasm-bindgen in Cargo.lock" >&2; exit 1; }
root=.cache/wasm-bindgen-$ver
bindgen=$root/bin/wasm-bindgen
if ! [ -x "$bindgen" ] || [ "$("$bindgen" --version | awk '{print $2}')" != "$ver" ]; then
  echo "web-build: installing wasm-bindgen-cli $ver into $root"
  mkdir -p .cache
  # --locked first; its lock file has pinned a crate the registry no longer serves (webpki-roots
  # 1.0.11), so fall back to a fresh resolution of the same wasm-bindgen-cli version.
  cargo install --locked --no-default-features wasm-bindgen-cli --version "$ver" --root "$root" ||
    cargo install --no-default-features wasm-bindgen-cli --version "$ver" --root "$root"
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
[ "${1:-}" = "--install-only" ] && exit 0
cargo build -p rayo-web --target wasm32-unknown-unknown $flag
target=${CARGO_TARGET_DIR:-target}
"$bindgen" --target web --out-dir web/pkg --out-name rayo_web "$target/wasm32-unknown-unknown/$profile/rayo_web.wasm"
ls -l web/pkg/rayo_web_bg.wasm | awk '{print "web-build: web/pkg/rayo_web_bg.wasm", $5, "bytes"}'
