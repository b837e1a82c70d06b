"""Markdown table: rayo wgpu rows beside PyTorch rows (and CPU rows) from `rayo bench --json`
and wgpu_torch.py output. Usage: python3 wgpu_table.py wgpu.jsonl torch.jsonl [cpu.jsonl]"""
import json
import sys


def load(path):
    rows = {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{") or '"op"' not in line:
            continue
        r = json.loads(line)
        rows[(r["op"], r["n"], r.get("note", ""))] = r
    return rows


def fmt_ns(ns):
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns / 1e6:.2f} ms"


def rate(r):
    if "gflops" in r:
        return f"{r['gflops'] / 1e3:.2f} TFLOP/s"
    return f"{r['gbps']:.0f} GB/s" if r["gbps"] >= 10 else f"{r['gbps']:.2f} GB/s"


wgpu, torch = load(sys.argv[1]), load(sys.argv[2])
cpu = load(sys.argv[3]) if len(sys.argv) > 3 else {}
print("| op | n | mode | rayo wgpu | rate | PyTorch | rate | PyTorch time / rayo time |")
print("|---|---|---|---|---|---|---|---|")
for key, r in wgpu.items():
    t = torch.get(key)
    if t is None and key[0] == "fused3":
        t = torch.get(("unfused3", key[1], key[2]))
    n = f"{key[1]}²" if key[0] == "matmul" else f"{key[1]:,}"
    tcol = f"{fmt_ns(t['ns'])} | {rate(t)} | {t['ns'] / r['ns']:.2f}" if t else "– | – | –"
    print(f"| {key[0]} | {n} | {key[2]} | {fmt_ns(r['ns'])} | {rate(r)} | {tcol} |")
if cpu:
    print()
    print("| op | n | rayo CPU (all cores) | rayo wgpu round trip | faster |")
    print("|---|---|---|---|---|")
    for (op, n, _), c in cpu.items():
        g = wgpu.get((op, n, "roundtrip"))
        if g:
            nn = f"{n}²" if op == "matmul" else f"{n:,}"
            print(f"| {op} | {nn} | {fmt_ns(c['ns'])} | {fmt_ns(g['ns'])} | {'GPU' if g['ns'] < c['ns'] else 'CPU'} |")
