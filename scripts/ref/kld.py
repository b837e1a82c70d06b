"""Compares two full-logit dumps of the same teacher-forced sequence: llama.cpp's (made by
scripts/ref/llm-refs.sh into .cache/ref/forced-TYPE.f32) and rayo's, both raw little-endian f32
[positions x vocab]. Prints top-1 agreement, mean/max KL(llama.cpp || rayo) in nats, and each
position where the argmaxes differ with both sides' top-2 gap (a near tie there means the flip is
numerical noise, not a bug).

usage: python scripts/ref/kld.py LLAMA.f32 RAYO.f32 [--vocab 49152] [--ids forced-ids.txt]
(.venv-ref/bin/python has numpy; --ids adds the input token of each disagreeing position)
"""
import argparse
import sys

import numpy as np


def load(path, vocab):
    x = np.fromfile(path, dtype="<f4")
    if x.size == 0 or x.size % vocab:
        sys.exit(f"kld: {path}: {x.size} floats is not a whole number of rows of {vocab}")
    return x.reshape(-1, vocab).astype(np.float64)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def top2_gap(row):
    a, b = np.partition(row, -2)[-2:]
    return abs(b - a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama")
    ap.add_argument("rayo")
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--ids", help="the input ids, one per line (forced-ids.txt)")
    a = ap.parse_args()
    p, q = load(a.llama, a.vocab), load(a.rayo, a.vocab)
    if p.shape != q.shape:
        sys.exit(f"kld: shapes differ: llama.cpp {p.shape}, rayo {q.shape}")
    if not (np.isfinite(p).all() and np.isfinite(q).all()):
        sys.exit(f"kld: non-finite logits: llama.cpp {(~np.isfinite(p)).sum()}, rayo {(~np.isfinite(q)).sum()}")
    ids = [int(t) for t in open(a.ids).read().split()] if a.ids else None
    lp, lq = log_softmax(p), log_softmax(q)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    tp, tq = p.argmax(axis=1), q.argmax(axis=1)
    agree = tp == tq
    n = len(p)
    print(f"positions {n}, vocab {a.vocab}")
    print(f"top-1 agreement {agree.sum()}/{n} = {100.0 * agree.mean():.2f}%")
    print(f"KL(llama.cpp||rayo) mean {kl.mean():.6f} max {kl.max():.6f} (at position {kl.argmax()}) nats")
    print(f"max |logit diff| {np.abs(p - q).max():.4f}")
    for i in np.flatnonzero(~agree):
        tok = f" input {ids[i]}" if ids else ""
        print(
            f"differs at {i}{tok}: llama.cpp top1 {tp[i]} (top-2 gap {top2_gap(p[i]):.4f}), "
            f"rayo top1 {tq[i]} (top-2 gap {top2_gap(q[i]):.4f}); llama.cpp's margin of its pick over rayo's "
            f"{p[i, tp[i]] - p[i, tq[i]]:.4f}, KL {kl[i]:.6f}"
        )


if __name__ == "__main__":
    main()
