"""`rayo serve` through the official OpenAI Python client, on loopback, with SmolLM2.

Starts one server (a free port, 4 slots, a queue of 16, an API key) and checks: both endpoints,
streamed and not, against `rayo generate`'s greedy text; stop strings, max_tokens, usage,
include_usage, logprobs, prefix reuse; 16 concurrent clients each equal to its prompt run
alone; faults with the server answering afterwards (a client gone mid-stream, malformed and
truncated JSON, wrong types, a prompt over the context, max_tokens 0 and huge, 401, 413, a
burst of 200 past the queue: some 429s, nothing lost among the accepted, memory back); a slow
reader; SIGTERM during a stream (it finishes, the server exits 0).

Usage: python test_server.py RAYO_BINARY MODEL_FILE
Prints one line per check and `test result: ok. N passed; M failed` at the end (exit 1 on any
failure). Every request goes to 127.0.0.1; every loop is bounded in count and time.
"""

import concurrent.futures as cf
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import openai

RAYO, MODEL = sys.argv[1], sys.argv[2]
KEY = "test-key-123"
CTX = 512
PARALLEL = 4
QUEUE = 16
THREADS = "2"

from prompts import PROMPTS  # noqa: E402 (this folder, next to the script)


class Server:
    """A `rayo serve` process on a free loopback port; its stderr is kept in `log`."""

    def __init__(self, grace=20, engine="batch", extra=(), env=None):
        cmd = [RAYO, "serve", "--model", MODEL, "--port", "0", "--ctx", str(CTX), "--parallel", str(PARALLEL),
               "--queue", str(QUEUE), "--threads", THREADS, "--api-key", KEY, "--grace", str(grace), "--keep-alive", "1",
               "--engine", engine, *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                     env={**os.environ, **(env or {})})
        self.log = []
        self.addr = None
        got = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://([0-9.]+:[0-9]+)", line)
                if m and not self.addr:
                    self.addr = m.group(1)
                    got.set()
            got.set()

        threading.Thread(target=drain, daemon=True).start()
        if not got.wait(60) or not self.addr:
            raise RuntimeError("the server printed no address:\n" + "".join(self.log))
        self.host, self.port = self.addr.split(":")
        deadline = time.time() + 120
        while time.time() < deadline:
            status, _ = self.raw("GET", "/health", None, auth=False)
            if status == 200:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("/health never became 200:\n" + "".join(self.log))
        self.client = openai.OpenAI(base_url=f"http://{self.addr}/v1", api_key=KEY, max_retries=0, timeout=120)

    def raw(self, method, path, body, auth=True, headers=None, timeout=60):
        """(status, body bytes) of one request over http.client."""
        c = http.client.HTTPConnection(self.host, int(self.port), timeout=timeout)
        h = {"Content-Type": "application/json"}
        if auth:
            h["Authorization"] = f"Bearer {KEY}"
        h.update(headers or {})
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, r.read()
        except (ConnectionError, OSError):
            return None, b""
        finally:
            c.close()

    def metric(self, name):
        status, text = self.raw("GET", "/metrics", None)
        assert status == 200, status
        m = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text.decode(), re.M)
        return float(m.group(1)) if m else None

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


def generate(prompt, max_tokens):
    """`rayo generate`'s greedy continuation (stdout is the prompt, the text, a newline)."""
    out = subprocess.run([RAYO, "generate", "--model", MODEL, "--prompt", prompt, "--max-tokens", str(max_tokens),
                          "--temperature", "0", "--threads", THREADS, "--ctx", str(CTX)],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.startswith(prompt) and out.endswith("\n"), repr(out)
    return out[len(prompt):-1]


def greedy(srv, prompt, max_tokens=24, **kw):
    r = srv.client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=max_tokens, temperature=0, **kw)
    return r


def stream_text(srv, **kw):
    """(text, chunks) of a streamed chat or completion request."""
    chat = "messages" in kw
    create = srv.client.chat.completions.create if chat else srv.client.completions.create
    chunks = list(create(model=MODEL_ID, stream=True, **kw))
    text = ""
    for c in chunks:
        if c.choices:
            text += (c.choices[0].delta.content or "") if chat else c.choices[0].text
    return text, chunks


