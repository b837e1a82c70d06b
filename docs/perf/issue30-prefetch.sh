#!/usr/bin/env bash
# Issue 30, part 1: each decoding product fetching the next product's weights into L2 as it
# runs (QMatvecKernel::prefetching, the schedule in crates/rayo-llm/src/cuda/ahead.rs of
# docs/perf/issue30/prefetch-unroll-attempt.diff) against the binary before, in one call on the
# GPU machine, through docs/perf/issue30-ab.sh (what it carries). Variants: base (before), and
# after at RAYO_CUDA_PREFETCH_MIB = each of $MIBS on the first shape (0: no fetching ahead), 32
# on the others. A prefetch changes no value: the greedy md5 must not change. PyTorch's read
# stream first and last. Binaries: `cargo build --release -p rayo-cli`, `cargo test -p rayo
# --features cuda --release --test cuda_llm --no-run`, gzipped.
. docs/perf/issue30-ab.sh
variant() {
  local v=$1; shift
  if [ $v = base ]; then /tmp/f/rayo-base "$@"; else RAYO_CUDA_PREFETCH_MIB=$v /tmp/f/rayo-new "$@"; fi
}
ab_setup
ab_shape llama-3.2-1b Q4_K base ${MIBS:-0 4 16 32 64}
ab_shape smollm2-135m Q4_1 base 32
ab_shape llama-3.1-8b Q4_K base 32
python3 docs/perf/issue30-read-stream.py
