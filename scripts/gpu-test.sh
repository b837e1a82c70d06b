#!/usr/bin/env bash
# Every CUDA test of every crate, on a machine with an NVIDIA GPU that has no Rust (the `device`
# tool's machines), built here.
#
#   scripts/gpu-test.sh              here: builds the test binaries (the suite's build: the same
#                                    features, so nothing is rebuilt after scripts/test.sh), packs
#                                    them with the `rayo` binary, SmolLM2-135M Q4_1 and the Phi-3
#                                    vocabulary into target/gpu-test/, and prints the calls to make
#   scripts/gpu-test.sh --device SHA there, in the repository's root, once every chunk is there:
#                                    unpacks, runs each binary's CUDA tests with RAYO_REQUIRE_CUDA=1
#                                    (no device is a failure, not a SKIP), prints one line per
#                                    binary and a total; the whole log goes to $OUT/gpu-test.log
#                                    (GPU_TEST_ONLY=REGEX: only the binaries whose PACKAGE__TARGET
#                                    name matches, e.g. 'rayo-llm__cuda_batch'; GPU_TEST_LIMIT:
#                                    seconds a binary may run, 330)
#
# The pack (~110 MB: the model is 94 MB) is larger than one call carries (64 MiB with the
# tree), so it is cut into chunks of at most GPU_TEST_CHUNK_MB (48) MB: call k carries chunk k and
# runs `true`, the last call carries the last chunk and runs the tests. The calls must follow one
# another on the same warm machine (it is given back after 30 s idle): the chunks of the earlier
# calls stay there as ignored files. The script prints the calls with their carry lists.
#
# The tests read their data through paths fixed at build time (this checkout's root, e.g.
# /work/main/crates/rayo-llm/tests/data): there, that path is made a link to the repository's
# copy when it differs. The Q4_K_M mix the CUDA tests also compare is made there with
# `rayo quantize`. Qwen2.5-Coder-0.5B (491 MB) does not travel: its CUDA tests print a SKIP line.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pack=target/gpu-test
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
phi3=.cache/vocab/ggml-vocab-phi-3.gguf

# package  test target ("lib": the unit tests)  filter (the binary's CUDA tests; "-": all)
BINARIES="
rayo      lib              cuda::
rayo      parity           cuda
rayo      cuda             -
rayo      cuda_llm         -
rayo      cuda_nccl        -
rayo      cuda_persistent  -
rayo-llm  cuda             -
rayo-llm  cuda_batch       -
rayo-llm  cuda_misuse      -
rayo-llm  cuda_ops         -
rayo-cli  cuda_synth       -
"

if [ "${1:-}" != "--device" ]; then
  # ---- here: build and pack ----
  ./scripts/fetch-smollm2.sh >/dev/null
  ./scripts/fetch-vocabs.sh >/dev/null
  json=$(mktemp)
  # the suite's features (scripts/test.sh, section build: the workspace with rayo-cli's default
  # features, which turn on rayo's gpu and cuda and rayo-llm's wgpu and cuda), in profile release
  # (GPU_TEST_PROFILE=ci: the suite's own build, nothing rebuilt after it): the LLM tests'
  # CPU-engine references run 3-4x slower with profile ci's checks, and device time is scarce
  profile=${GPU_TEST_PROFILE:-release}
  cargo test --workspace --exclude rayo-bench --profile "$profile" --no-run --message-format=json-render-diagnostics >"$json"
  rm -rf "$pack" && mkdir -p "$pack/stage/bin"
  python3 - "$json" "$pack/stage" "$BINARIES" <<'PY'
import json, os, shutil, sys
msgs, stage, table = sys.argv[1], sys.argv[2], sys.argv[3]
exe = {}
for line in open(msgs):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        pkg = m["package_id"].split("#")[0].rstrip("/").split("/")[-1]  # path+file:///…/crates/NAME
        kind = m["target"]["kind"][0]
        name = "lib" if kind == "lib" else m["target"]["name"]
        exe[(pkg, name)] = (m["executable"], os.path.dirname(m["manifest_path"]))