RESULTS = []


def check(name):
    def wrap(f):
        RESULTS.append((name, f))
        return f
    return wrap


# ---------------------------------------------------------------- the API, one request at a time

@check("models lists the one model")
def _(srv):
    ids = [m.id for m in srv.client.models.list().data]
    assert ids == [MODEL_ID], ids


@check("completions: greedy text equals rayo generate's (multi-byte text too)")
def _(srv):
    for p in PROMPTS[:3] + ["日本の首都は"]:
        want = generate(p, 24)
        r = greedy(srv, p)
        assert r.choices[0].text == want, (p, r.choices[0].text, want)
        assert r.object == "text_completion" and r.id.startswith("cmpl-")


@check("chat: greedy text equals rayo generate's on the rendered template")
def _(srv):
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2 + 2?"}]
    status, body = srv.raw("POST", "/apply-template", json.dumps({"messages": messages}))
    assert status == 200, body
    rendered = json.loads(body)["prompt"]
    want = generate(rendered, 32)
    r = srv.client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=32, temperature=0)
    assert r.choices[0].message.content == want, (r.choices[0].message.content, want)
    assert r.choices[0].message.role == "assistant" and r.object == "chat.completion"
    assert r.choices[0].finish_reason in ("stop", "length")


@check("chat stream: one id, role first, content equals the whole answer, finish_reason, include_usage")
def _(srv):
    messages = [{"role": "user", "content": "Name three colours."}]
    whole = srv.client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=20, temperature=0)
    text, chunks = stream_text(srv, messages=messages, max_tokens=20, temperature=0, stream_options={"include_usage": True})
    assert text == whole.choices[0].message.content, (text, whole.choices[0].message.content)
    assert len({c.id for c in chunks}) == 1, "one id in every chunk"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    choice_chunks = [c for c in chunks if c.choices]
    assert all(c.choices[0].finish_reason is None for c in choice_chunks[:-1])
    assert choice_chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None, last
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens


@check("completion stream equals the non-streamed text; no usage chunk unless asked")
def _(srv):
    p = PROMPTS[3]
    text, chunks = stream_text(srv, prompt=p, max_tokens=24, temperature=0)
    assert text == greedy(srv, p).choices[0].text
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


@check("the raw SSE: data lines, [DONE] last")
def _(srv):
    body = json.dumps({"model": MODEL_ID, "prompt": "Hi", "max_tokens": 4, "temperature": 0, "stream": True})
    status, raw = srv.raw("POST", "/v1/completions", body)
    assert status == 200, raw
    events = raw.decode().split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]", events[-3:]
    assert all(e.startswith("data: ") for e in events[:-1]), events


@check("stop strings: the text ends before the stop, never includes it, across tokens and in a stream")
def _(srv):
    p = PROMPTS[2]
    full = greedy(srv, p, 40).choices[0].text
    stop = full[12:17]
    want = full[: full.index(stop)]
    r = greedy(srv, p, 40, stop=[stop, "never-appears"])
    assert r.choices[0].text == want and r.choices[0].finish_reason == "stop", (r.choices[0].text, want, stop)
    text, chunks = stream_text(srv, prompt=p, max_tokens=40, temperature=0, stop=stop)
    assert text == want, (text, want)
    assert [c for c in chunks if c.choices][-1].choices[0].finish_reason == "stop"


@check("max_tokens: exactly that many with ignore_eos, finish_reason length")
def _(srv):
    r = greedy(srv, "Hello", 7, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length", r
    r = srv.client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}],
                                          max_completion_tokens=3, temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"


@check("usage: prompt tokens as /tokenize counts them")
def _(srv):
    p = PROMPTS[4]
    status, body = srv.raw("POST", "/tokenize", json.dumps({"content": p, "add_special": True}))
    assert status == 200, body
    n = len(json.loads(body)["tokens"])
    r = greedy(srv, p, 5)
    assert r.usage.prompt_tokens == n and r.usage.total_tokens == n + r.usage.completion_tokens, (r.usage, n)
    status, body = srv.raw("POST", "/detokenize", json.dumps({"tokens": json.loads(body)["tokens"]}))
    assert status == 200 and p in json.loads(body)["content"], body


