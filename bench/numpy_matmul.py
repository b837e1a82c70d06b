"""The reference for `rayo bench --op matmul`: numpy's OpenBLAS sgemm, timed the same way
(median of 7 samples of >= 0.2 s, or 5 of 20 ms with --quick), printed as the same JSON lines
(backend "openblas").  Run it with the AVX-512 kernels and a thread count, e.g.
    OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 python3 bench/numpy_matmul.py --size 1024
Usage: python3 bench/numpy_matmul.py [--quick] [--size N]..."""
import json, os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(__file__))
from numpy_vec import median_ns

def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    sizes = [int(args[i + 1]) for i, a in enumerate(args) if a == "--size"] or [64, 256, 1024, 2048]
    sample, samples = (0.02, 5) if quick else (0.2, 7)
    threads = int(os.environ.get("OPENBLAS_NUM_THREADS", "0") or 0)
    for n in sizes:
        rng = np.random.default_rng(1)
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        c = np.empty((n, n), np.float32)
        ns = median_ns(lambda: np.matmul(a, b, out=c), sample, samples)
        print(json.dumps({"op": "matmul", "n": n, "m": n, "k": n, "n_cols": n, "backend": "openblas",
                          "threads": threads, "ns": round(ns, 1), "gflops": round(2 * n ** 3 / ns, 3)}))

if __name__ == "__main__":
    main()
