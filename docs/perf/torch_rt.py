"""PyTorch reference for the host round trip of a matmul in docs/perf/crossover-h100.md:
(a.cuda() @ b.cuda()).cpu() on host tensors, wall clock per call, median of 200 calls after a
warm-up, fp32 with TF32 off. One JSON line per size, the layout of `rayo bench --json`
(backend "torch", note "roundtrip").

Usage: python3 docs/perf/torch_rt.py [--sizes 64,128,256,512,1024]

(The script of the 2026-11-23 run was not committed with the numbers; this one is written to the
method the page states, so that the PyTorch column can be re-measured.)
"""
import json
import statistics
import sys
import time

import torch


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

for n in [int(s) for s in arg("--sizes", "64,128,256,512,1024").split(",")]:
    a = torch.rand(n, n, dtype=torch.float32) * 2 - 1
    b = torch.rand(n, n, dtype=torch.float32) * 2 - 1
    for _ in range(10):
        (a.cuda() @ b.cuda()).cpu()
    samples = []
    for _ in range(200):
        t = time.perf_counter()
        (a.cuda() @ b.cuda()).cpu()
        samples.append((time.perf_counter() - t) * 1e9)
    ns = statistics.median(samples)
    row = {"op": "matmul", "n": n, "m": n, "k": n, "n_cols": n, "backend": "torch", "threads": 1,
           "ns": round(ns, 1), "gflops": round(2 * n ** 3 / ns, 3), "note": "roundtrip"}
    print(json.dumps(row, separators=(",", ":")), flush=True)
