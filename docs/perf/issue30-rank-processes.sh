#!/usr/bin/env bash
# Issue 30, part 2: `--tensor-parallel N` alone on cuda as processes rank 0 starts
# (crates/rayo-cli/src/local_ranks.rs), on the one lent H200 (both ranks on GPU 0, so NCCL
# refuses them and the sums go through the host, as the warning says). Carries
# dev-bin/base/rayo.gz (before: ranks as threads), dev-bin/new/rayo.gz (after),
# dev-bin/new/cuda_nccl.gz (`cargo test -p rayo --features cuda --release --test cuda_nccl
# --no-run`) and dev-bin/b1/tok.gguf. Runs: the NCCL tests with NCCL_NVLS_ENABLE=0 and without
# it (the communicator must refuse); greedy text whole and on 2 ranks, before and after; `rayo
# bench --model --backend cuda` whole and on 2 ranks, before and after.
set -u
mkdir -p /tmp/f
for b in base new; do gunzip -c dev-bin/$b/rayo.gz >/tmp/f/rayo-$b && chmod +x /tmp/f/rayo-$b; done
gunzip -c dev-bin/new/cuda_nccl.gz >/tmp/f/cuda_nccl && chmod +x /tmp/f/cuda_nccl
nvidia-smi --query-gpu=name --format=csv,noheader
echo "## cuda_nccl, NCCL_NVLS_ENABLE=0"
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 /tmp/f/cuda_nccl --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skip" | head
echo "## cuda_nccl, NCCL_NVLS_ENABLE unset (a communicator must be refused)"
env -u NCCL_NVLS_ENABLE /tmp/f/cuda_nccl --test-threads 1 2>&1 | grep -E "^test |test result|NCCL_NVLS_ENABLE" | head -5
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
f=/tmp/f/1b.gguf
/tmp/f/rayo-base synth $f --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
for b in base new; do
  for tp in 1 2; do
    echo "## $b, --tensor-parallel $tp"
    /tmp/f/rayo-$b generate --model $f --backend cuda --prompt "The capital of France is" --max-tokens 32 --temperature 0 --tensor-parallel $tp 2>/tmp/f/err | md5sum
    grep -E "rank|warn|WARN|error" /tmp/f/err | head -6
    /tmp/f/rayo-$b bench --model $f --backend cuda --tensor-parallel $tp 2>&1 | grep -E "^(pp|tg)|error"
  done
done
echo "## processes left: $(pgrep -c -f 'rayo-(base|new)' || true)"
