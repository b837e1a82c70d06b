//! PTX building blocks shared by the ops' emitters: NaN-preserving selects, rounding, and an
//! exp with a Cody–Waite argument reduction (the bare `ex2.approx` of x·log2 e loses up to
//! 2⁻²⁴·|x·log2 e| relative, 60 ULP near x = 88). eˣ is within ~3 ULP; denormal results are
//! flushed to zero by `ex2.approx.ftz`; 0 and inf beyond the range; NaN in NaN out.

pub(crate) use rayo_ptx::ptx::{BinOp, Cmp, PtxKernel, PtxType, Reg, UnOp};

pub(crate) const F: PtxType = PtxType::F32;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2: f32 = std::f32::consts::LN_2;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// `y`, or `x` where `x` is NaN (ordered comparisons are false for NaN: |x| ≤ inf is "not NaN").
pub(crate) fn keep_nan(k: &mut PtxKernel, x: Reg, y: Reg) -> Reg {
    let ax = k.un(UnOp::Abs, F, x);
    let num = k.setp(Cmp::Le, F, ax, f32::INFINITY);
    k.selp(F, y, x, num)
}

/// `cond ? a : b` for a comparison `x cmp c`.
pub(crate) fn select_cmp(k: &mut PtxKernel, cmp: Cmp, x: Reg, c: f32, a: Reg, b: Reg) -> Reg {
    let p = k.setp(cmp, F, x, c);
    k.selp(F, a, b, p)
}

/// Round to the nearest integer (ties to even) for |v| < 2²²: adding and removing 1.5·2²³.
pub(crate) fn round(k: &mut PtxKernel, v: Reg) -> Reg {
    let t = k.add(F, v, 12_582_912.0f32);
    k.sub(F, t, 12_582_912.0f32)
}

/// e^(hi + lo) for an exactly known `hi` and a small `lo` (|lo| ≲ 2), which joins the argument
/// after the exact Cody–Waite step: e^r = 2^(r·log2 e) by `ex2.approx` on |r| ≤ ln2/2 (≤ 2 ULP:
/// the product r·log2 e of a small r rounds harmlessly, unlike x·log2 e of a large x), then 2ⁿ in
/// two halves (`ex2.approx` of an integer is exact), so 2¹²⁸·0.98 does not overflow on the way.
pub(crate) fn exp2_split(k: &mut PtxKernel, hi: Reg, lo: Reg) -> Reg {
    let s = k.add(F, hi, lo);
    let lo_c = k.bin(BinOp::Max, F, s, -104.0f32);
    let xc = k.bin(BinOp::Min, F, lo_c, 89.0f32);
    // Out of range: the clamped sum alone (lo no longer matters).
    let inside = k.setp(Cmp::Eq, F, xc, s);
    let h = k.selp(F, hi, xc, inside);
    let l = k.selp(F, lo, 0.0f32, inside);
    let t = k.mul(F, xc, LOG2E);
    let n = round(k, t);
    let r = k.fma(F, n, -LN2_HI, h);
    let r = k.add(F, r, l);
    let r = k.fma(F, n, -LN2_LO, r);
    let y = scale(k, r, n);
    keep_nan(k, s, y)
}

/// eˣ alone: [`exp2_split`] without the second part (three instructions fewer).
pub(crate) fn exp(k: &mut PtxKernel, x: Reg) -> Reg {
    let lo_c = k.bin(BinOp::Max, F, x, -104.0f32);
    let xc = k.bin(BinOp::Min, F, lo_c, 89.0f32);
    let t = k.mul(F, xc, LOG2E);
    let n = round(k, t);
    let r = k.fma(F, n, -LN2_HI, xc);
    let r = k.fma(F, n, -LN2_LO, r);
    let y = scale(k, r, n);
    keep_nan(k, x, y)
}

/// e^r · 2ⁿ for the reduced |r| ≤ ln2/2 and an integer-valued n: `ex2.approx` of r·log2 e, and
/// 2ⁿ in two halves (each exact) so that 2¹²⁸·0.98 does not overflow on the way.
fn scale(k: &mut PtxKernel, r: Reg, n: Reg) -> Reg {
    let rl = k.mul(F, r, LOG2E);
    let e = k.un(UnOp::Ex2, F, rl);
    let half = k.mul(F, n, 0.5f32);
    let n1 = round(k, half);
    let n2 = k.sub(F, n, n1);
    let p1 = k.un(UnOp::Ex2, F, n1);
    let p2 = k.un(UnOp::Ex2, F, n2);
    let y = k.mul(F, e, p1);
    k.mul(F, y, p2)
}

/// ln x: `lg2.approx` · ln 2 (absolute error ≤ 2⁻²¹ near 1, a few ULP elsewhere); ln 0 = −inf,
/// ln(x < 0) = NaN, ln inf = inf.
pub(crate) fn ln(k: &mut PtxKernel, x: Reg) -> Reg {
    let l = k.un(UnOp::Lg2, F, x);
    k.mul(F, l, LN2)
}

/// 1 / (1 + e^−|x|) folded to the side of x, as the CPU does.
pub(crate) fn sigmoid(k: &mut PtxKernel, x: Reg) -> Reg {
    let ax = k.un(UnOp::Abs, F, x);
    let nax = k.un(UnOp::Neg, F, ax);
    let e = exp(k, nax);
    let d = k.add(F, e, 1.0f32);
    let s = k.bin(BinOp::Div, F, 1.0f32, d);
    let es = k.mul(F, e, s);
    let p = k.setp(Cmp::Ge, F, x, 0.0f32);
    let y = k.selp(F, s, es, p);
    keep_nan(k, x, y)
}

/// Horner's rule, coefficients from the highest power down.
pub(crate) fn horner(k: &mut PtxKernel, x: Reg, coeffs: &[f32]) -> Reg {
    let mut acc = k.mov(F, coeffs[0]);
    for &c in &coeffs[1..] {
        acc = k.fma(F, acc, x, c);
    }
    acc
}
