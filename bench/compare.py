"""Runs `rayo bench --json` and the numpy/OpenBLAS references in one go and prints a markdown
table of rayo vs reference with the ratio, for docs/perf/.  Usage:
    python3 bench/compare.py [--quick] [--rayo target/release/rayo]
The matmul reference is OpenBLAS with its AVX-512 (SkylakeX) kernels on 1 and 2 threads
(interleaved with rayo, best of 3 each); the vector reference is numpy on 1 thread."""
import json, os, subprocess, sys

def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]

def main():
    args = sys.argv[1:]
    quick = ["--quick"] if "--quick" in args else []
    rayo = args[args.index("--rayo") + 1] if "--rayo" in args else "target/release/rayo"
    here = os.path.dirname(os.path.abspath(__file__))
    vec_ops = ["add", "dot", "sum", "max", "sigmoid", "tanh", "gelu", "exp", "softmax"]
    sizes = ["64", "256", "1024", "2048"]
    rows = []
    # Vector ops at 100K (numpy, 1 thread).
    ours = run([rayo, "bench", "--backend", "cpu", "--json", "--size", "100000", *quick] + sum([["--op", o] for o in vec_ops], []))
    ref = run([sys.executable, os.path.join(here, "numpy_vec.py"), "--size", "100000", *quick], {"OPENBLAS_NUM_THREADS": "1"})
    refs = {r["op"]: r for r in ref}
    for r in ours:
        if r["op"] in refs:
            rows.append((r["op"], "100000", 1, r["gbps"], refs[r["op"]]["gbps"], "GB/s", "numpy"))
    # matmul on 1 and 2 threads (OpenBLAS AVX-512 kernels), rayo and OpenBLAS interleaved size
    # by size and the best of `reps` kept for each, so drift of this machine's clock between
    # the two does not become a ratio.
    reps = 1 if quick else 3
    for t in (1, 2):
        for s in sizes:
            best = [0.0, 0.0]
            for _ in range(reps):
                ours = run([rayo, "bench", "--backend", "cpu", "--json", "--op", "matmul", "--threads", str(t), "--size", s, *quick])
                ref = run([sys.executable, os.path.join(here, "numpy_matmul.py"), "--size", s, *quick],
                          {"OPENBLAS_CORETYPE": "SkylakeX", "OPENBLAS_NUM_THREADS": str(t)})
                best = [max(best[0], ours[0]["gflops"]), max(best[1], ref[0]["gflops"])]
            rows.append(("matmul", s, t, best[0], best[1], "GFLOP/s", "OpenBLAS"))
    print("| op | n | threads | rayo | reference | ratio |")
    print("|---|---|---|---|---|---|")
    for op, n, t, a, b, unit, name in rows:
        print(f"| {op} | {n} | {t} | {a:.1f} {unit} | {b:.1f} {unit} ({name}) | {a / b:.2f} |")

if __name__ == "__main__":
    main()
