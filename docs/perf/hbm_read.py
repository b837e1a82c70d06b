"""The read stream of the GPU as PyTorch sees it (a 4 GiB f32 sum, best of 10): the HBM figure
the decode scripts divide by. Usage: python3 docs/perf/hbm_read.py"""
import torch

x = torch.ones(1 << 30, device="cuda")  # 4 GiB of f32
for _ in range(3):
    x.sum()
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
best = 1e9
for _ in range(10):
    s.record(); x.sum(); e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
print(f"torch read stream: {x.numel() * 4 / best / 1e6:.0f} GB/s (best of 10, 4 GiB sum)")
