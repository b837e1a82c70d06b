"""Fits the polynomial coefficients used in crates/rayo/src/cpu/math.rs (least squares on
Chebyshev nodes against mpmath, relative error), then evaluates them in float32 Horner form
and prints the worst error in ULP. Re-run to regenerate: python3 tools/fit_poly.py"""
import mpmath as mp, numpy as np
mp.mp.dps = 40

def fit(f, lo, hi, deg, var=lambda x: x, n=2000):
    xs = [mp.mpf(lo) + (mp.mpf(hi) - lo) * (1 - mp.cos(mp.pi * (i + 0.5) / n)) / 2 for i in range(n)]
    ys = [f(x) for x in xs]
    vs = [var(x) for x in xs]
    A = np.array([[float(v) ** j for j in range(deg + 1)] for v in vs])
    w = np.array([1 / abs(float(y)) for y in ys])
    c, *_ = np.linalg.lstsq(A * w[:, None], np.array([float(y) for y in ys]) * w, rcond=None)
    return c

def horner32(c, v):
    v = np.float32(v); r = np.float32(c[-1])
    for k in reversed(c[:-1]):
        r = np.float32(r * v + np.float32(k))
    return r

def ulp_err(got, want):
    want32 = np.float32(want)
    u = np.spacing(abs(want32)) if want32 != 0 else np.float32(1.4e-45)
    return abs(float(got) - float(want)) / float(u)

# expm1 on |r| <= ln2/2: expm1(r) = r + r^2/2 + r^3 q(r)
q = fit(lambda r: (mp.expm1(r) - r - r * r / 2) / r ** 3, -0.3466, 0.3466, 5)
print("EXPM1_Q", [f"{x:.9e}" for x in q])

# gelu, |x| <= 1: Phi(x) = 0.5 + x E(x^2), E(s) = erf(sqrt(s/2)) / (2 sqrt(s))
E = fit(lambda s: mp.erf(mp.sqrt(s / 2)) / (2 * mp.sqrt(s)), 1e-12, 1.0, 6)
print("GELU_E", [f"{x:.9e}" for x in E])

# gelu tail, u = |x| >= 1: u Phi(-u) = exp(-u^2/2) h(1/u)
def h(t):
    u = 1 / t
    return u * mp.ncdf(-u) * mp.exp(u * u / 2)
for (lo, hi, deg) in [] and [(1/13.5, 1.0, 10), (1/13.5, 0.5, 8), (0.5, 1.0, 8)]:
    c = fit(h, lo, hi, deg)
    worst = 0
    for t in np.linspace(lo, hi, 5000):
        worst = max(worst, ulp_err(horner32(c, t), h(mp.mpf(float(np.float32(t))))))
    print(f"GELU_H [{lo:.4f},{hi}] deg {deg}: worst {worst:.2f} ulp", [f"{x:.9e}" for x in c])

# Better conditioned: h as a polynomial in v = (t - c) / w over one interval.
for (lo, hi, deg) in [(1/13.5, 1.0, 11), (1/13.5, 1.0, 12), (1/13.5, 1.0, 13)]:
    cc, ww = (lo + hi) / 2, (hi - lo) / 2
    c = fit(h, lo, hi, deg, var=lambda t: (t - cc) / ww)
    worst = 0
    for t in np.linspace(lo, hi, 5000):
        t32 = np.float32(t)
        v = np.float32(np.float32(t32 - np.float32(cc)) * np.float32(1 / ww))
        worst = max(worst, ulp_err(horner32(c, v), h(mp.mpf(float(t32)))))
    print(f"GELU_H shifted [{lo:.4f},{hi}] deg {deg} c={cc:.9e} 1/w={1/ww:.9e}: worst {worst:.2f} ulp", [f"{x:.9e}" for x in c])
