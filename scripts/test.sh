#!/usr/bin/env bash
# The whole test suite. Installs what it needs (idempotently), then runs every part for real:
# formatting, clippy and rustdoc with -D warnings, native x86-64 (every instruction set this CPU
# has) with overflow checks and debug assertions on, the README's examples, wgpu on Mesa's
# lavapipe, PTX through NVIDIA's ptxas, NEON under qemu, SIMD128 under Node's WASI, the browser.
#
# One native build: every workspace test binary is compiled once (`cargo test --workspace
# --profile ci --no-run`: profile `ci` is release's optimisation with overflow checks and debug
# assertions on in rayo's own crates, so a wrapped size is a panic in every test), and each
# binary is then run once, by the section it belongs to: `wgpu` the GPU tests on lavapipe,
# `cuda` the CUDA tests (a `SKIP cuda:` line each without a GPU: scripts/gpu-test.sh runs them
# on one), `ptx` the PTX crate's, `cpu` every other. A binary no section claims fails the run.
#
# Each part prints `== section: NAME`; at the end (or at the first failure) a summary gives each
# section's status, tests, SKIP lines and wall time, and the tests per crate in each section.
# RAYO_TEST_SKIP=a,b skips sections by name. The long forms of the shortened tests run on
# demand: RAYO_PPL_CHUNKS=100 (perplexity over all of llama.cpp's chunks, not 20) and
# RAYO_TEST_FULL_SIZES=1 (the aarch64 section's GEMMs at 1000³ under qemu, not 600³; wgpu's
# greedy texts on lavapipe at 32 tokens, not 16).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# Mesa's Wayland probe prints "error: XDG_RUNTIME_DIR is invalid or not set" from every test
# that looks for a GPU adapter when the variable is unset (CI's shells): a private one instead.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then XDG_RUNTIME_DIR=$(mktemp -d) && export XDG_RUNTIME_DIR; fi