rows = []
for line in table.strip().splitlines():
    pkg, name, filt = line.split()
    path, mdir = exe[(pkg, name)]  # a KeyError names a row the build did not make
    out = f"{pkg}__{name}"
    shutil.copy2(path, os.path.join(stage, "bin", out))
    rows.append(f"{out}\t{os.path.relpath(mdir)}\t{filt}")
open(os.path.join(stage, "manifest.tsv"), "w").write("\n".join(rows) + "\n")
PY
  cargo build -p rayo-cli --profile "$profile"
  cp "target/$profile/rayo" "$pack/stage/bin/rayo"
  echo "$root" >"$pack/stage/root.txt"
  git rev-parse --short HEAD >"$pack/stage/commit.txt" 2>/dev/null || echo unknown >"$pack/stage/commit.txt"
  git status --porcelain | grep -q . && echo "(with uncommitted changes)" >>"$pack/stage/commit.txt"
  tar -C "$pack/stage" -cf - bin | xz -T2 -6 >"$pack/stage/bin.tar.xz"
  cp "$model" "$pack/stage/smollm2.gguf"
  cp "$phi3" "$pack/stage/phi3-vocab.gguf"
  tar -C "$pack/stage" -cf "$pack/pack.tar" bin.tar.xz smollm2.gguf phi3-vocab.gguf manifest.tsv root.txt commit.txt
  rm -rf "$pack/stage"
  sha=$(sha256sum "$pack/pack.tar" | cut -c1-64)
  split -b "${GPU_TEST_CHUNK_MB:-48}M" -d -a 2 "$pack/pack.tar" "$pack/chunk."
  rm "$pack/pack.tar"
  chunks=("$pack"/chunk.*)
  n=${#chunks[@]}
  echo
  echo "gpu-test: $(du -cb "${chunks[@]}" | tail -1 | cut -f1) bytes in $n chunks under $pack/. Make these $n device calls one after another (the same warm machine):"
  for i in "${!chunks[@]}"; do
    if [ "$i" -lt $((n - 1)) ]; then cmd="true"; else cmd="scripts/gpu-test.sh --device $sha"; fi
    echo "  call $((i + 1)) of $n: carry [\"${chunks[$i]}\"], command: $cmd"
  done
  echo "(each call's output ends with its summary; the last one's whole log comes back as gpu-test.log. On an H100 the"
  echo " last call runs about 530 s: give it the full 600 s, or split it with GPU_TEST_ONLY, e.g. 'rayo-llm__cuda\s' alone)"
  exit 0
fi

# ---- there: unpack and run ----
sha=${2:?"usage: scripts/gpu-test.sh --device SHA256 (the line the build printed)"}
work=/tmp/rayo-gpu-test
rm -rf "$work" && mkdir -p "$work"
cat "$pack"/chunk.* >"$work/pack.tar"
if ! echo "$sha  $work/pack.tar" | sha256sum -c --status; then
  echo "gpu-test: the chunks under $pack/ ($(ls "$pack" | tr '\n' ' ')) do not make the pack $sha: was a call missed, or did the machine change between calls?" >&2
  exit 1
fi
tar -C "$work" -xf "$work/pack.tar" && rm "$work/pack.tar"
xz -dc "$work/bin.tar.xz" | tar -C "$work" -xf -
mkdir -p .cache/models .cache/vocab
mv "$work/smollm2.gguf" "$model"
mv "$work/phi3-vocab.gguf" "$phi3"
./scripts/fetch-smollm2.sh >/dev/null  # only checks the size and sha256 of the file now there
built_in=$(cat "$work/root.txt")
if [ "$built_in" != "$PWD" ] && [ ! -e "$built_in" ]; then
  mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"
fi
log=${OUT:-/tmp}/gpu-test.log
: >"$log"
say() { echo "$@" | tee -a "$log"; }
say "gpu-test: $(cat "$work/commit.txt" | tr '\n' ' ')on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
export RAYO_REQUIRE_CUDA=1 RAYO_REQUIRE_SMOLLM2=1 RAYO_BIN=$work/bin/rayo
# NCCL from PyTorch's wheel where it is there (rayo::cuda::nccl opens it at run time)
nccl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null || true)
[ -n "$nccl" ] && [ -f "$nccl" ] && export RAYO_NCCL_LIBRARY=$nccl
# NVLink multicast off (the device tool's KINDS.md)
export NCCL_NVLS_ENABLE=0
# the mix of Q4_K, Q6_K and Q8_0 that the CUDA LLM tests compare beside Q4_1
kmix=.cache/models/SmolLM2-135M-Instruct.Q4_K_M.gguf
[ -f "$kmix" ] || "$RAYO_BIN" quantize "$model" "$kmix" Q4_K_M >/dev/null 2>&1 || say "gpu-test: rayo quantize Q4_K_M failed: its tests run on Q4_1 only"
# One binary at a time, each one's tests one at a time: the GPU is time-sliced between
# processes, and the decoding tests' thousands of small steps crawl when several share it (all
# eleven side by side ran past 330 s on an H100, against 331 s one after another). Each
# binary's line is printed, and its output appended to the log, as it ends.
# each binary's limit: one that hangs must not take the rest of the call with it
# (on an H100: rayo-llm/cuda 283 s, rayo-cli/cuda_synth 159 s, the rest under 60 s together)
limit=${GPU_TEST_LIMIT:-330}
total_pass=0 total_fail=0 total_skip=0 bad=()
printf '%-28s %6s %6s %6s %8s\n' binary passed failed SKIP seconds | tee -a "$log"
while IFS=$'\t' read -r name dir filt; do
  args=(--test-threads 1 --nocapture)
  [ "$filt" = "-" ] || args+=("$filt")
  start=$(date +%s%N)
  echo "==== $name (in $dir, ${args[*]})" >>"$log"
  set +e
  # (its output into the log as it comes: a binary cut off by the limit still leaves its lines)
  (cd "$dir" && timeout --signal=KILL "$limit" "$work/bin/$name" "${args[@]}") 2>&1 </dev/null | tee "$work/out.$name" >>"$log"
  rc=${PIPESTATUS[0]}
  set -e
  secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
  [ "$rc" -ne 137 ] || echo "gpu-test: $name cut off after $limit s (GPU_TEST_LIMIT)" | tee -a "$work/out.$name" >>"$log"
  echo "==== $name: exit $rc" >>"$log"
  # (a binary cut off by the limit has no result line: `|| true`, or `set -e` ends the run here)
  line=$(grep -E '^test result:' "$work/out.$name" | tail -1 || true)
  pass=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line"); pass=${pass:-0}
  fail=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line"); fail=${fail:-0}
  skip=$(grep -c '^SKIP ' "$work/out.$name" || true)
  [ "$rc" -eq 0 ] || { [ "$fail" -gt 0 ] || fail=1; bad+=("$name"); }
  printf '%-28s %6s %6s %6s %8s\n' "${name/__//}" "$pass" "$fail" "$skip" "$secs" | tee -a "$log"
  total_pass=$((total_pass + pass)) total_fail=$((total_fail + fail)) total_skip=$((total_skip + skip))
done < <(grep -E "${GPU_TEST_ONLY:-.}" "$work/manifest.tsv")
say "total: $total_pass passed, $total_fail failed, $total_skip SKIP lines"
grep -h '^SKIP ' "$log" | sort | uniq -c | sed 's/^ */  /' || true
if [ ${#bad[@]} -gt 0 ]; then
  say "FAILED: ${bad[*]} (the failures' messages, from $log):"
  grep -E "panicked at|^thread '|assertion" "$log" | head -40
  exit 1
fi
say "gpu-test: every CUDA test passed"
