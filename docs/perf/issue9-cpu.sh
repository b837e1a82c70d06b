#!/usr/bin/env bash
# CPU speed before and after the foundation issue (docs/perf/issue9.md), in one run on the dev
# VM: the `rayo` CLI at 7dbad93 (BEFORE) and now (AFTER), interleaved three times, AVX-512, one
# thread; then bench/compare.py (numpy / OpenBLAS references, same run) for AFTER.
# usage: docs/perf/issue9-cpu.sh BEFORE AFTER [PYTHON]   (PYTHON with numpy, e.g. .venv-bench/bin/python)
set -euo pipefail
BEFORE=$1 AFTER=$2 PY=${3:-python3}
OPS="--op add --op dot --op sum --op max --op relu --op sigmoid --op tanh --op gelu --op exp --op softmax"
for round in 1 2 3; do
  for v in BEFORE AFTER; do
    bin=${!v}
    "$bin" bench --backend avx512 --threads 1 --json --size 100000 $OPS | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/"
    "$bin" bench --backend avx512 --threads 1 --json --size 10M --op add --op add_alloc | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/"
    "$bin" bench --backend avx512 --threads 1 --json --op matmul --size 256 --size 1024 | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/"
    "$bin" bench --backend avx512 --threads 2 --json --op matmul --size 1024 | sed "s/^{/{\"bin\":\"$v\",\"round\":$round,/"
  done
done
"$PY" "$(dirname "$0")/../../bench/compare.py" --rayo "$AFTER" >&2
