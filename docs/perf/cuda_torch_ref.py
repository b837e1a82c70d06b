#!/usr/bin/env python3
"""PyTorch/cuBLAS reference for `rayo bench --backend cuda --json`, timed the same way
(CUDA events, median of samples of many calls), then a comparison table.

usage: python3 docs/perf/cuda_torch_ref.py RAYO_JSONL [OUT_TORCH_JSONL]
"""
import json, sys, time
import torch

torch.backends.cuda.matmul.allow_tf32 = False  # fp32 SIMT sgemm, the same arithmetic as rayo
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"


def device_ms(f, sample_ms=50.0, samples=7):
    f(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); f(); e.record(); e.synchronize()
    one = max(s.elapsed_time(e), 1e-4)
    reps = int(min(max(sample_ms / one, 1), 10000))
    v = []
    for _ in range(samples):
        s.record()
        for _ in range(reps):
            f()
        e.record(); e.synchronize()
        v.append(s.elapsed_time(e) / reps)
    v.sort()
    return v[len(v) // 2]


def rnd(*shape):
    return torch.rand(*shape, device=dev) * 2 - 1


def torch_rows(rayo_rows):
    out = []
    for r in rayo_rows:
        op, n = r["op"], r["n"]
        ms = None
        if op.startswith("gemm"):
            a, b = rnd(n, n), rnd(n, n)
            c = torch.empty(n, n, device=dev)
            torch.backends.cuda.matmul.allow_tf32 = op.startswith("gemm_tf32")  # compare TF32 with TF32
            ms = device_ms(lambda: torch.mm(a, b, out=c))
            torch.backends.cuda.matmul.allow_tf32 = False
        elif op in ("add", "sigmoid", "fused"):
            x, y, z = rnd(n), rnd(n), rnd(n)
            o = torch.empty(n, device=dev)
            if op == "add":
                f = lambda: torch.add(x, y, out=o)
            elif op == "sigmoid":
                f = lambda: torch.sigmoid(x, out=o)
            else:  # eager PyTorch: one kernel per op
                f = lambda: torch.mul(torch.sigmoid(x * y + x), z, out=o)
            ms = device_ms(f)
        elif op in ("sum", "dot", "max"):
            x, y = rnd(n), rnd(n)
            f = {"sum": lambda: x.sum(), "dot": lambda: torch.dot(x, y), "max": lambda: x.max()}[op]
            ms = device_ms(f)
        elif op in ("softmax", "log_softmax", "layernorm", "rmsnorm"):
            rows, cols = r["m"], r["k"]
            x = rnd(rows, cols)
            g, bb = torch.rand(cols, device=dev) + 0.5, rnd(cols)
            F = torch.nn.functional
            f = {
                "softmax": lambda: torch.softmax(x, -1),
                "log_softmax": lambda: torch.log_softmax(x, -1),
                "layernorm": lambda: F.layer_norm(x, (cols,), g, bb, 1e-5),
                "rmsnorm": lambda: F.rms_norm(x, (cols,), g, 1e-5),
            }[op]
            ms = device_ms(f)
        elif op == "roundtrip_add":
            xs, ys = torch.rand(n), torch.rand(n)
            def once():
                c = (xs.to(dev) + ys.to(dev)).cpu()
                return c
            once()
            v = []
            for _ in range(200):
                t = time.perf_counter(); once(); v.append((time.perf_counter() - t) * 1e3)
            v.sort(); ms = v[len(v) // 2]
        if ms is not None:
            out.append({"op": op, "n": n, "backend": "torch", "ns": ms * 1e6})
    return out


def main():
    rayo = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
    ref = torch_rows(rayo)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            for r in ref:
                f.write(json.dumps(r) + "\n")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, tf32 off (on for gemm_tf32 rows)")
    print(f"{'op':<16}{'n':>11}  {'rayo':>12}  {'torch':>12}  {'rayo rate':>16}  {'torch/rayo time':>15}")
    tmap = {(r["op"], r["n"]): r for r in ref}
    for r in rayo:
        t = tmap.get((r["op"], r["n"]))
        rate = f"{r['gflops']/1e3:.1f} TFLOP/s" if r.get("gflops") else (f"{r['gbps']:.0f} GB/s" if r.get("gbps") else "")
        if t is None:
            print(f"{r['op']:<16}{r['n']:>11}  {r['ns']/1e3:>10.1f}us  {'':>12}  {rate:>16}")
            continue
        print(f"{r['op']:<16}{r['n']:>11}  {r['ns']/1e3:>10.1f}us  {t['ns']/1e3:>10.1f}us  {rate:>16}  {t['ns']/r['ns']:>14.2f}x")


if __name__ == "__main__":
    main()
