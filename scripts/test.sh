#!/usr/bin/env bash
# The whole test suite. Installs what it needs (idempotently), then runs every part for real:
# native x86-64 (every instruction set this CPU has), NEON under qemu, SIMD128 under Node's WASI,
# wgpu on Mesa's lavapipe, PTX through NVIDIA's ptxas.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
have qemu-aarch64 || need_apt+=(qemu-user)
have aarch64-linux-gnu-gcc || need_apt+=(gcc-aarch64-linux-gnu)
[ -d /usr/aarch64-linux-gnu/lib ] || need_apt+=(libc6-dev-arm64-cross)
have node || need_apt+=(nodejs)
# ---- apt: wgpu ----
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing: ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
installed_targets=$(rustup target list --installed)
for t in aarch64-unknown-linux-gnu wasm32-wasip1 wasm32-unknown-unknown; do
  grep -qx "$t" <<<"$installed_targets" || rustup target add "$t"
done

# ---- section: cpu (native, every instruction set this CPU has) ----
echo "== native tests (x86-64: scalar, sse2, avx2, avx512 where present)"
cargo test --workspace --release --exclude rayo-bench

# ---- section: wgpu (lavapipe) ----
# Mesa's software Vulkan driver (lavapipe): every GPU test runs for real, and fails (not skips)
# without an adapter because RAYO_REQUIRE_GPU=1.
if ! dpkg -s mesa-vulkan-drivers libvulkan1 >/dev/null 2>&1; then
  echo "== installing: mesa-vulkan-drivers libvulkan1"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null
fi
echo "== wgpu tests on lavapipe"
(
  export WGPU_BACKEND=vulkan RAYO_REQUIRE_GPU=1 XDG_RUNTIME_DIR="$(mktemp -d)"
  lvp=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
  [ -f "$lvp" ] && export VK_ICD_FILENAMES="$lvp"
  cargo test -p rayo --features gpu --release --test gpu
  cargo test -p rayo --features gpu --release --lib gpu::
)
echo "== wgpu backend for wasm32 (async API, WebGPU): build"
cargo build -p rayo --release --target wasm32-unknown-unknown --features gpu-wasm

# ---- section: ptx (ptxas from PyPI) ----
echo "== PTX: every rayo-ptx kernel through NVIDIA's ptxas (PyPI wheel in .venv-cuda)"
if [ ! -x .venv-cuda/bin/python ]; then python3 -m venv .venv-cuda; fi
if ! .venv-cuda/bin/python -c "import nvidia, os, sys; p = os.path.join(list(nvidia.__path__)[0], 'cu13', 'bin', 'ptxas'); sys.exit(0 if os.path.exists(p) else 1)" 2>/dev/null; then
  .venv-cuda/bin/pip install -q --no-deps nvidia-cuda-nvcc==13.5.37 nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37
fi
CUDA_BIN=$(.venv-cuda/bin/python -c "import nvidia,os;print(os.path.join(list(nvidia.__path__)[0],'cu13','bin'))")
export RAYO_PTXAS="$CUDA_BIN/ptxas" RAYO_CUOBJDUMP="$CUDA_BIN/cuobjdump" RAYO_REQUIRE_PTXAS=1
cargo test -p rayo-ptx --release -- --nocapture
echo "== rayo::cuda (no-driver path here; every kernel against f64 where a GPU exists)"
cargo test -p rayo --features cuda --release --test cuda

# ---- section: aarch64 NEON under qemu ----
echo "== aarch64 tests under qemu (scalar, neon)"
cargo test -p rayo --release --target aarch64-unknown-linux-gnu

# ---- section: wasm32 SIMD128 under node WASI ----
echo "== wasm32-wasip1 tests under node (scalar, simd128)"
cargo test -p rayo --release --target wasm32-wasip1
cargo build -p rayo --release --target wasm32-unknown-unknown

echo "== all test sections passed"
