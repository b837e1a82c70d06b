#!/usr/bin/env bash
# The whole test suite. Installs what it needs (idempotently), then runs every part for real:
# formatting, clippy and rustdoc with -D warnings, native x86-64 (every instruction set this CPU
# has), a debug build with overflow checks, the README's examples, wgpu on Mesa's lavapipe, PTX
# through NVIDIA's ptxas, NEON under qemu, SIMD128 under Node's WASI.
#
# Each part prints `== section: NAME`; at the end (or at the first failure) a summary says
# which sections ran, which were skipped and why, and how many tests printed a `SKIP ` line
# (a GPU test without its hardware says `SKIP cuda: ...` and passes: it is counted, not hidden).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# Mesa's Wayland probe prints "error: XDG_RUNTIME_DIR is invalid or not set" from every test
# that looks for a GPU adapter when the variable is unset (CI's shells): a private one instead.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then XDG_RUNTIME_DIR=$(mktemp -d) && export XDG_RUNTIME_DIR; fi

# ---- bookkeeping: sections, their SKIP lines, the summary ----
ALL_SECTIONS="fmt clippy doc cpu debug readme wgpu main-job serve wasm-gpu web ptx cuda aarch64 wasm32"
LOGDIR=$(mktemp -d)
SECTIONS=()   # "name|status|skips|tests"
current=""
# `if section NAME; then ...; fi`: false (and recorded as skipped) when RAYO_TEST_SKIP, a comma-
# separated list of section names, names it.
section() {
  finish_section
  if [[ ",${RAYO_TEST_SKIP:-}," == *",$1,"* ]]; then
    echo "== section: $1 -- skipped (RAYO_TEST_SKIP)"
    SECTIONS+=("$1|skipped: RAYO_TEST_SKIP|0|0")
    return 1
  fi
  current=$1
  : >"$LOGDIR/$current.log"
  echo "== section: $current"
}
# Runs a command with its output shown and kept for counting (stderr too: skip lines may go there).
run() {
  "$@" 2>&1 | tee -a "$LOGDIR/$current.log"
}
finish_section() {
  [ -n "$current" ] || return 0
  local log="$LOGDIR/$current.log" skips tests
  skips=$(grep -c '^SKIP ' "$log" || true)
  tests=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}' || true)
  SECTIONS+=("$current|ran|$skips|$tests")
  current=""
}
summary() {
  local rc=$?
  set +e
  if [ -n "$current" ]; then
    local failed=$current
    finish_section
    [ "$rc" -ne 0 ] && SECTIONS[${#SECTIONS[@]}-1]="$failed|FAILED|-|-"
  fi
  echo
  echo "== summary"
  local ran=0 skipped=0 skip_lines=0 name status skips tests
  printf '%-14s %-44s %7s %10s\n' section status tests "SKIP lines"
  for s in "${SECTIONS[@]}"; do
    IFS='|' read -r name status skips tests <<<"$s"
    printf '%-14s %-44s %7s %10s\n' "$name" "$status" "$tests" "$skips"
    case $status in ran) ran=$((ran + 1)); skip_lines=$((skip_lines + skips)) ;; skipped*) skipped=$((skipped + 1)) ;; esac
  done
  local not_run=()
  for name in $ALL_SECTIONS; do [[ " ${SECTIONS[*]} " == *" $name|"* ]] || not_run+=("$name"); done
  echo "sections ran: $ran, skipped: $skipped; tests that printed a SKIP line: $skip_lines"
  [ ${#not_run[@]} -eq 0 ] || echo "not reached: ${not_run[*]}"
  cat "$LOGDIR"/*.log 2>/dev/null | grep '^SKIP ' | sort | uniq -c | sed 's/^ */  /'
  if [ "$rc" -eq 0 ]; then echo "== all test sections passed"; else echo "== FAILED (status $rc)"; fi
  rm -rf "$LOGDIR"
}
trap summary EXIT

# ---- installs (apt, rustup, PyPI), idempotent ----
need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
have qemu-aarch64 || need_apt+=(qemu-user)
have aarch64-linux-gnu-gcc || need_apt+=(gcc-aarch64-linux-gnu)
[ -d /usr/aarch64-linux-gnu/lib ] || need_apt+=(libc6-dev-arm64-cross)
have node || need_apt+=(nodejs)
dpkg -s mesa-vulkan-drivers libvulkan1 >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers libvulkan1)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing: ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
installed_targets=$(rustup target list --installed)
for t in aarch64-unknown-linux-gnu wasm32-wasip1 wasm32-unknown-unknown; do
  grep -qx "$t" <<<"$installed_targets" || rustup target add "$t"
done
installed_components=$(rustup component list --installed)
for c in rustfmt clippy; do
  grep -q "^$c" <<<"$installed_components" || rustup component add "$c"
done

# The real model the GGUF and quantize tests read (93 MB from PyPI, once, into .cache/models):
# with it present they must run, not skip.
./scripts/fetch-smollm2.sh >/dev/null
export RAYO_REQUIRE_SMOLLM2=1
# Qwen2.5-Coder-0.5B-Instruct (`qwen2`; 491 MB from PyPI in six parts, once): the CPU engine
# against llama.cpp on it (crates/rayo-llm/tests/real_models.rs) and wgpu's greedy tokens must run.
./scripts/fetch-qwen2.sh >/dev/null
export RAYO_REQUIRE_QWEN2=1
# Gemma 3 270M (`gemma3`; 253 MB from PyPI in four parts, once): the CPU engine against llama.cpp
# on it (crates/rayo-llm/tests/real_models.rs) and its perplexity (tests/perplexity.rs).
./scripts/fetch-gemma3.sh >/dev/null
export RAYO_REQUIRE_GEMMA3=1
# The perplexity text: the Debian Policy Manual from Debian's debian-policy 4.6.2.0 (2.3 MB, once).
./scripts/fetch-text.sh >/dev/null
export RAYO_REQUIRE_TEXT=1
# llama.cpp's vocab-only tokenizer test files (from the llama-cpp-python sdist on PyPI, once).
./scripts/fetch-vocabs.sh >/dev/null
export RAYO_REQUIRE_VOCABS=1

# ---- hygiene ----
if section fmt; then
  run cargo fmt --all --check
fi

if section clippy; then
  # Every target (tests, benches, examples) with both GPU backends built.
  run cargo clippy --workspace --all-targets --features rayo/gpu,rayo/cuda -- -D warnings
  # The command also builds with neither GPU backend.
  run cargo clippy -p rayo-cli --all-targets --no-default-features -- -D warnings
fi

if section doc; then
  RUSTDOCFLAGS="-D warnings" run cargo doc --workspace --no-deps --features rayo/gpu,rayo/cuda
fi

# ---- native x86-64 ----
if section cpu; then
  echo "native tests (x86-64: scalar, sse2, avx2, avx512 where present)"
  # rayo-llm apart, without its wgpu feature: in the workspace run rayo-cli's default features
  # turn it on, and tests/wgpu.rs (~4 minutes on lavapipe) would run here and again in the wgpu
  # section, which runs it with lavapipe pinned and RAYO_REQUIRE_GPU=1. rayo's features stay
  # the workspace's (gpu, cuda), so rayo is not built again; tests/cuda.rs runs as before.
  run cargo test --workspace --release --exclude rayo-bench --exclude rayo-llm
  run cargo test -p rayo-llm --release --features cuda,rayo/gpu
fi

if section debug; then
  # A debug build: overflow checks live, so a wrapped size is a panic the tests see.
  run cargo test -p rayo --lib --test hostile --test errors --test quant
  # rayo-llm's unit tests (config, chat templates, workers, sampling, tokenizer pieces) and its
  # hostile model files: a size computed from a file's metadata that wraps is a panic here.
  run cargo test -p rayo-llm --lib --test hostile
fi

if section readme; then
  # The README's Rust examples are doctests (crates/rayo/src/lib.rs includes README.md).
  run cargo test -p rayo --release --doc --features gpu,cuda
fi

# ---- wgpu on lavapipe ----
if section wgpu; then
  # Mesa's software Vulkan driver (lavapipe): every GPU test runs for real, and fails (not skips)
  # without an adapter because RAYO_REQUIRE_GPU=1.
  (
    export WGPU_BACKEND=vulkan RAYO_REQUIRE_GPU=1 XDG_RUNTIME_DIR="$(mktemp -d)"
    lvp=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
    [ -f "$lvp" ] && export VK_ICD_FILENAMES="$lvp"
    run cargo test -p rayo --features gpu --release --test gpu --test gpu_batch --test parity -- --nocapture
    run cargo test -p rayo --features gpu --release --lib gpu:: -- --nocapture
    # The LLM engine on wgpu: every WGSL kernel against f64, greedy tokens against the CPU engine.
    run cargo test -p rayo-llm --features wgpu --release --test wgpu -- --nocapture
  )
fi

if section main-job; then
  # The README's main job, on lavapipe: every backend side by side, and --quick must stay quick
  # (it once ran past 5 minutes there).
  (
    export WGPU_BACKEND=vulkan XDG_RUNTIME_DIR="$(mktemp -d)"
    lvp=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
    [ -f "$lvp" ] && export VK_ICD_FILENAMES="$lvp"
    run cargo run --release -p rayo-cli -- info
    cargo build --release -p rayo-cli
    start=$(date +%s)
    run timeout 180 cargo run --release -p rayo-cli -- bench --quick
    echo "bench --quick: $(($(date +%s) - start)) s"
    # ... and a sentence from SmolLM2 on rayo's own kernels (greedy: the same text every run).
    run cargo run --release -p rayo-cli -- generate --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --prompt "The three most useful things to know about Rust are" --max-tokens 40 --temperature 0
    # ... and one served request
    run ./scripts/serve-once.sh
  )
fi

if section serve; then
  # `rayo serve` on loopback with SmolLM2 through the official OpenAI client (pinned, in
  # .venv-serve): both endpoints, streaming, greedy text against `rayo generate`, 16 concurrent
  # clients, faults (disconnects, bad JSON, 401/413/429, a burst of 200), SIGTERM draining.
  run ./scripts/serve-test.sh
fi

if section wasm-gpu; then
  echo "wgpu backend for wasm32 (async API, WebGPU): build; gpu-wasm beside gpu natively (additive)"
  run cargo build -p rayo --release --target wasm32-unknown-unknown --features gpu-wasm
  run cargo check -p rayo --features gpu,gpu-wasm
fi

if section web; then
  # rayo-web in headless Chromium with WebGPU (SwiftShader): every exported op against an f64
  # reference, and 16 greedy SmolLM2 tokens equal to the native CPU engine's. Installs chromium
  # (apt) once; without it the section fails (RAYO_REQUIRE_WEB=1), as the GPU sections do.
  (
    export RAYO_REQUIRE_WEB=1
    run ./scripts/web-test.sh 600
  )
fi

# ---- PTX (ptxas from PyPI) and the CUDA runtime ----
if section ptx; then
  echo "every rayo-ptx kernel through NVIDIA's ptxas (PyPI wheel in .venv-cuda)"
  if [ ! -x .venv-cuda/bin/python ]; then python3 -m venv .venv-cuda; fi
  if ! .venv-cuda/bin/python -c "import nvidia, os, sys; p = os.path.join(list(nvidia.__path__)[0], 'cu13', 'bin', 'ptxas'); sys.exit(0 if os.path.exists(p) else 1)" 2>/dev/null; then
    .venv-cuda/bin/pip install -q --no-deps nvidia-cuda-nvcc==13.5.37 nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37
  fi
  CUDA_BIN=$(.venv-cuda/bin/python -c "import nvidia,os;print(os.path.join(list(nvidia.__path__)[0],'cu13','bin'))")
  export RAYO_PTXAS="$CUDA_BIN/ptxas" RAYO_CUOBJDUMP="$CUDA_BIN/cuobjdump" RAYO_REQUIRE_PTXAS=1
  run cargo test -p rayo-ptx --release -- --nocapture
fi

if section cuda; then
  echo "rayo::cuda (no-driver path here; every kernel against f64 where a GPU exists); every op's fused kernel through ptxas"
  run cargo test -p rayo --features cuda --release --test cuda --test cuda_llm --test cuda_persistent --test parity -- --nocapture
  # The CUDA LLM engine against the CPU engine on SmolLM2 (skips without a device).
  run cargo test -p rayo-llm --features cuda --release --test cuda --test cuda_misuse --test cuda_ops --test cuda_batch -- --nocapture
  # ... and on `rayo synth`'s files of the new architectures (llama3, qwen3, phi3, gemma3)
  run cargo test -p rayo-cli --release --test cuda_synth -- --nocapture
fi

# ---- aarch64 NEON under qemu ----
if section aarch64; then
  echo "aarch64 tests under qemu (scalar, neon)"
  run cargo test -p rayo --release --target aarch64-unknown-linux-gnu
  # The LLM crate's unit tests (sampler, chat template, RoPE, workers, UTF-8 stream).
  run cargo test -p rayo-llm --release --target aarch64-unknown-linux-gnu --lib
fi

# ---- wasm32 SIMD128 under node WASI ----
if section wasm32; then
  echo "wasm32-wasip1 tests under node (scalar, simd128)"
  run cargo test -p rayo --release --target wasm32-wasip1
  run cargo build -p rayo --release --target wasm32-unknown-unknown
fi

finish_section
