"""Runs `rayo bench --json` and the numpy/OpenBLAS references in one go and prints a markdown
table of rayo vs reference with the ratio, for docs/perf/.  Usage:
    python3 bench/compare.py [--quick] [--rayo target/release/rayo] [--peers [--peers-only]
                             [--peers-target DIR] [--reps N]]
The matmul reference is OpenBLAS with its AVX-512 (SkylakeX) kernels on 1 and 2 threads
(interleaved with rayo, best of 3 each); the vector reference is numpy on 1 thread.

--peers also builds bench/peers (trueno per ISA, faer, the STREAM triad; a crate outside the
workspace, built with -C target-cpu=native into DIR, default target/peers) and prints issue 15's
goals: dot and max at 100K >= 1.0x the best peer, sum >= 1.2x, add at 10M >= 0.9x the STREAM
triad, 1 thread; rayo, the peers and numpy interleaved, best of N (3; 1 with --quick) each."""
import json, os, subprocess, sys

def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]

# Issue 15's goals: (op, n, goal, which peers count: None = every peer of that op).
# The last row has no goal: add beside the best add kernel of the peers (trueno's, streaming).
GOALS = [("dot", 100_000, 1.0, None), ("max", 100_000, 1.0, None), ("sum", 100_000, 1.2, None),
         ("add", 10_000_000, 0.9, "stream"), ("add", 10_000_000, None, None)]

def build_peers(here, target):
    manifest = os.path.join(here, "peers", "Cargo.toml")
    env = {"CARGO_TARGET_DIR": target, "RUSTFLAGS": "-C target-cpu=native"}
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", manifest],
                   env={**os.environ, **env}, check=True)
    return os.path.join(target, "release", "rayo-peers")

def peers(rayo, here, quick, reps, target):
    """Best of `reps` interleaved runs of rayo, the Rust peers and numpy per (op, n, backend);
    returns the goal rows (op, n, rayo row, best peer row, goal)."""
    exe = build_peers(here, target)
    small = [o for o, n, _, _ in GOALS if n == 100_000]
    best = {}
    def keep(rows, src):
        for r in rows:
            # The STREAM triad is the reference of add.
            key = (src, "add" if r["op"] == "stream_triad" else r["op"], r["n"], r["backend"])
            if key not in best or r["ns"] < best[key]["ns"]:
                best[key] = r
    ops = lambda os_: sum([["--op", o] for o in os_], [])
    for _ in range(reps):
        keep(run([rayo, "bench", "--backend", "cpu", "--json", "--threads", "1", "--size", "100000", *quick] + ops(small)), "rayo")
        keep(run([rayo, "bench", "--backend", "cpu", "--json", "--threads", "1", "--size", "10000000", "--op", "add", *quick]), "rayo")
        keep(run([exe, "--size", "100000", *quick] + ops(small)), "peer")
        keep(run([exe, "--size", "10000000", "--op", "add", "--op", "stream_triad", *quick]), "peer")
        keep(run([sys.executable, os.path.join(here, "numpy_vec.py"), "--size", "100000", *quick] + ops(small),
                 {"OPENBLAS_NUM_THREADS": "1"}), "peer")
    out = []
    for op, n, goal, only in GOALS:
        ours = [r for (src, o, m, _), r in best.items() if (src, o, m) == ("rayo", op, n)]
        theirs = [r for (src, o, m, b), r in best.items() if (src, o, m) == ("peer", op, n) and only in (None, b)]
        if ours and theirs:
            out.append((op, n, ours[0], min(theirs, key=lambda r: r["ns"]), goal))
    return out

def print_peers(rows):
    print("| op | n | rayo | best peer | ratio | goal | met |")
    print("|---|---|---|---|---|---|---|")
    for op, n, r, p, goal in rows:
        ratio = p["ns"] / r["ns"]
        met = "-" if goal is None else "yes" if ratio >= goal else "no"
        print(f"| {op} | {n} | {r['ns'] / 1e3:.2f} µs ({r['gbps']:.0f} GB/s) | {p['backend']} {p['ns'] / 1e3:.2f} µs "
              f"({p['gbps']:.0f} GB/s) | {ratio:.2f} | {'-' if goal is None else f'{goal:.1f}'} | {met} |")

def main():
    args = sys.argv[1:]
    quick = ["--quick"] if "--quick" in args else []
    rayo = args[args.index("--rayo") + 1] if "--rayo" in args else "target/release/rayo"
    here = os.path.dirname(os.path.abspath(__file__))
    if "--peers" in args or "--peers-only" in args:
        target = args[args.index("--peers-target") + 1] if "--peers-target" in args else os.path.join(here, "..", "target", "peers")
        reps = int(args[args.index("--reps") + 1]) if "--reps" in args else (1 if quick else 3)
        print_peers(peers(rayo, here, quick, reps, target))
        if "--peers-only" in args:
            return
        print()
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
