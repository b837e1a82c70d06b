"""cuBLAS (through PyTorch) at the shapes of `rayo bench --backend cuda --op wgmma_*`: C = A·Bᵀ,
n×n f16/bf16 operands and f32 ones on TF32, best of 20 after warm-up, TFLOP/s. Output is the operand type (PyTorch's
matmul), which writes half the bytes rayo's f32 C does. Usage: python3 issue14-cublas.py [N...]"""
import sys
import torch

for n in [int(a) for a in sys.argv[1:]] or [4096, 8192]:
    torch.backends.cuda.matmul.allow_tf32 = True  # float32 rows: cuBLAS on TF32 tensor cores
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        for _ in range(5):
            a @ b.T
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = 1e9
        for _ in range(20):
            s.record(); a @ b.T; e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
        print(f"cublas {str(dt).split('.')[1]} n={n}: {best:.3f} ms, {2 * n**3 / best / 1e9:.1f} TFLOP/s")