# ---- bookkeeping: sections, their tests, SKIP lines and times, the summary ----
ALL_SECTIONS="fmt clippy doc build cpu wgpu cuda ptx readme main-job serve aarch64 wasm32 wasm-gpu web"
LOGDIR=$(mktemp -d)
SECTIONS=()   # "name|status|skips|tests|seconds"
current=""
started=0
suite_start=$(date +%s)
# `if section NAME; then ...; fi`: false (and recorded as skipped) when RAYO_TEST_SKIP, a comma-
# separated list of section names, names it.
section() {
  finish_section
  if [[ ",${RAYO_TEST_SKIP:-}," == *",$1,"* ]]; then
    echo "== section: $1 -- skipped (RAYO_TEST_SKIP)"
    SECTIONS+=("$1|skipped: RAYO_TEST_SKIP|0|0|0")
    return 1
  fi
  current=$1
  started=$(date +%s)
  : >"$LOGDIR/$current.log"
  echo "== section: $current"
}
# `run CRATE COMMAND...`: runs a command with its output shown and kept for counting (stderr
# too: skip lines may go there); its `test result` lines count for CRATE in this section.
run() {
  local crate=$1
  shift
  "$@" 2>&1 | tee -a "$LOGDIR/$current.log" | tee -a "$LOGDIR/$current.$crate.crate"
}
count_tests() {
  grep -Eo 'test result: [a-z]+\. [0-9]+ passed' "$1" 2>/dev/null | awk '{s += $4} END {print s + 0}' || true
}
finish_section() {
  [ -n "$current" ] || return 0
  local log="$LOGDIR/$current.log" skips tests
  skips=$(grep -c '^SKIP ' "$log" || true)
  tests=$(count_tests "$log")
  SECTIONS+=("$current|ran|$skips|$tests|$(($(date +%s) - started))")
  current=""
}
summary() {
  local rc=$?
  set +e
  [ -z "${prebuild_pid:-}" ] || kill "$prebuild_pid" 2>/dev/null
  if [ -n "$current" ]; then
    local failed=$current
    finish_section
    if [ "$rc" -ne 0 ]; then
      local last=${SECTIONS[${#SECTIONS[@]}-1]}
      SECTIONS[${#SECTIONS[@]}-1]="$failed|FAILED|-|-|${last##*|}"
    fi
  fi
  echo
  echo "== summary"
  local ran=0 skipped=0 skip_lines=0 total=0 name status skips tests secs
  printf '%-10s %-30s %7s %10s %8s\n' section status tests "SKIP lines" seconds
  for s in "${SECTIONS[@]}"; do
    IFS='|' read -r name status skips tests secs <<<"$s"
    printf '%-10s %-30s %7s %10s %8s\n' "$name" "$status" "$tests" "$skips" "$secs"
    case $status in ran) ran=$((ran + 1)); skip_lines=$((skip_lines + skips)); total=$((total + tests)) ;; skipped*) skipped=$((skipped + 1)) ;; esac
  done
  echo "tests per crate and section:"
  for f in "$LOGDIR"/*.crate; do
    [ -e "$f" ] || continue
    local base=${f##*/} n
    base=${base%.crate}
    n=$(count_tests "$f")
    [ "$n" -gt 0 ] && printf '  %-10s %-12s %6s\n' "${base%%.*}" "${base#*.}" "$n"
  done
  echo "sections ran: $ran, skipped: $skipped; tests passed: $total; tests that printed a SKIP line: $skip_lines"
  echo "wall time: $(($(date +%s) - suite_start)) s, of which installs and downloads $((${installs_done:-$(date +%s)} - suite_start)) s"
  local not_run=()
  for name in $ALL_SECTIONS; do [[ " ${SECTIONS[*]} " == *" $name|"* ]] || not_run+=("$name"); done
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
# NVIDIA's ptxas and cuobjdump (PyPI wheels in .venv-cuda): the PTX of every kernel is assembled
# (section ptx, and the fused element-wise kernels in section wgpu's parity tests).
if [ ! -x .venv-cuda/bin/python ]; then python3 -m venv .venv-cuda; fi
if ! .venv-cuda/bin/python -c "import nvidia, os, sys; p = os.path.join(list(nvidia.__path__)[0], 'cu13', 'bin', 'ptxas'); sys.exit(0 if os.path.exists(p) else 1)" 2>/dev/null; then
  .venv-cuda/bin/pip install -q --no-deps nvidia-cuda-nvcc==13.5.37 nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37
fi
CUDA_BIN=$(.venv-cuda/bin/python -c "import nvidia,os;print(os.path.join(list(nvidia.__path__)[0],'cu13','bin'))")
export RAYO_PTXAS="$CUDA_BIN/ptxas" RAYO_CUOBJDUMP="$CUDA_BIN/cuobjdump" RAYO_REQUIRE_PTXAS=1

# wasm-bindgen-cli, pinned to Cargo.lock's wasm-bindgen (built from crates.io once, into .cache)
./scripts/web-build.sh --install-only

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

echo "== installs and downloads: $(($(date +%s) - suite_start)) s"
installs_done=$(date +%s)

# Every native test binary runs with lavapipe (Mesa's software Vulkan) as its GPU, required:
# a GPU test without an adapter fails rather than skips.
export WGPU_BACKEND=vulkan RAYO_REQUIRE_GPU=1
lvp=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
[ -f "$lvp" ] && export VK_ICD_FILENAMES="$lvp"

# ---- hygiene ----
if section fmt; then
  run - cargo fmt --all --check
fi

if section clippy; then
  # Every target (tests, benches, examples); the workspace's features are rayo-cli's defaults,
  # which build both GPU backends.
  run - cargo clippy --workspace --all-targets -- -D warnings
  # The command also builds with neither GPU backend.
  run - cargo clippy -p rayo-cli --all-targets --no-default-features -- -D warnings
fi

if section doc; then
  RUSTDOCFLAGS="-D warnings" run - cargo doc --workspace --no-deps
fi

# ---- native x86-64: one build, each binary run once ----
BINS=$LOGDIR/bins.tsv   # crate, target ("lib": unit tests), executable, the crate's folder
RAN=$LOGDIR/ran.txt     # crate/target of each binary run
: >"$RAN"
if section build; then
  # rayo-bench holds criterion benchmarks only (no tests)
  cargo test --workspace --exclude rayo-bench --profile ci --no-run --message-format=json-render-diagnostics >"$LOGDIR/build.json"
  python3 - "$LOGDIR/build.json" >"$BINS" <<'PY'
import json, os, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = "lib" if kind == "lib" else m["target"]["name"]
        crate = os.path.basename(os.path.dirname(m["manifest_path"]))
        print(f"{crate}\t{name}\t{m['executable']}\t{os.path.dirname(m['manifest_path'])}")
PY
  echo "$(wc -l <"$BINS") test binaries"
fi
# `tests CRATE TARGET [ARGS...]`: runs that test binary from its crate's folder (as cargo test
# does), with ARGS (a filter, --skip ...).
tests() {
  local crate=$1 target=$2 exe dir
  shift 2
  exe=$(awk -F'\t' -v c="$crate" -v t="$target" '$1 == c && $2 == t { print $3 }' "$BINS")
  dir=$(awk -F'\t' -v c="$crate" -v t="$target" '$1 == c && $2 == t { print $4 }' "$BINS")
  [ -n "$exe" ] || { echo "test.sh: the build made no test binary $crate/$target" >&2; return 1; }
  echo "-- $crate/$target $*"
  echo "$crate/$target" >>"$RAN"
  local t0
  t0=$(date +%s)
  (cd "$dir" && run "$crate" "$exe" "$@" </dev/null)
  echo "-- $crate/$target: $(($(date +%s) - t0)) s"
}
# The other targets' builds (aarch64 under qemu, wasm32 under node and the browser's) need not
# wait for the native tests: they compile at the lowest priority while the native binaries run
# (which leave a core idle much of the time), and section readme waits for them. A failure
# there shows again, in its own section's cargo command.
PREBUILD_LOG=$LOGDIR/prebuild.log
prebuild_pid=
if [ -s "$BINS" ] && [ "${RAYO_TEST_PREBUILD:-1}" = 1 ]; then
  (
    set +e
    pb() { case ",${RAYO_TEST_SKIP:-}," in *",$1,"*) return ;; esac; shift; nice -n 19 "$@" >>"$PREBUILD_LOG" 2>&1; }
    pb aarch64 cargo test -p rayo --profile ci --target aarch64-unknown-linux-gnu --no-run
    pb aarch64 cargo test -p rayo-llm --profile ci --target aarch64-unknown-linux-gnu --lib --no-run
    pb wasm32 cargo test -p rayo --profile ci --target wasm32-wasip1 --no-run
    pb wasm32 cargo check -p rayo --release --target wasm32-unknown-unknown
    pb wasm-gpu cargo check -p rayo --release --target wasm32-unknown-unknown --features gpu-wasm
    pb wasm-gpu cargo check -p rayo --features gpu,gpu-wasm
    pb web ./scripts/web-build.sh
  ) &
  prebuild_pid=$!
fi
wait_prebuild() {
  [ -n "$prebuild_pid" ] || return 0
  local t0
  t0=$(date +%s)
  wait "$prebuild_pid" || true
  prebuild_pid=
  echo "(the other targets' builds, begun after section build: waited $(($(date +%s) - t0)) s for them here)"
}

# the binaries the sections below claim, as CRATE/TARGET; `cpu` runs every other
WGPU_BINS="rayo/gpu rayo/gpu_batch rayo/parity rayo-llm/wgpu"
CUDA_BINS="rayo/cuda rayo/cuda_llm rayo/cuda_nccl rayo/cuda_persistent rayo-llm/cuda rayo-llm/cuda_batch rayo-llm/cuda_misuse rayo-llm/cuda_ops rayo-cli/cuda_synth"
PTX_BINS="rayo-ptx/lib rayo-ptx/checker rayo-ptx/ptx_dump rayo-ptx/ptxas"

if section cpu; then
  echo "native tests (x86-64: scalar, sse2, avx2, avx512 where present)"
  while IFS=$'\t' read -r -u 3 crate target _ _; do
    case " $WGPU_BINS $CUDA_BINS $PTX_BINS " in *" $crate/$target "*) continue ;; esac
    if [ "$crate/$target" = rayo/lib ]; then
      # its wgpu unit tests run in section wgpu
      tests rayo lib --skip gpu::
    else
      tests "$crate" "$target"
    fi
  done 3<"$BINS"
fi

# ---- wgpu on lavapipe ----
if section wgpu; then
  # Mesa's software Vulkan driver (lavapipe): every GPU test runs for real, and fails (not skips)
  # without an adapter because RAYO_REQUIRE_GPU=1. Every op against f64 (parity: also on CUDA
  # where there is one, and each fused element-wise kernel through ptxas).
  for b in $WGPU_BINS; do tests "${b%%/*}" "${b#*/}" --nocapture; done
  tests rayo lib gpu:: --nocapture
fi

# ---- CUDA: without a GPU each test prints a SKIP line (scripts/gpu-test.sh runs them on one) ----
if section cuda; then
  echo "rayo::cuda and the CUDA LLM engine (no-driver path here; scripts/gpu-test.sh runs every one on a GPU)"
  for b in $CUDA_BINS; do tests "${b%%/*}" "${b#*/}" --nocapture; done
fi

# ---- PTX (ptxas from PyPI) ----
if section ptx; then
  echo "every rayo-ptx kernel through NVIDIA's ptxas (PyPI wheel in .venv-cuda)"
  for b in $PTX_BINS; do tests "${b%%/*}" "${b#*/}" --nocapture; done
fi

# every binary of the build ran in exactly one section (unless sections were skipped)
if [ -z "${RAYO_TEST_SKIP:-}" ] && [ -s "$BINS" ]; then
  missing=$(cut -f1,2 "$BINS" | tr '\t' / | sort -u | comm -23 - <(sort -u "$RAN"))
  [ -z "$missing" ] || { echo "test.sh: test binaries no section ran: $missing" >&2; exit 1; }
fi

if section readme; then
  wait_prebuild
  # The README's Rust examples are doctests (crates/rayo/src/lib.rs includes README.md), with
  # every crate's other doctests: the same profile and features as the build above.
  run rayo cargo test --workspace --exclude rayo-bench --profile ci --doc
fi

# The `rayo` binary of the build above (profile ci: release's optimisation, checks on)
RAYO_BIN=$PWD/target/ci/rayo

if section main-job; then
  # The README's main job, on lavapipe (the README runs it with `cargo run --release`; here the
  # suite's build): every backend side by side, and --quick must stay quick (it once ran past 5
  # minutes there).
  run - "$RAYO_BIN" info
  start=$(date +%s)
  run - timeout 180 "$RAYO_BIN" bench --quick
  echo "bench --quick: $(($(date +%s) - start)) s"
  # ... and a sentence from SmolLM2 on rayo's own kernels (greedy: the same text every run).
  run - "$RAYO_BIN" generate --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    --prompt "The three most useful things to know about Rust are" --max-tokens 40 --temperature 0
  # ... and one served request
  run - ./scripts/serve-once.sh "$RAYO_BIN"
fi

if section serve; then
  # `rayo serve` on loopback with SmolLM2 through the official OpenAI client (pinned, in
  # .venv-serve): both endpoints, streaming, greedy text against `rayo generate`, 16 concurrent
  # clients, faults (disconnects, bad JSON, 401/413/429, a burst of 200), SIGTERM draining.
  RAYO_BIN=$RAYO_BIN run rayo-serve ./scripts/serve-test.sh
fi

# ---- aarch64 NEON under qemu ----
if section aarch64; then
  echo "aarch64 tests under qemu (scalar, neon), profile ci as the native tests (checks on)"
  # The GEMMs' large sizes test the blocking and threads, the same code on every instruction
  # set (run at 1000³ natively): under qemu smaller blocks and sizes take their place
  # (RAYO_TEST_FULL_SIZES=1: the native sizes).
  export RAYO_TEST_EMULATED=1
  run rayo cargo test -p rayo --profile ci --target aarch64-unknown-linux-gnu
  # The LLM crate's unit tests (sampler, chat template, RoPE, workers, UTF-8 stream).
  run rayo-llm cargo test -p rayo-llm --profile ci --target aarch64-unknown-linux-gnu --lib
  unset RAYO_TEST_EMULATED
fi

# ---- wasm32 SIMD128 under node WASI ----
if section wasm32; then
  echo "wasm32-wasip1 tests under node (scalar, simd128), profile ci"
  run rayo cargo test -p rayo --profile ci --target wasm32-wasip1
  # the library alone for the browser's target (no features)
  run rayo cargo check -p rayo --release --target wasm32-unknown-unknown
fi

if section wasm-gpu; then
  echo "wgpu backend for wasm32 (async API, WebGPU): gpu-wasm alone for wasm32; gpu-wasm beside gpu natively (additive)"
  run rayo cargo check -p rayo --release --target wasm32-unknown-unknown --features gpu-wasm
  run rayo cargo check -p rayo --features gpu,gpu-wasm
fi

if section web; then
  # rayo-web in headless Chromium with WebGPU (SwiftShader): every exported op against an f64
  # reference, and 16 greedy SmolLM2 tokens equal to the native CPU engine's. Installs chromium
  # (apt) once; without it the section fails (RAYO_REQUIRE_WEB=1), as the GPU sections do.
  RAYO_REQUIRE_WEB=1 run rayo-web ./scripts/web-test.sh 600
fi

finish_section
