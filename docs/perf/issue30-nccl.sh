#!/usr/bin/env bash
# Issue 30, part 2 on the GPU machine: NCCL and the world of processes (run there from the
# repository root by the `run` tool, carrying $BIN (default dev-bin/p33) = rayo.gz,
# cuda-nccl.gz (crates/rayo/tests/cuda_nccl.rs built here), cuda-synth.gz
# (crates/rayo-cli/tests/cuda_synth.rs), and dev-bin/b1/tok.gguf (a tiny GGUF with SmolLM2's
# tokenizer)):
#   1. cuda_nccl: NCCL's library (PyTorch's libnccl.so.2) loads; a world of one rank sums and
#      gathers on the device; two ranks on two GPUs, or on one (which NCCL refuses);
#   2. `rayo generate --backend cuda`, greedy, on a `rayo synth` llama-3.2-1b Q4_K: whole, 2
#      ranks as threads, 2 ranks as processes meeting at a rendezvous (RUST_LOG=info: which
#      path the sums took);
#   3. `rayo bench --model --backend cuda`: whole, 2 threads, 2 processes.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BIN=${BIN:-dev-bin/p33}
mkdir -p /tmp/r
for b in rayo cuda-nccl cuda-synth; do gunzip -c $BIN/$b.gz >/tmp/r/$b && chmod +x /tmp/r/$b; done
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
[ -f "$lib" ] || lib=$(find / -name libnccl.so.2 -not -path '*/proc/*' 2>/dev/null | head -1)
echo "libnccl.so.2: ${lib:-none}"
export RAYO_NCCL_LIBRARY=$lib
echo "== 1. cuda_nccl"
RAYO_REQUIRE_CUDA=1 RAYO_REQUIRE_NCCL=1 /tmp/r/cuda-nccl --nocapture --test-threads 1 2>&1 | grep -vE "^\s*$|^cuda device"
m=/tmp/r/llama-3.2-1b.gguf
/tmp/r/rayo synth $m --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
gen() { /tmp/r/rayo generate --model $m --backend cuda --prompt "The capital of France is" --max-tokens 24 --temperature 0 "$@"; }
echo "== 2. greedy text: whole, 2 threads, 2 processes (f32 activations: the same text)"
export RAYO_CUDA_DECODE=f32 RAYO_CUDA_PREFILL=f32
gen 2>/dev/null | md5sum
RUST_LOG=info gen --tensor-parallel 2 2>/tmp/r/err.txt | md5sum; grep -E "sums through|NCCL" /tmp/r/err.txt | cut -c1-300 | sort | uniq -c
addr=127.0.0.1:29533
RUST_LOG=info gen --tensor-parallel 2 --rank 1 --rendezvous $addr >/tmp/r/out1.txt 2>/tmp/r/err1.txt &
RUST_LOG=info gen --tensor-parallel 2 --rank 0 --rendezvous $addr 2>/tmp/r/err0.txt | md5sum; wait
grep -E "sums through|NCCL|rank" /tmp/r/err0.txt /tmp/r/err1.txt | cut -c1-300
unset RAYO_CUDA_DECODE RAYO_CUDA_PREFILL
echo "== 3. rayo bench --model --backend cuda: whole, 2 threads, 2 processes"
/tmp/r/rayo bench --model $m --backend cuda 2>&1 | grep -E "^(pp|tg)"
/tmp/r/rayo bench --model $m --backend cuda --tensor-parallel 2 2>&1 | grep -E "^(pp|tg)"
/tmp/r/rayo bench --model $m --backend cuda --tensor-parallel 2 --rank 1 --rendezvous $addr >/dev/null 2>&1 &
/tmp/r/rayo bench --model $m --backend cuda --tensor-parallel 2 --rank 0 --rendezvous $addr 2>&1 | grep -E "^(pp|tg)"; wait
echo "== 4. cuda_synth: tensor-parallel ranks against the CPU engine"
RAYO_BIN=/tmp/r/rayo RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_REQUIRE_CUDA=1 /tmp/r/cuda-synth tensor_parallel --nocapture 2>&1 | grep -vE "^\s*$|^cuda device" || true
