"""A load generator for OpenAI-compatible servers (`rayo serve`, `llama-server`): N concurrent
streams of fixed prompts and lengths; prints aggregate output tokens/s, time to first token and
inter-token latency (p50, p99). Standard library only (asyncio, raw HTTP/1.1 on loopback).

Usage: python bench/serve.py --url http://127.0.0.1:8080 --concurrency 8 --requests 32 --max-tokens 128
Each request is a streamed /v1/completions with ignore_eos (every request makes exactly
--max-tokens tokens), counted by the usage chunk (stream_options.include_usage), at
--temperature (0: greedy; 0.8 is llama-server's default request, with its top-k 40, top-p 0.95,
min-p 0.05 left to the server's defaults). --processes N spreads the streams over N processes (one
asyncio loop in one process tops out near 5-15 K tokens/s; use several where a server is faster).
A benchmark, not a test: it only reports.
"""

import argparse
import asyncio
import json
import multiprocessing
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


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--model", default=None)
    return ap.parse_args()


async def streams(a, first, count, concurrency):
    """Requests first..first+count over `concurrency` streams: their results (None: failed)."""
    u = urllib.parse.urlparse(a.url)
    assert u.hostname in ("127.0.0.1", "localhost", "::1"), "loopback only"
    sem = asyncio.Semaphore(concurrency)

    async def run(i):
        body = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": a.max_tokens, "temperature": a.temperature,
                "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
        if a.model:
            body["model"] = a.model
        async with sem:
            return await one(u.hostname, u.port or 80, "/v1/completions", body, a.api_key)

    return await asyncio.gather(*(run(i) for i in range(first, first + count)))


def worker(args):
    a, first, count, concurrency = args
    return asyncio.run(streams(a, first, count, concurrency))


def main():
    a = parse()
    p = max(1, min(a.processes, a.concurrency))
    # process j: its share of the requests and of the streams
    shares = [(a, sum(a.requests // p + (i < a.requests % p) for i in range(j)), a.requests // p + (j < a.requests % p),
               a.concurrency // p + (j < a.concurrency % p)) for j in range(p)]
    t0 = time.perf_counter()
    if p == 1:
        out = [worker(shares[0])]
    else:
        with multiprocessing.Pool(p) as pool:
            out = pool.map(worker, shares)
    wall = time.perf_counter() - t0
    results = [r for part in out for r in part if r]
    tokens = sum(r[2] for r in results)
    ttft = [r[0] for r in results if r[0] == r[0]]
    itl = [g for r in results for g in r[1]]
    print(f"{len(results)}/{a.requests} requests, concurrency {a.concurrency} over {p} process(es), "
          f"{a.max_tokens} tokens each, temperature {a.temperature}")
    print(f"aggregate output: {tokens / wall:.1f} tokens/s ({tokens} tokens in {wall:.2f} s)")
    print(f"time to first token: p50 {pct(ttft, 50) * 1e3:.1f} ms, p99 {pct(ttft, 99) * 1e3:.1f} ms")
    print(f"inter-token latency: p50 {pct(itl, 50) * 1e3:.1f} ms, p99 {pct(itl, 99) * 1e3:.1f} ms, "
          f"mean {statistics.fmean(itl) * 1e3 if itl else float('nan'):.1f} ms")


if __name__ == "__main__":
    main()