@check("logprobs: chat tokens spell the text, top_logprobs sorted, greedy picks the top")
def _(srv):
    r = srv.client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Say hello."}],
                                          max_tokens=12, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        lps = [x.logprob for x in t.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        assert t.top_logprobs[0].token == t.token and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5
    text, chunks = stream_text(srv, messages=[{"role": "user", "content": "Say hello."}], max_tokens=12, temperature=0,
                               logprobs=True, top_logprobs=2)
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert "".join(t.token for t in streamed) == text == r.choices[0].message.content


@check("logprobs: the completions form")
def _(srv):
    r = greedy(srv, PROMPTS[0], 6, logprobs=2)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text and len(lp.token_logprobs) == len(lp.tokens)
    assert all(len(t) <= 2 for t in lp.top_logprobs) and lp.text_offset[0] == 0


@check("prefix reuse: the same prompt again reports cached tokens and the same text")
def _(srv):
    p = "A long shared system prompt that many requests begin with: be brief, be kind, be correct. " + PROMPTS[5]
    a = greedy(srv, p, 10)
    b = greedy(srv, p, 10)
    assert a.choices[0].text == b.choices[0].text
    cached = b.usage.prompt_tokens_details.cached_tokens
    assert cached >= a.usage.prompt_tokens - 2 and cached > 0, b.usage


@check("seeded sampling repeats")
def _(srv):
    kw = dict(model=MODEL_ID, prompt=PROMPTS[1], max_tokens=16, temperature=1.0, top_p=1.0, seed=42,
              extra_body={"top_k": 0, "min_p": 0})
    a = srv.client.completions.create(**kw)
    b = srv.client.completions.create(**kw)
    assert a.choices[0].text == b.choices[0].text


@check("seeded default sampling: the same text alone and among 8 concurrent requests")
def _(srv):
    # (the server's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05: the draw from
    # each step's 40 best logits; ignore_eos bans the end tokens, so 24 tokens each)
    kw = dict(model=MODEL_ID, max_tokens=24, seed=1234, extra_body={"ignore_eos": True})
    alone = {p: srv.client.completions.create(prompt=p, **kw).choices[0].text for p in PROMPTS[:4]}
    assert len(set(alone.values())) == 4, alone
    with cf.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda i: (PROMPTS[i % 4], srv.client.completions.create(prompt=PROMPTS[i % 4], **kw).choices[0].text), range(8)))
    bad = [(p, t, alone[p]) for p, t in got if t != alone[p]]
    assert not bad, bad
    other = srv.client.completions.create(prompt=PROMPTS[0], **{**kw, "seed": 4321}).choices[0].text
    assert other != alone[PROMPTS[0]], "another seed, the same 24 tokens"


