#!/usr/bin/env bash
# Issue 30, part 1: the quantized products taking 1, 2 or 4 work items a thread per pass of
# their loop (QMatvecKernel::unrolled: the loads of all of them issued before the sums), and a
# block per row for Q4_K's 8-bit products from 4,096 values a row on (a down projection), against
# the binary before, in one call on the GPU machine, through docs/perf/issue30-ab.sh (what it
# carries; the binary after built from docs/perf/issue30/prefetch-unroll-attempt.diff).
# Variants: base (before); uN (after, RAYO_CUDA_MATVEC_UNROLL=N); uNw (after, N items a pass,
# RAYO_CUDA_MATVEC=warp: a warp per row everywhere, as before the long-row rule). All after with
# RAYO_CUDA_PREFETCH_MIB=0. The same sums in the same order: with a warp per row the greedy md5
# must not change. PyTorch's read stream first and last.
. docs/perf/issue30-ab.sh
variant() {
  local v=$1; shift
  case $v in
    base) /tmp/f/rayo-base "$@" ;;
    u*w) RAYO_CUDA_PREFETCH_MIB=0 RAYO_CUDA_MATVEC=warp RAYO_CUDA_MATVEC_UNROLL=${v:1:1} /tmp/f/rayo-new "$@" ;;
    u*) RAYO_CUDA_PREFETCH_MIB=0 RAYO_CUDA_MATVEC_UNROLL=${v:1:1} /tmp/f/rayo-new "$@" ;;
  esac
}
ab_setup
ab_shape llama-3.2-1b Q4_K base u1 u1w u2 u2w u4
ab_shape llama-3.1-8b Q4_K base u1 u2 u4
ab_shape smollm2-135m Q4_1 base u1 u2 u4
python3 docs/perf/issue30-read-stream.py
