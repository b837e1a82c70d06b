# Sourced by issue30-cuda-tests.sh and issue30-nccl-graphs.sh on the GPU machine: multicast off,
# the carried binaries (dev-bin/new/NAME.gz) unpacked into /tmp/f, NCCL's library from
# PyTorch's wheel, and the steps both scripts run.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RAYO_REQUIRE_CUDA=1
mkdir -p /tmp/f
for b in cuda cuda_llm cuda_nccl cuda_persistent cuda_synth rayo; do gunzip -c dev-bin/new/$b.gz >/tmp/f/$b && chmod +x /tmp/f/$b; done
nvidia-smi --query-gpu=name --format=csv,noheader
export RAYO_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)

# each named test binary, its result lines
test_results() {
  for t in "$@"; do
    echo "## $t"
    /tmp/f/$t --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED|failed" | head -10
  done
}

# the CUDA ranks and new architectures against the CPU engine (SmolLM2's tokenizer from tok.gguf)
synth_results() {
  echo "## cuda_synth"
  RAYO_SMOLLM2=dev-bin/b1/tok.gguf RAYO_BIN=/tmp/f/rayo /tmp/f/cuda_synth --test-threads 1 2>&1 | grep -E "^test result|panicked|FAILED|SKIP" | head -10
}

# `rayo synth`'s llama-3.2-1b Q4_K shape, at $f
f=/tmp/f/1b.gguf
synth_1b() {
  /tmp/f/rayo synth $f --shape llama-3.2-1b --type Q4_K --tokenizer dev-bin/b1/tok.gguf >/dev/null
}
