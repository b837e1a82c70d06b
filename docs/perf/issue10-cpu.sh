#!/usr/bin/env bash
# Quantized products on the CPU (issue 10, item 5), one run on the dev VM: the memory's read
# bandwidth (`read`: sum of a 256 MiB f32 array), 4096×4096 matvec in every weight format (GB/s
# of weight bytes, and the ratio to `read` at the same threads), 64×4096 activations against
# 4096×4096 weights in every format (GFLOP/s) and the f32 GEMM of that shape (`matmul_m64`);
# 1 and 2 threads, AVX-512 (VNNI where the CPU has it) unless BACKEND says otherwise. The load
# of the machine is printed before and after (the VM's 2 cores are shared).
# usage: docs/perf/issue10-cpu.sh [RAYO] [BACKEND]
#   RAYO: a rayo binary (default: builds target/release/rayo with --no-default-features)
set -euo pipefail
cd "$(dirname "$0")/../.."
RAYO=${1:-}
BACKEND=${2:-avx512}
if [ -z "$RAYO" ]; then
  cargo build --release -p rayo-cli --no-default-features >&2
  RAYO=${CARGO_TARGET_DIR:-target}/release/rayo
fi
FMTS="F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K"
OPS="--op read"
for f in $FMTS; do OPS="$OPS --op qmatvec_$f"; done
for f in $FMTS; do OPS="$OPS --op qmatmul_$f"; done
OPS="$OPS --op matmul_m64"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $RAYO bench --backend $BACKEND --threads 1 --threads 2 $OPS"
"$RAYO" bench --backend "$BACKEND" --threads 1 --threads 2 $OPS
# The same products in llama.cpp, in the same run (its test-backend-ops, built with
# LLAMA_BUILD_TESTS=ON in scripts/ref/llama-cpp.sh's tree; it uses half the cores: 1 here):
# 4096 rows × k, one f32 activation row, its own Q8 activation quantization included.
TBO=${LLAMA_TBO:-.cache/llama.cpp/src/vendor/llama.cpp/build/bin/test-backend-ops}
if [ -x "$TBO" ]; then
  echo "# llama.cpp: $TBO perf -o MUL_MAT -b CPU -p 'type_a=(...),type_b=f32,m=4096,n=1,k='"
  "$TBO" perf -o MUL_MAT -b CPU -p 'type_a=(f32|f16|bf16|q4_0|q4_1|q5_0|q5_1|q8_0|q2_K|q3_K|q4_K|q5_K|q6_K),type_b=f32,m=4096,n=1,k=' 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' | grep 'MUL_MAT(' |
    awk 'BEGIN { split("f32 4 f16 2 bf16 2 q4_0 0.5625 q4_1 0.625 q5_0 0.6875 q5_1 0.75 q8_0 1.0625 q2_K 0.328125 q3_K 0.4296875 q4_K 0.5625 q5_K 0.6875 q6_K 0.8203125", a, " "); for (i = 1; i < 26; i += 2) bpw[a[i]] = a[i + 1] }
      { match($0, /type_a=[a-zA-Z0-9_]+/); t = substr($0, RSTART + 7, RLENGTH - 7); match($0, /k=[0-9]+/); k = substr($0, RSTART + 2, RLENGTH - 2)
        match($0, /[0-9.]+ us\/run/); us = substr($0, RSTART, RLENGTH - 7)
        printf "llama.cpp qmatvec %-5s 4096x%-6s 1 thread %10.1f us %6.1f GB/s %6.1f Gweights/s\n", t, k, us, 4096 * k * bpw[t] / us / 1e3, 4096 * k / us / 1e3 }'
else
  echo "# llama.cpp's test-backend-ops not built ($TBO): no same-run reference"
fi
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
