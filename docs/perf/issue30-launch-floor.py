"""Issue 30: what one kernel per op costs at the Llama-3.2-1B Q4_K shape's decoding step, in
PyTorch's own kernels (cuBLAS's gemv), replayed as a CUDA graph. The step rayo runs is 148
dependent launches: per layer 4 narrowings (tiny), Q/K/V, attention (tiny), O, gate/up, down;
then the head's narrowing, the head, argmax and the embedding. Each product here is `torch.mv`
of an f16 matrix with the product's rows and its Q4_K bytes (0.5625 bytes a value), so every
kernel reads what rayo's does; each tiny op is an element-wise kernel on a 2,048-value row.
Prints, median of 50 graph replays each: (a) the whole chain, (b) its products alone, (c) one
gemv reading all 695 MB, as µs a step and GB/s of the step's weights; and PyTorch's read
stream. The gap between (a) and (c) is what launching 148 dependent kernels costs on this GPU
with vendor kernels, the bound on a kernel-per-op design."""
import torch

dev = "cuda"
Q4K = 0.5625
embd, ff, kv, vocab, layers = 2048, 8192, 512, 128256, 16


def gemv(rows, cols):
    """An f16 matrix of `rows` rows holding the bytes of a rows × cols Q4_K matrix."""
    eff = int(rows * cols * Q4K / 2 / rows)
    return torch.randn(rows, eff, dtype=torch.float16, device=dev) * 0.01, torch.randn(eff, dtype=torch.float16, device=dev)


mats = []
for _ in range(layers):
    mats.append([gemv(embd + 2 * kv, embd), gemv(embd, embd), gemv(2 * ff, embd), gemv(embd, ff)])
head = gemv(vocab, embd)
row = torch.randn(ff, device=dev)
out = torch.empty(ff, device=dev)
tiny = lambda n=embd: torch.mul(row[:n], 1.0001, out=out[:n])
step_bytes = sum(w.numel() * 2 for layer in mats for w, _ in layer) + head[0].numel() * 2


def chain(with_tiny):
    for layer in mats:
        (qkv, o, gu, down) = layer
        if with_tiny:
            tiny()
        torch.mv(*qkv)
        if with_tiny:
            tiny()  # attention
            tiny()
        torch.mv(*o)
        if with_tiny:
            tiny()
        torch.mv(*gu)
        if with_tiny:
            tiny(ff)
        torch.mv(*down)
    if with_tiny:
        tiny()
    y = torch.mv(*head)
    if with_tiny:
        y.argmax()
        tiny()


big = torch.randn(step_bytes // 2 // embd, embd, dtype=torch.float16, device=dev), torch.randn(embd, dtype=torch.float16, device=dev)


def timed(fn, what):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    t = times[len(times) // 2]
    print(f"{what}: {t:.1f} us a step, {step_bytes / t / 1e3:.0f} GB/s of the step's {step_bytes / 1e6:.1f} MB, {1e6 / t:.0f} steps/s")


print(torch.cuda.get_device_name(), torch.__version__)
timed(lambda: chain(True), "(a) the 148-kernel chain")
timed(lambda: chain(False), "(b) its 65 products alone")
timed(lambda: torch.mv(*big), "(c) one gemv over all the bytes")
