#!/usr/bin/env bash
# Issue 30, part 1's reference on the GPU machine (carrying $BIN = dev-bin/p32 with rayo.gz, and
# dev-bin/b1/tok.gguf): PyTorch's read stream (docs/perf/issue30-read-stream.py), then
# `rayo bench --model --backend cuda` on the llama-3.2-1b Q4_K shape, twice, with the bytes
# of matrices it reads per token, in the same call.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BIN=${BIN:-dev-bin/p32}
mkdir -p /tmp/r
gunzip -c $BIN/rayo.gz >/tmp/r/rayo && chmod +x /tmp/r/rayo
python3 docs/perf/issue30-read-stream.py
/tmp/r/rayo synth /tmp/r/l1b.gguf --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
for r in 1 2; do /tmp/r/rayo bench --model /tmp/r/l1b.gguf --backend cuda 2>&1 | grep -E "^model|^tg"; done
python3 docs/perf/issue30-read-stream.py
