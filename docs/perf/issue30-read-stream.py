"""The GPU's read stream as PyTorch reaches it: the sum of a 4 GiB tensor (one read of every
byte, a reduction's writes negligible), median of 20 timed runs with CUDA events. Issue 30's
reference: one decoding step reads the model's matrices once, so tokens/s × bytes per token
over this figure is the fraction of the read stream a decode reaches."""
import torch

x = torch.empty(1 << 30, dtype=torch.float32, device="cuda").uniform_()
for _ in range(3):
    x.sum()
torch.cuda.synchronize()
times = []
for _ in range(20):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    x.sum()
    b.record()
    b.synchronize()
    times.append(a.elapsed_time(b) / 1e3)
times.sort()
t = times[len(times) // 2]
print(f"torch read stream: {x.numel() * 4 / t / 1e9:.0f} GB/s ({torch.cuda.get_device_name()}, {x.numel() * 4 >> 20} MiB, median of 20)")
