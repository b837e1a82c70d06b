"""PyTorch reference for `rayo bench --backend wgpu`: the same ops and sizes, timed the same
two ways, printed as the same JSON lines (backend "torch").

  roundtrip: host tensors in, host tensor out (upload, op, download), wall clock per call
  resident:  data already on the GPU, CUDA events around many calls, per call

Usage: python3 docs/perf/wgpu_torch.py [--quick] [--sizes 1000,100000000] [--matmul 1024,4096]
                                       [--min-time SECONDS]   (per row, default 0.2)
"""
import json
import statistics
import sys
import time

import torch

quick = "--quick" in sys.argv


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


MIN_TIME = float(arg("--min-time", "0.2"))
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False  # fp32 matmul, as rayo's kernel computes
torch.backends.cudnn.allow_tf32 = False


def emit(op, n, ns, note, bytes_=None, flops=None, mkn=None):
    row = {"op": op, "n": n}
    if mkn:
        row.update({"m": mkn[0], "k": mkn[1], "n_cols": mkn[2]})
    row.update({"backend": "torch", "threads": 1, "ns": round(ns, 1)})
    if bytes_ is not None:
        row["gbps"] = round(bytes_ / ns, 3)
    if flops is not None:
        row["gflops"] = round(flops / ns, 3)
    row["note"] = note
    print(json.dumps(row, separators=(",", ":")), flush=True)


def resident(fn, min_time=MIN_TIME):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t, 1e-6)
    reps = int(min(max(min_time / 5 / one, 1), 2000))
    samples = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        samples.append(s.elapsed_time(e) * 1e6 / reps)
    return statistics.median(samples)


def roundtrip(fn, min_time=MIN_TIME):
    fn()
    t = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t, 1e-6)
    reps = int(min(max(min_time / 5 / one, 1), 5000))
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t) * 1e9 / reps)
    return statistics.median(samples)


def data(n, seed):
    i = torch.arange(n, dtype=torch.int64)
    return (((i * 7919 + seed) % 1000).float() / 250.0 - 2.0)


BYTES = {"sum": 4, "max": 4, "min": 4, "dot": 8, "add": 12, "sub": 12, "mul": 12}

vec_sizes = [int(v) for v in arg("--sizes", "1000,1000000,100000000").split(",")]
print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}), flush=True)
for n in vec_sizes:
    ha, hb = data(n, 1), data(n, 2)
    a, b = ha.to(dev), hb.to(dev)
    out = torch.empty_like(a)
    ops = {
        "add": (lambda: torch.add(a, b, out=out), lambda: (ha.to(dev) + hb.to(dev)).cpu()),
        "relu": (lambda: torch.relu(a), lambda: torch.relu(ha.to(dev)).cpu()),
        "gelu": (lambda: torch.nn.functional.gelu(a), lambda: torch.nn.functional.gelu(ha.to(dev)).cpu()),
        "sum": (lambda: torch.sum(a), lambda: torch.sum(ha.to(dev)).item()),
        "dot": (lambda: torch.dot(a, b), lambda: torch.dot(ha.to(dev), hb.to(dev)).item()),
        "softmax": (lambda: torch.softmax(a, 0), lambda: torch.softmax(ha.to(dev), 0).cpu()),
        "unfused3": (lambda: torch.tanh(torch.relu(a * 2.0)), None),
    }
    for op, (res, rt) in ops.items():
        nb = BYTES.get(op, 8) * n
        if rt is not None:
            emit(op, n, roundtrip(rt), "roundtrip", bytes_=nb)
        emit(op, n, resident(res), "resident", bytes_=nb)
    del a, b, out

for n in [int(v) for v in arg("--matmul", "1024,4096" if quick else "256,1024,4096").split(",")]:
    ha, hb = data(n * n, 1).reshape(n, n), data(n * n, 2).reshape(n, n)
    a, b = ha.to(dev), hb.to(dev)
    c = torch.empty_like(a)
    flops = 2.0 * n ** 3
    emit("matmul", n, roundtrip(lambda: (ha.to(dev) @ hb.to(dev)).cpu()), "roundtrip", flops=flops, mkn=(n, n, n))
    emit("matmul", n, resident(lambda: torch.mm(a, b, out=c)), "resident", flops=flops, mkn=(n, n, n))
