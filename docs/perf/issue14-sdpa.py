"""PyTorch's scaled_dot_product_attention at the shape of `rayo bench --backend cuda --op flash_*`:
batch 4, 32 heads, N positions, head dim 128 (64), f16/bf16, causal and not; each SDPA backend
PyTorch has here (its default choice, flash, cuDNN, efficient), best of 20 after warm-up,
TFLOP/s counted as 4·B·H·N²·D (half causal). Usage: python3 issue14-sdpa.py [N...]"""
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"default": None, "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}

print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
for n in [int(a) for a in sys.argv[1:]] or [4096]:
    for dt, hd, causal in [(torch.bfloat16, 128, False), (torch.bfloat16, 128, True), (torch.float16, 128, False), (torch.bfloat16, 64, False)]:
        q, k, v = (torch.randn(4, 32, n, hd, device="cuda", dtype=dt) for _ in range(3))
        flops = 4 * 4 * 32 * n * n * hd / (2 if causal else 1)
        for name, be in BACKENDS.items():
            def run():
                if be is None:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            try:
                for _ in range(3):
                    run()
                torch.cuda.synchronize()
            except Exception as e:  # a backend this build or shape lacks
                print(f"sdpa {name} {str(dt).split('.')[1]} hd{hd} causal={causal} n={n}: unavailable ({str(e).splitlines()[0][:80]})")
                continue
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            best = 1e9
            for _ in range(20):
                s.record(); run(); e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
            print(f"sdpa {name} {str(dt).split('.')[1]} hd{hd} causal={causal} n={n}: {best:.3f} ms, {flops / best / 1e9:.1f} TFLOP/s")