@check("logit_bias: +100 forces a token, -100 bans the greedy one, a bad id is a 400")
def _(srv):
    status, body = srv.raw("POST", "/tokenize", json.dumps({"content": " cat"}))
    assert status == 200, body
    cat = json.loads(body)["tokens"][0]
    status, body = srv.raw("POST", "/detokenize", json.dumps({"tokens": [cat] * 3}))
    forced = srv.client.completions.create(model=MODEL_ID, prompt=PROMPTS[2], max_tokens=3, temperature=0.8,
                                           logit_bias={str(cat): 100}, extra_body={"ignore_eos": True})
    assert forced.choices[0].text == json.loads(body)["content"], (forced.choices[0].text, body)
    plain = greedy(srv, PROMPTS[2], 1)
    first = plain.choices[0].text
    status, body = srv.raw("POST", "/tokenize", json.dumps({"content": first}))
    ids = json.loads(body)["tokens"]
    assert len(ids) == 1, (first, ids)
    banned = greedy(srv, PROMPTS[2], 1, logit_bias={str(ids[0]): -100})
    assert banned.choices[0].text != first, first
    try:
        greedy(srv, PROMPTS[2], 1, logit_bias={"99999999": 1})
        raise AssertionError("a logit_bias past the vocabulary was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "logit_bias" and "past the vocabulary" in e.body["message"], e.body


# ---------------------------------------------------------------- many at once

@check("16 concurrent clients (8 streamed): each greedy text equals its prompt run alone")
def _(srv):
    alone = {p: greedy(srv, p, 20).choices[0].text for p in PROMPTS}

    def one(i):
        p = PROMPTS[i]
        if i % 2:
            return p, stream_text(srv, prompt=p, max_tokens=20, temperature=0)[0]
        return p, greedy(srv, p, 20).choices[0].text

    with cf.ThreadPoolExecutor(16) as ex:
        got = list(ex.map(one, range(16)))
    bad = [(p, t, alone[p]) for p, t in got if t != alone[p]]
    assert not bad, bad
    assert srv.metric("rayo_active_slots") == 0


@check("a long prompt (64+ tokens) beside running streams, then from the cache: rayo generate's text")
def _(srv):
    long = " ".join(PROMPTS[:10])
    want = generate(long, 16)
    with cf.ThreadPoolExecutor(4) as ex:
        others = [ex.submit(stream_text, srv, prompt=p, max_tokens=40, temperature=0) for p in PROMPTS[10:13]]
        time.sleep(0.2)
        first = ex.submit(greedy, srv, long, 16).result()
        [o.result() for o in others]
    again = greedy(srv, long, 16)
    assert first.usage.prompt_tokens >= 64, first.usage
    assert first.choices[0].text == want and again.choices[0].text == want, (first.choices[0].text, again.choices[0].text, want)
    assert again.usage.prompt_tokens_details.cached_tokens > 0, again.usage


# ---------------------------------------------------------------- faults

@check("echo with logprobs scores the prompt (lm-evaluation-harness's request): tokens, null first, the greedy token on top")
def _(srv):
    p = PROMPTS[3]
    gen = srv.client.completions.create(model=MODEL_ID, prompt=p, max_tokens=1, temperature=0, logprobs=1,
                                        extra_body={"ignore_eos": True})
    tok, lp_gen = gen.choices[0].logprobs.tokens[0], gen.choices[0].logprobs.token_logprobs[0]
    for max_tokens in (0, 2):
        r = srv.client.completions.create(model=MODEL_ID, prompt=p + tok, max_tokens=max_tokens, temperature=0, echo=True,
                                          logprobs=3, extra_body={"ignore_eos": True})
        c = r.choices[0]
        lp = c.logprobs
        n = r.usage.prompt_tokens
        assert r.usage.completion_tokens == max_tokens and c.text.startswith(p + tok), (r.usage, c.text)
        assert "".join(lp.tokens[:n]) == p + tok, lp.tokens[:n]
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None, (lp.token_logprobs[0], lp.top_logprobs[0])
        assert all(x <= 0 for x in lp.token_logprobs[1:n]), lp.token_logprobs[:n]
        assert all(len(t) == 3 for t in lp.top_logprobs[1:n]), lp.top_logprobs[:n]
        # the token the model chose after p is its most likely there, with the logprob it had
        assert lp.tokens[n - 1] == tok and lp.token_logprobs[n - 1] == max(lp.top_logprobs[n - 1].values())
        assert abs(lp.token_logprobs[n - 1] - lp_gen) < 0.05, (lp.token_logprobs[n - 1], lp_gen)
        assert len(lp.tokens) == n + max_tokens


@check("malformed, truncated and wrongly typed JSON: 400 in OpenAI's shape")
def _(srv):
    cases = [
        ("/v1/chat/completions", b"{not json"),
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}'),
        ("/v1/completions", b""),
        ("/v1/completions", b"[1, 2, 3]"),
        ("/v1/completions", b'{"prompt": "x", "temperature": "hot"}'),
        ("/v1/completions", b'{"prompt": "x", "max_tokens": "ten"}'),
        ("/v1/chat/completions", b'{"messages": "hello"}'),
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stop": 5}'),
        ("/v1/completions", b'{"prompt": "x", "n": 2}'),
        ("/v1/completions", b'{"prompt": "x", "suffix": "y"}'),
        ("/v1/completions", b'{"prompt": "x", "best_of": 2}'),
        ("/v1/completions", b'{"prompt": "x", "max_tokens": 0}'),
        ("/v1/completions", b'\xff\xfe\x00garbage'),
    ]
    for path, body in cases:
        status, raw = srv.raw("POST", path, body)
        assert status == 400, (path, body, status, raw)
        err = json.loads(raw)["error"]
        assert err["type"] == "invalid_request_error" and err["message"], err
    try:
        srv.client.completions.create(model=MODEL_ID, prompt="x", temperature=-1)
        raise AssertionError("temperature -1 was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "temperature", e.body
    # unknown fields are ignored (and logged)
    r = srv.client.completions.create(model=MODEL_ID, prompt="x", max_tokens=2, extra_body={"no_such_field": [1, {"a": 2}]})
    assert r.usage.completion_tokens <= 2
    # another model's name: this model answers, and says so
    r = srv.client.completions.create(model="gpt-4", prompt="x", max_tokens=2)
    assert r.model == MODEL_ID and r.usage.completion_tokens <= 2, r


@check("a prompt over the context: 400 naming both numbers")
def _(srv):
    try:
        srv.client.completions.create(model=MODEL_ID, prompt="hello " * 700, max_tokens=4)
        raise AssertionError("accepted")
    except openai.BadRequestError as e:
        msg = e.body["message"]
        assert str(CTX) in msg and re.search(r"\b7\d\d\b", msg), msg


@check("max_tokens huge: clamped to the context, ends with length or stop")
def _(srv):
    r = greedy(srv, "Count: 1, 2, 3,", 10**12)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens + r.usage.completion_tokens <= CTX + 1, r.usage


@check("401 without the key (Bearer or X-Api-Key work), /health open; 404 and 405 JSON; 413 over the body limit")
def _(srv):
    body = json.dumps({"prompt": "x", "max_tokens": 1})
    status, raw = srv.raw("POST", "/v1/completions", body, auth=False)
    assert status == 401 and json.loads(raw)["error"]["type"] == "authentication_error", (status, raw)
    status, _ = srv.raw("POST", "/v1/completions", body, auth=False, headers={"Authorization": "Bearer wrong"})
    assert status == 401
    status, _ = srv.raw("POST", "/v1/completions", body, auth=False, headers={"X-Api-Key": KEY})
    assert status == 200
    status, _ = srv.raw("GET", "/metrics", None, auth=False)
    assert status == 401
    assert srv.raw("GET", "/health", None, auth=False)[0] == 200
    status, raw = srv.raw("GET", "/nowhere", None)
    assert status == 404 and "error" in json.loads(raw)
    status, raw = srv.raw("GET", "/v1/completions", None)
    assert status == 405 and "error" in json.loads(raw), (status, raw)
    status, raw = srv.raw("POST", "/v1/completions", b'{"prompt": "' + b"a" * (5 << 20) + b'"}')
    assert status == 413, status


@check("a client gone mid-stream frees its slot within a step; the server answers afterwards")
def _(srv):
    before = srv.metric("rayo_requests_cancelled_total")
    s = srv.client.completions.create(model=MODEL_ID, prompt=PROMPTS[6], max_tokens=400, temperature=0, stream=True,
                                      extra_body={"ignore_eos": True})
    for i, _ in enumerate(s):
        if i == 3:
            break
    s.close()
    deadline = time.time() + 10
    while time.time() < deadline and not (srv.metric("rayo_active_slots") == 0 and srv.metric("rayo_requests_cancelled_total") > before):
        time.sleep(0.05)
    assert srv.metric("rayo_active_slots") == 0 and srv.metric("rayo_requests_cancelled_total") > before
    # 400 tokens were asked for: far fewer ran
    assert greedy(srv, PROMPTS[0]).choices[0].text


@check("a streamed request waiting for a slot gets keep-alive comments, then its answer")
def _(srv):
    busy = json.dumps({"model": MODEL_ID, "prompt": "Tell me a story.", "max_tokens": 120, "temperature": 0, "ignore_eos": True})
    with cf.ThreadPoolExecutor(PARALLEL) as ex:
        hogs = [ex.submit(srv.raw, "POST", "/v1/completions", busy) for _ in range(PARALLEL)]
        time.sleep(0.3)
        c = http.client.HTTPConnection(srv.host, int(srv.port), timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({"model": MODEL_ID, "prompt": "Hi", "max_tokens": 3, "stream": True}),
                  headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
        r = c.getresponse()
        assert r.status == 200, r.status
        lines = []
        while True:
            line = r.readline().decode()
            if not line:
                break
            lines.append(line.strip())
        c.close()
        assert all(h.result()[0] == 200 for h in hogs)
    first_data = next(i for i, line in enumerate(lines) if line.startswith("data: "))
    assert ": keep-alive" in lines[:first_data], lines[:5]
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]", lines[-3:]


@check("a slow reader gets the whole stream")
def _(srv):
    want = greedy(srv, PROMPTS[7], 16).choices[0].text
    text = ""
    for c in srv.client.completions.create(model=MODEL_ID, prompt=PROMPTS[7], max_tokens=16, temperature=0, stream=True):
        time.sleep(0.1)
        text += c.choices[0].text
    assert text == want


@check("a burst of 200 past the queue: some 429s, every accepted one complete and right, memory back")
def _(srv):
    p = PROMPTS[8]
    want = greedy(srv, p, 6).choices[0].text
    rss0 = srv.rss_kb()

    def one(i):
        try:
            if i % 2:
                return "ok", stream_text(srv, prompt=p, max_tokens=6, temperature=0)[0]
            return "ok", greedy(srv, p, 6).choices[0].text
        except openai.RateLimitError:
            return "429", None

    with cf.ThreadPoolExecutor(64) as ex:
        got = list(ex.map(one, range(200)))
    n429 = sum(1 for s, _ in got if s == "429")
    ok = [t for s, t in got if s == "ok"]
    assert n429 > 0, "no 429 in a burst of 200 against a queue of 16"
    assert len(ok) + n429 == 200 and all(t == want for t in ok), [t for t in ok if t != want][:3]
    gauges = (srv.metric("rayo_queue_length"), srv.metric("rayo_active_slots"))
    assert gauges == (0, 0), gauges
    rss1 = srv.rss_kb()
    print(f"  burst: {len(ok)} served, {n429} got 429; resident {rss0 / 1e3:.1f} MB before, {rss1 / 1e3:.1f} MB after")
    assert rss1 < rss0 + 64_000, (rss0, rss1)
    assert greedy(srv, PROMPTS[0]).choices[0].text


def sigterm_check():
    """SIGTERM during a stream: the stream finishes, new requests are refused, exit 0. This
    server runs `--engine pool` (one session per slot, what GPU backends use): its greedy text
    equals rayo generate's too."""
    srv = Server(engine="pool")
    try:
        with cf.ThreadPoolExecutor(3) as ex:
            got = list(ex.map(lambda p: greedy(srv, p, 12).choices[0].text, PROMPTS[:3]))
        assert got == [generate(p, 12) for p in PROMPTS[:3]], got
        s = srv.client.completions.create(model=MODEL_ID, prompt=PROMPTS[9], max_tokens=48, temperature=0, stream=True,
                                          extra_body={"ignore_eos": True})
        text, n, finish = "", 0, None
        for c in s:
            if n == 2:
                srv.proc.send_signal(signal.SIGTERM)
                time.sleep(0.3)
                status, _ = srv.raw("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 1}), timeout=5)
                assert status in (None, 503), f"a new request during the drain got {status}"
            n += 1
            text += c.choices[0].text
            finish = c.choices[0].finish_reason or finish
        assert finish == "length", finish
        rc = srv.proc.wait(30)
        assert rc == 0, rc
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def grace_check():
    """SIGTERM with a stream longer than the grace period: it ends with an error event, exit 0."""
    srv = Server(grace=1)
    try:
        s = srv.client.completions.create(model=MODEL_ID, prompt=PROMPTS[10], max_tokens=400, temperature=0, stream=True,
                                          extra_body={"ignore_eos": True})
        t0, n = time.time(), 0
        try:
            for _ in s:
                if n == 2:
                    srv.proc.send_signal(signal.SIGTERM)
                n += 1
            raise AssertionError(f"the stream ran to its end ({n} chunks) past a 1 s grace period")
        except openai.APIError as e:
            assert "shutting down" in str(e), e
        assert n < 300, n
        rc = srv.proc.wait(30)
        assert rc == 0 and time.time() - t0 < 20, (rc, time.time() - t0)
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def slow_client_and_fault_check():
    """A client that sends its headers a byte a second is cut off at --header-timeout while the
    server answers others; then an engine fault (RAYO_TEST_ENGINE_FAULT: every step after the
    first 40 fails, as a sticky CUDA fault would): the request in flight ends with the error,
    /health turns 503 naming it, new requests get 503, and the server exits 1 (an orchestrator
    restarts it)."""
    srv = Server(extra=["--header-timeout", "2"], env={"RAYO_TEST_ENGINE_FAULT": "40"})
    try:
        import socket
        sock = socket.create_connection((srv.host, int(srv.port)), timeout=10)
        t0, sent, closed = time.time(), 0, False
        request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 64
        try:
            for b in request:
                sock.sendall(bytes([b]))
                sent += 1
                if sent == 2:
                    # the server serves others meanwhile
                    assert greedy(srv, PROMPTS[0], 4).choices[0].text
                time.sleep(0.25)
        except OSError:
            closed = True
        if not closed:
            sock.settimeout(5)
            closed = sock.recv(1024) == b""
        waited = time.time() - t0
        sock.close()
        assert closed and waited < 6, f"a trickling client still connected after {waited:.1f} s (header limit 2 s)"
        # the fault: a long request meets it mid-stream
        try:
            srv.client.completions.create(model=MODEL_ID, prompt=PROMPTS[1], max_tokens=200, temperature=0,
                                          extra_body={"ignore_eos": True})
            raise AssertionError("a request ran past the injected fault")
        except openai.APIError as e:
            assert "fault injected" in str(e) or "engine" in str(e), e
        status, body = srv.raw("GET", "/health", None, auth=False)
        assert status in (503, None), (status, body)
        if status == 503:
            assert b"fault injected" in body, body
        rc = srv.proc.wait(30)
        assert rc == 1, f"exit status {rc} after an engine fault (1 expected)"
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def main():
    global MODEL_ID
    MODEL_ID = os.path.basename(MODEL).removesuffix(".gguf")
    t0 = time.time()
    passed = failed = 0
    srv = Server()
    try:
        for name, f in RESULTS:
            t = time.time()
            try:
                f(srv)
                passed += 1
                print(f"ok   {name} ({time.time() - t:.1f} s)", flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is reported, the rest still run
                failed += 1
                print(f"FAIL {name}: {type(e).__name__}: {e!r}"[:2000], flush=True)
        alive = srv.proc.poll() is None
        print(("ok   " if alive else "FAIL ") + "the server is still running after every fault", flush=True)
        passed, failed = passed + alive, failed + (not alive)
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        try:
            srv.proc.wait(30)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
    lines = [line for line in srv.log if " 200 prompt " in line]
    print(f"  the server logged {len(srv.log)} lines, {len(lines)} finished generations")
    # the checks that start servers of their own, after the shared one has stopped
    for f, name in [
        (sigterm_check, "--engine pool: greedy text; SIGTERM during a stream: it finishes, new requests are refused, exit 0"),
        (grace_check, "SIGTERM with a stream past the grace period: it ends with an error event, exit 0"),
        (slow_client_and_fault_check, "a trickling client cut off at --header-timeout; an engine fault: the error, /health 503, exit 1"),
    ]:
        try:
            f()
            passed += 1
            print(f"ok   {name}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported, the rest still run
            failed += 1
            print(f"FAIL {name}: {e!r}", flush=True)
    print(f"serve tests took {time.time() - t0:.0f} s")
    print(f"test result: {'ok' if failed == 0 else 'FAILED'}. {passed} passed; {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
