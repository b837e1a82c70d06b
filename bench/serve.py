"""A load generator for OpenAI-compatible servers (`rayo serve`, `llama-server`): N concurrent
streams of fixed prompts and lengths; prints aggregate output tokens/s, time to first token and
inter-token latency (p50, p99). Standard library only (asyncio, raw HTTP/1.1 on loopback).

Usage: python bench/serve.py --url http://127.0.0.1:8080 --concurrency 8 --requests 32 --max-tokens 128
Each request is a streamed /v1/completions with temperature 0 and ignore_eos (every request
makes exactly --max-tokens tokens), counted by the usage chunk (stream_options.include_usage). A
benchmark, not a test: it only reports.
"""

import argparse
import asyncio
import json
import statistics
import time
import urllib.parse

PROMPTS = [
    "Once upon a time, in a small village by the sea,",
    "The history of the printing press begins",
    "Here is a short guide to growing tomatoes:",
    "The main differences between cats and dogs are",
]


async def one(host, port, path, body, key):
    """(time to first token, inter-token gaps, tokens) of one streamed request, or None when it
    failed. Tokens are the usage's completion_tokens (stream_options.include_usage); the times
    are those of the chunks with text (a token whose text is empty, or held back, sends none)."""
    reader, writer = await asyncio.open_connection(host, port)
    data = json.dumps(body).encode()
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{auth}"
                 f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    await writer.drain()
    t0 = time.perf_counter()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(status.decode().strip())
    times, tokens, failed = [], None, False
    while True:
        line = await reader.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue  # headers, chunk sizes, keep-alive comments
        if line == b"data: [DONE]":
            break
        ev = json.loads(line[6:])
        if "error" in ev:
            failed = True
        if ev.get("usage"):
            tokens = ev["usage"].get("completion_tokens")
        if ev.get("choices") and ev["choices"][0].get("text"):
            times.append(time.perf_counter())
    writer.close()
    if failed or tokens is None:
        return None
    ttft = times[0] - t0 if times else float("nan")
    return ttft, [b - a for a, b in zip(times, times[1:])], tokens


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--model", default=None)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    assert u.hostname in ("127.0.0.1", "localhost", "::1"), "loopback only"
    sem = asyncio.Semaphore(a.concurrency)

    async def run(i):
        body = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": a.max_tokens, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}, "ignore_eos": True}
        if a.model:
            body["model"] = a.model
        async with sem:
            return await one(u.hostname, u.port or 80, "/v1/completions", body, a.api_key)

    t0 = time.perf_counter()
    results = [r for r in await asyncio.gather(*(run(i) for i in range(a.requests))) if r]
    wall = time.perf_counter() - t0
    tokens = sum(r[2] for r in results)
    ttft = [r[0] for r in results if r[0] == r[0]]
    itl = [g for r in results for g in r[1]]
    print(f"{len(results)}/{a.requests} requests, concurrency {a.concurrency}, {a.max_tokens} tokens each")
    print(f"aggregate output: {tokens / wall:.1f} tokens/s ({tokens} tokens in {wall:.2f} s)")
    print(f"time to first token: p50 {pct(ttft, 50) * 1e3:.1f} ms, p99 {pct(ttft, 99) * 1e3:.1f} ms")
    print(f"inter-token latency: p50 {pct(itl, 50) * 1e3:.1f} ms, p99 {pct(itl, 99) * 1e3:.1f} ms, "
          f"mean {statistics.fmean(itl) * 1e3 if itl else float('nan'):.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
