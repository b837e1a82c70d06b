#!/usr/bin/env python3
"""The tests each section of the suite before issue 49 (scripts/test.sh at 8be7ce5) ran, counted
from the test binaries' own lists (`BINARY --list`): per section and crate, and how many of them
ran more than once. Run from the repository root after
`cargo test --workspace --release --no-run --message-format=json > /tmp/build.json` (the old
suite's native build); the cross-target sections' counts come from their own runs.
Usage: python3 docs/perf/issue49-before-counts.py /tmp/build.json"""
import collections, json, os, subprocess, sys

bins = {}
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        crate = os.path.basename(os.path.dirname(m["manifest_path"]))
        name = "lib" if m["target"]["kind"][0] == "lib" else m["target"]["name"]
        bins[(crate, name)] = m["executable"]

def tests(crate, name, filt=""):
    out = subprocess.run([bins[(crate, name)], "--list"], capture_output=True, text=True).stdout
    return [l[: -len(": test")] for l in out.splitlines() if l.endswith(": test") and filt in l]

def every(crate, skip=()):
    return [(crate, n) for (c, n) in bins if c == crate and n not in skip]

# (section, crate, binary, filter) as the old script's commands ran them (doctests apart)
runs = []
for crate in ["rayo", "rayo-formats", "rayo-ptx", "rayo-cli", "rayo-serve", "rayo-web"]:
    runs += [("cpu", c, n, "") for (c, n) in every(crate)]
runs += [("cpu", c, n, "") for (c, n) in every("rayo-llm", skip=("wgpu",))]
runs += [("debug", "rayo", n, "") for n in ["lib", "hostile", "errors", "quant"]]
runs += [("debug", "rayo-llm", n, "") for n in ["lib", "hostile"]]
runs += [("wgpu", "rayo", n, "") for n in ["gpu", "gpu_batch", "parity"]] + [("wgpu", "rayo", "lib", "gpu::"), ("wgpu", "rayo-llm", "wgpu", "")]
runs += [("ptx", c, n, "") for (c, n) in every("rayo-ptx")]
runs += [("cuda", "rayo", n, "") for n in ["cuda", "cuda_llm", "cuda_persistent", "parity"]]
runs += [("cuda", "rayo-llm", n, "") for n in ["cuda", "cuda_misuse", "cuda_ops", "cuda_batch"]] + [("cuda", "rayo-cli", "cuda_synth", "")]

per = collections.Counter()
seen = collections.Counter()
for section, crate, name, filt in runs:
    ts = tests(crate, name, filt)
    per[(section, crate)] += len(ts)
    for t in ts:
        seen[(crate, name, t)] += 1
for (section, crate), n in sorted(per.items()):
    print(f"{section:8} {crate:12} {n:5}")
print(f"native test runs: {sum(per.values())}; distinct tests: {len(seen)}; run more than once: {sum(1 for v in seen.values() if v > 1)} ({sum(v - 1 for v in seen.values())} extra runs)")
