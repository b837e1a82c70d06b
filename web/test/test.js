// The browser test: every exported op of rayo_web on random inputs (NaN, ±inf, −0 included)
// against an f64 reference in JavaScript, then 16 greedy tokens of SmolLM2 Q4_1 that must equal
// the native CPU engine's (expected.json). Ends with one console line `WEBGPU_RESULT PASS|FAIL`.
import init, * as rayo from "./pkg/rayo_web.js";
import { erfc } from "./reference.js";

const out = document.getElementById("log");
const log = (s) => { console.log(s); out.textContent += s + "\n"; };
let failures = 0;
const fail = (s) => { failures++; log("FAIL " + s); };

// mulberry32: a seeded generator, so a failure can be reproduced.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const SPECIALS = [NaN, Infinity, -Infinity, -0, 0];
// n values in [-scale, scale), with every special at a random place when `specials`.
function values(n, seed, scale = 10, specials = true) {
  const r = rng(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (r() * 2 - 1) * scale;
  if (specials && n >= SPECIALS.length) SPECIALS.forEach((v) => { x[Math.floor(r() * n)] = v; });
  return x;
}
// One f32 ULP at |v| (normal range).
const ulp = (v) => (v === 0 || !isFinite(v) ? 0 : Math.pow(2, Math.max(Math.floor(Math.log2(Math.abs(v))), -126) - 23));
// |got − want| ≤ ulps·ulp(want) + abs; NaN only for NaN, infinities exactly; `exact` also
// compares the sign of zero.
function close(got, want, ulps, abs, exact = false) {
  if (Number.isNaN(want)) return Number.isNaN(got);
  if (!isFinite(want)) return got === want;
  if (exact) return Object.is(got, Math.fround(want));
  return Math.abs(got - want) <= ulps * ulp(want) + abs;
}
function checkArray(name, got, want, ulps, abs, exact) {
  if (got.length !== want.length) return fail(`${name}: ${got.length} values, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    if (!close(got[i], want[i], ulps, abs, exact)) return fail(`${name}: [${i}] = ${got[i]}, expected ${want[i]} (input-dependent tolerance ${ulps} ULP + ${abs})`);
  }
  log(`ok   ${name}`);
}

const relu = (x) => (x <= 0 ? 0 : x); // NaN stays NaN (x <= 0 is false)
const gelu = (x) => (x === -Infinity ? -0 : x === Infinity ? Infinity : x * 0.5 * erfc(-x / Math.SQRT2));
function softmax(x) {
  let mx = -Infinity;
  for (const v of x) mx = Number.isNaN(v) || Number.isNaN(mx) ? NaN : Math.max(mx, v);
  // a NaN or infinite maximum: every output NaN (rayo's semantics on every backend)
  if (!isFinite(mx)) return Array.from(x, () => NaN);
  const e = Array.from(x, (v) => Math.exp(v - mx));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / z);
}

async function timed(name, f) {
  const t0 = performance.now();
  const r = await f();
  log(`     ${name}: ${(performance.now() - t0).toFixed(1)} ms`);
  return r;
}

async function ops() {
  log("adapter: " + (await rayo.adapterInfo()));
  for (const [n, seed] of [[1, 1], [257, 2], [100003, 3]]) {
    const x = values(n, seed);
    // relu: exact, the sign of zero included (relu(−0) = +0)
    checkArray(`relu n=${n}`, await timed("relu", () => rayo.relu(x)), Array.from(x, relu), 0, 0, true);
    // gelu: rayo's GPU bound, 8 ULP + 1e-35 (erfc from Numerical Recipes' erfcc on the GPU)
    checkArray(`gelu n=${n}`, await rayo.gelu(x), Array.from(x, gelu), 8, 1e-35);
    // softmax of finite values: 4 ULP + 1e-9; with a NaN or +inf: all NaN
    const f = values(n, seed + 10, 20, false);
    checkArray(`softmax n=${n}`, await rayo.softmax(f), softmax(f), 4, 1e-9);
    if (n > 1) {
      const g = f.slice(); g[n >> 1] = -Infinity; // −inf: probability 0, the rest unchanged
      checkArray(`softmax with -inf n=${n}`, await rayo.softmax(g), softmax(g), 4, 1e-9);
      checkArray(`softmax with NaN/inf n=${n}`, await rayo.softmax(x), softmax(x), 0, 0);
    }
    // sum: |error| ≤ n·2⁻²⁴·Σ|x| (any summation order); NaN and ±inf as IEEE addition
    const exact = f.reduce((a, b) => a + b, 0), mag = f.reduce((a, b) => a + Math.abs(b), 0);
    const s = await timed("sum", () => rayo.sum(f));
    if (Math.abs(s - exact) > n * Math.pow(2, -24) * mag) fail(`sum n=${n}: ${s}, expected ${exact}`); else log(`ok   sum n=${n}`);
    const sn = await rayo.sum(x); // x holds NaN, inf and −inf
    if (n >= 5 && !Number.isNaN(sn)) fail(`sum with NaN n=${n}: ${sn}`); else log(`ok   sum with NaN/±inf n=${n}`);
    const h = f.slice(); if (n > 1) h[0] = Infinity;
    if (n > 1 && (await rayo.sum(h)) !== Infinity) fail(`sum with +inf n=${n}`);
  }
  // matmul: awkward shapes; |error| ≤ k·2⁻²⁴·Σ|a||b| + 1e-30; a NaN poisons its row, +inf
  // times positive b values gives +inf
  for (const [m, k, n] of [[1, 1, 1], [7, 33, 5], [65, 130, 67]]) {
    const a = values(m * k, m + k, 2, false), b = values(k * n, k + n, 2, false);
    if (m > 2) {
      a[1 * k + 2] = NaN;
      a[2 * k + 0] = Infinity;
      for (let j = 0; j < n; j++) b[j] = 0.5 + Math.abs(b[j]);
    }
    const c = await timed(`matmul ${m}x${k}x${n}`, () => rayo.matmul(a, b, m, k, n));
    let bad = c.length !== m * n ? `${c.length} values` : null;
    for (let i = 0; i < m && !bad; i++) for (let j = 0; j < n && !bad; j++) {
      let want = 0, mag = 0;
      for (let p = 0; p < k; p++) { want += a[i * k + p] * b[p * n + j]; mag += Math.abs(a[i * k + p] * b[p * n + j]); }
      const g = c[i * n + j];
      const ok = Number.isNaN(want) ? Number.isNaN(g) : !isFinite(want) ? g === want : Math.abs(g - want) <= k * Math.pow(2, -24) * mag + 1e-30;
      if (!ok) bad = `[${i},${j}] = ${g}, expected ${want}`;
    }
    if (bad) fail(`matmul ${m}x${k}x${n}: ${bad}`); else log(`ok   matmul ${m}x${k}x${n}`);
  }
  // bad input is an error naming the numbers, not a crash
  try { await rayo.matmul(new Float32Array(6), new Float32Array(6), 2, 4, 3); fail("matmul with a wrong shape did not fail"); }
  catch (e) { log("ok   matmul with a wrong shape: " + e.message); }
}

async function model() {
  const expected = await (await fetch("expected.json")).json();
  const res = await fetch("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!res.ok) return fail(`the model file: HTTP ${res.status}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const m = await timed("Model.load", () => rayo.Model.load(bytes));
  log("model: " + m.info());
  let streamed = "";
  const t0 = performance.now();
  const text = await m.generate(expected.prompt, expected.ids.length, 0, (t) => { streamed += t; });
  const dt = (performance.now() - t0) / 1000;
  const ids = Array.from(m.lastTokens());
  log(`generated ${ids.length} tokens in ${dt.toFixed(1)} s (${(ids.length / dt).toFixed(2)} tokens/s, prompt included): ${JSON.stringify(text)}`);
  if (JSON.stringify(ids) !== JSON.stringify(expected.ids)) fail(`greedy ids ${JSON.stringify(ids)}, the native CPU engine's ${JSON.stringify(expected.ids)}`);
  else if (text !== expected.prompt + expected.text || streamed !== expected.text) fail(`text ${JSON.stringify(text)} (streamed ${JSON.stringify(streamed)}), expected ${JSON.stringify(expected.prompt + expected.text)}`);
  else log(`ok   ${ids.length} greedy tokens equal the native CPU engine's`);
  // sampled: the same engine through the sampler; the prompt comes back first
  const sampled = await m.generate("The sea", 4, 0.8);
  const n = m.lastTokens().length;
  if (!sampled.startsWith("The sea") || n < 1 || n > 4) fail(`sampled generation: ${JSON.stringify(sampled)}, ${n} tokens`);
  else log(`ok   sampled generation (temperature 0.8): ${JSON.stringify(sampled)}`);
  // not a GGUF file: an error with the reason, not a crash
  try { await rayo.Model.load(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])); fail("Model.load of 8 bytes did not fail"); }
  catch (e) { log("ok   Model.load of 8 bytes: " + e.message); }
}

try {
  await init();
  await ops();
  if (!new URLSearchParams(location.search).has("nomodel")) await model();
} catch (e) {
  fail("exception: " + (e && e.stack ? e.stack : e));
}
console.log(`WEBGPU_RESULT ${failures ? "FAIL" : "PASS"} (${failures} failures)`);
