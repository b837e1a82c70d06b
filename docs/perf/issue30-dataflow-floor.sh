#!/usr/bin/env bash
# Issue 30, part 1: the 1B Q4_K step walked by one grid with a counter per slice instead of a
# grid barrier per phase (docs/perf/issue30-dataflow-floor.cu), built with nvcc and run on the
# GPU machine, with PyTorch's read stream before and after. Nothing carried.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 docs/perf/issue30-read-stream.py
nvcc -O3 -arch=sm_90 -o /tmp/df docs/perf/issue30-dataflow-floor.cu && timeout 300 /tmp/df
python3 docs/perf/issue30-read-stream.py
