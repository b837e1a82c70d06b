"""Fits the table-driven forms of tanh and gelu in crates/rayo/src/cpu/math.rs and writes their
coefficients to crates/rayo/src/cpu/math_tables.rs.

Both look up 32 intervals by the bits of b = a + offset (a = |x|, clamped): the exponent and top
three mantissa bits of b, so eight intervals per octave of b — narrow near 0 where the functions
bend, wide where they are flat. Interval k holds a polynomial in y = a − e_k, e_k its lower edge
(which the kernel rebuilds from b's bits, so only coefficients are looked up), by Horner's rule; its
constant term is the f32 value at the edge (the last Horner step adds a small correction to an
accurate constant), the others are refitted against that rounded constant. Interval 0 starts at 0
with a zero constant, so the result keeps full relative precision as a → 0.

  tanh:  tanh(a), offset 0.625, a ≤ 9.1 (tanh is 1 in f32 from 9.011 on): b in [0.625, 9.725]
         covers the last six eighths of [0.5, 1) and the first two of [8, 16), which share
         their five index bits, so no clamp of b is needed                         degree 4
  gelu:  g(u) = u Φ(−u) e^{u²/2}, offset 1, u ≤ 14.5 (the tail e^{−u²/2} g(u) is 0 in f32
         past 14.5)                                                               degree 5

Least squares on Chebyshev nodes with Lawson's reweighting towards minimax (tanh's error in its
result's ULP, g's relative error), the references from mpmath at 40 digits. Prints the worst fit
error of each table and, for tanh, the worst error in ULP of the float32 evaluation (with and
without FMA) on a dense sweep. Re-run to regenerate: python3 tools/fit_tables.py"""
import mpmath as mp, numpy as np, os
mp.mp.dps = 40

N = 32

def intervals(offset, top):
    """(index, lo, hi) of the intervals of a in [0, top] (b = a + offset), the last one ending
    at `top`; the indices must be distinct (b spans at most 32 eighths of octaves)."""
    out = []
    e = int(np.floor(np.log2(offset)))
    while 2.0 ** e < offset + top:
        for m in range(8):
            lo = 2.0 ** e * (1 + m / 8) - offset
            hi = 2.0 ** e * (1 + (m + 1) / 8) - offset
            if hi > 0 and lo < top:
                out.append((((127 + e) * 8 + m) % 32, max(lo, 0.0), min(hi, top)))
        e += 1
    assert len({k for k, _, _ in out}) == len(out) <= 32, "intervals share an index"
    return out

def fit_interval(f, lo, hi, deg, ulp_weight, n=300, iters=60):
    """Coefficients of y^0..y^deg on [lo, hi], each rounded to f32 in turn from y^0 up, the
    higher ones refitted against it (so the rounding of c1 costs less than its own 0.5 ULP)."""
    a = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    y = a - lo
    fy = np.array([float(f(mp.mpf(float(v)))) for v in a])
    # Relative error, or error in units of the float32 result's ULP (what the bound counts).
    w = 1 / (np.spacing(np.abs(fy.astype(np.float32))).astype(np.float64) if ulp_weight else np.abs(fy))
    # tanh's last interval: where tanh rounds to 1 (a > 9.011) the fit must stay well within half
    # an ULP of 1, so that the clamped input (±inf, |x| > 9.1) gives exactly ±1.
    w = np.where(a > 9.02, 8 * w, w) if ulp_weight else w
    fixed = [0.0 if lo == 0 else float(np.float32(float(f(mp.mpf(lo)))))]
    while True:
        r = fy - sum(c * y ** j for j, c in enumerate(fixed))
        A = np.stack([y ** j for j in range(len(fixed), deg + 1)], 1)
        W = np.ones(n)
        for _ in range(iters):
            sw = w * np.sqrt(W)
            c, *_ = np.linalg.lstsq(A * sw[:, None], r * sw, rcond=None)
            err = np.abs(A @ c - r) * w
            W = W * err + 1e-300
            W /= W.sum()
        if len(c) == 1:
            break
        fixed.append(float(np.float32(c[0])))
    return np.array(fixed + [c[0]]), err.max()

