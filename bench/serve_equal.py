#!/usr/bin/env python3
"""Batch invariance through a running `rayo serve`: N concurrent greedy completions of 17
prompts (the 16 of tests/serve/test_server.py and a long one of 64+ tokens), each text against
`rayo generate`'s for the same prompt run alone (same backend flags, same --ctx). Standard
library only (the GPU machine has no network for the openai client).

Usage: bench/serve_equal.py --url URL --rayo BIN --model FILE [--concurrency 64]
       [--max-tokens 32] [--ctx 1024] -- [flags for rayo generate, e.g. --backend cuda --deterministic]
Prints one line per differing text and a summary; exits 1 when any differs."""
import argparse
import concurrent.futures as cf
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "serve"))
from prompts import PROMPTS  # noqa: E402 (the server tests' prompts)

PROMPTS = PROMPTS + [" ".join(PROMPTS[:10])]


def generate(a, flags, prompt):
    cmd = [a.rayo, "generate", "--model", a.model, "--prompt", prompt, "--max-tokens", str(a.max_tokens),
           "--temperature", "0", "--ctx", str(a.ctx)] + flags
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.startswith(prompt) and out.endswith("\n"), repr(out)
    return out[len(prompt):-1]


def served(a, prompt):
    body = json.dumps({"model": a.model_id, "prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(a.url + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)["choices"][0]["text"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--rayo", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--ctx", type=int, default=1024)
    a, flags = p.parse_known_args()
    flags = [f for f in flags if f != "--"]
    with urllib.request.urlopen(a.url + "/v1/models", timeout=60) as r:
        a.model_id = json.load(r)["data"][0]["id"]
    alone = {q: generate(a, flags, q) for q in PROMPTS}
    jobs = [PROMPTS[i % len(PROMPTS)] for i in range(a.concurrency)]
    with cf.ThreadPoolExecutor(a.concurrency) as ex:
        got = list(ex.map(lambda q: served(a, q), jobs))
    bad = 0
    for q, t in zip(jobs, got):
        if t != alone[q]:
            bad += 1
            print(f"differs: {q[:40]!r}: served {t!r}, alone {alone[q]!r}")
    print(f"{len(jobs) - bad}/{len(jobs)} served texts ({a.concurrency} at once, {a.max_tokens} tokens) equal rayo generate {' '.join(flags)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
