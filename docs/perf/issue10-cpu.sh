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
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