def table(f, offset, top, deg, ulp_weight):
    coeffs = np.zeros((deg + 1, N))
    worst = 0.0
    for k, lo, hi in intervals(offset, top):
        c, e = fit_interval(f, lo, min(hi, top), deg, ulp_weight)
        coeffs[:, k] = c
        worst = max(worst, e)
    return coeffs.astype(np.float32), worst

def f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32)

def eval32(coeffs, a, offset, fma):
    """The kernel's evaluation in float32 (FMA: one rounding per Horner step)."""
    b = (a + np.float32(offset)).astype(np.float32)
    k = (b.view(np.int32) >> 20) & 31
    edge = ((b.view(np.uint32) & np.uint32(0xFFF00000)).view(np.float32) - np.float32(offset)).astype(np.float32)
    y = (a - edge).astype(np.float32)
    acc = coeffs[-1][k]
    for c in coeffs[-2::-1]:
        prod = acc.astype(np.float64) * y if fma else f32(acc * y).astype(np.float64)
        acc = f32(prod + c[k])
    return acc

def ulps(got, want):
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(f32(want))).astype(np.float64)

def emit(out, name, doc, coeffs):
    out.append(f"/// {doc}\n")
    out.append("#[rustfmt::skip] // one row per line, as generated\n")
    out.append(f"pub(crate) const {name}: [[f32; 32]; {len(coeffs)}] = [\n")
    for r in coeffs:
        # The shortest text that reads back as the same f32.
        out.append("    [" + ", ".join(np.format_float_scientific(x, unique=True, trim="0", exp_digits=1) for x in r) + "],\n")
    out.append("];\n")

def main():
    out = ["// Generated by tools/fit_tables.py: do not edit by hand.\n",
           "//! Horner coefficients (constant term first) of the table-driven `tanh` and `gelu` in\n",
           "//! `cpu::math`: row j holds the coefficient of y^j of each interval, indexed by the low five\n",
           "//! bits of bits(a + offset) >> 20.\n\n"]
    TANH_TOP, TANH_DEG, TANH_OFFSET = 9.1, 4, 0.625
    tk, te = table(mp.tanh, TANH_OFFSET, TANH_TOP, TANH_DEG, True)
    print(f"tanh: degree {TANH_DEG}, worst fit error {te:.3f} ULP")
    lo, hi = np.float32(2.0 ** -30).view(np.int32), np.float32(TANH_TOP).view(np.int32)
    a = np.arange(lo, hi, 3, dtype=np.int32).view(np.float32)
    want = np.tanh(a.astype(np.float64))
    for fma in (True, False):
        u = ulps(eval32(tk, a, TANH_OFFSET, fma), want)
        print(f"  float32 {'with' if fma else 'without'} FMA: worst {u.max():.3f} ULP at {a[u.argmax()]:.9g}")
    emit(out, "TANH", f"tanh(a), a = min(|x|, {TANH_TOP}); offset {TANH_OFFSET}.", tk)
    out.append("\n")
    GELU_TOP, GELU_DEG = 14.5, 5
    g = lambda u: u * mp.ncdf(-u) * mp.exp(u * u / 2)
    gk, ge = table(g, 1.0, GELU_TOP, GELU_DEG, False)
    print(f"gelu g: degree {GELU_DEG}, worst relative fit error 2^{np.log2(ge):.1f}")
    emit(out, "GELU", f"gelu's g(u) = u Φ(−u) e^(u²/2), u = min(|x|, {GELU_TOP}); offset 1.", gk)
    path = os.path.join(os.path.dirname(__file__), "..", "crates", "rayo", "src", "cpu", "math_tables.rs")
    with open(path, "w") as fh:
        fh.write("".join(out))
    print("wrote", os.path.normpath(path))

if __name__ == "__main__":
    main()
