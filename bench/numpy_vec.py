"""The reference for `rayo bench`'s vector rows: the same ops in numpy (one thread), timed the
same way (median of 7 samples of >= 0.2 s, or 5 of 20 ms with --quick), printed as the same
JSON lines (backend "numpy").  Usage: python3 bench/numpy_vec.py [--quick] [--size N]... [--op OP]..."""
import json, sys, time
import numpy as np

def median_ns(f, sample, samples):
    f()
    ts = []
    for _ in range(samples):
        t = time.perf_counter(); k = 0
        while True:
            f(); k += 1
            el = time.perf_counter() - t
            if el >= sample:
                break
        ts.append(el / k * 1e9)
    ts.sort()
    return ts[len(ts) // 2]

def main():
    quick = "--quick" in sys.argv
    sizes = [int(float(v)) for k, v in zip(sys.argv, sys.argv[1:]) if k == "--size"] or [100_000, 10_000_000]
    only = [v for k, v in zip(sys.argv, sys.argv[1:]) if k == "--op"]
    sample, samples = (0.02, 5) if quick else (0.2, 7)
    for n in sizes:
        i = np.arange(n)
        a = ((i * 7919) % 1000).astype(np.float32) / 100 - 5
        b = ((i * 104729) % 1000).astype(np.float32) / 250 + 0.5
        o = np.empty_like(a)
        def softmax():
            e = np.exp(a - a.max()); np.divide(e, e.sum(), out=o)
        def gelu():
            # numpy has no erf; this is the tanh form numpy users write (rayo's is the exact one).
            np.multiply(0.5 * a, 1 + np.tanh(0.7978845608 * (a + 0.044715 * (a * a * a))), out=o)
        ops = {
            "add": (lambda: np.add(a, b, out=o), 12),
            "add_alloc": (lambda: a + b, 12),
            "dot": (lambda: np.dot(a, b), 8),
            "sum": (lambda: a.sum(), 4),
            "max": (lambda: a.max(), 4),
            "exp": (lambda: np.exp(a, out=o), 8),
            "tanh": (lambda: np.tanh(a, out=o), 8),
            "sigmoid": (lambda: np.divide(1, 1 + np.exp(-a), out=o), 8),
            "gelu": (gelu, 8),
            "softmax": (softmax, 8),
        }
        for op, (f, per) in ops.items():
            if only and op not in only:
                continue
            ns = median_ns(f, sample, samples)
            print(json.dumps({"op": op, "n": n, "backend": "numpy", "threads": 1, "ns": round(ns, 1),
                              "gbps": round(per * n / ns, 3)}))

if __name__ == "__main__":
    main()
