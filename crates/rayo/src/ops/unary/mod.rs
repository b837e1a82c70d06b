//! Element-wise functions of one input, one file each.

mod abs;
mod clip;
mod elu;
mod exp;
mod gelu;
mod hardswish;
mod leaky_relu;
mod ln;
mod mish;
mod neg;
mod relu;
mod scale;
mod selu;
mod sigmoid;
mod sqrt;
mod swish;
mod tanh;

pub use abs::Abs;
pub use clip::Clip;
pub use elu::Elu;
#[cfg(any(feature = "gpu", feature = "gpu-wasm"))]
pub(crate) use elu::WGSL_EXPM1;
pub use exp::Exp;
pub use gelu::Gelu;
pub use hardswish::Hardswish;
pub use leaky_relu::LeakyRelu;
pub use ln::Ln;
pub use mish::Mish;
pub use neg::Neg;
pub use relu::Relu;
pub use scale::Scale;
pub use selu::{Selu, SELU_ALPHA, SELU_LAMBDA};
pub use sigmoid::Sigmoid;
pub use sqrt::Sqrt;
pub use swish::Swish;
pub use tanh::Tanh;

/// WGSL helpers every generated element-wise kernel includes before the ops' functions (the
/// generator sets the aliases `T` = f32 or vec4<f32>, and `U`, `I`, `B` to the matching u32,
/// i32 and bool types):
/// - `is_nan` by the bits (a float comparison may be folded by a driver that assumes no NaN),
///   `nan_of` / `inf_of` as values the compiler cannot fold into an invalid constant;
/// - `rexp(x)` = eˣ and `rexp2(hi, lo)` = e^(hi + lo) for an exact `hi` and a small `lo`: the
///   CPU's Cody–Waite reduction and polynomial, and an exact power of two in two halves (builtin
///   `exp(x)` is `exp2(x·log2 e)`, whose rounding of x·log2 e costs 20 ULP at |x| = 20 on
///   llvmpipe, and Vulkan allows 3 + 2|x| ULP; llvmpipe's `exp2` of the small remainder alone is
///   13 ULP off, so the polynomial stays).
#[cfg(any(feature = "gpu", feature = "gpu-wasm"))]
pub(crate) const WGSL_PRELUDE: &str = "
fn is_nan(x: T) -> B {
    return (bitcast<U>(x) & U(0x7fffffffu)) > U(0x7f800000u);
}
fn nan_of(x: T) -> T {
    return bitcast<T>(U(0x7fc00000u) | (bitcast<U>(x) & U(0u)));
}
fn inf_of(x: T) -> T {
    return bitcast<T>(U(0x7f800000u) | (bitcast<U>(x) & U(0u)));
}
fn pow2i(n: T) -> T {
    return bitcast<T>(bitcast<U>(I(n) + I(127)) << U(23u));
}
fn rexp_poly(r: T) -> T {
    let p = ((((1.9875691e-4 * r + 1.3981999e-3) * r + 8.333452e-3) * r + 4.1665796e-2) * r + 0.16666665) * r + 0.5;
    return fma(p, r * r, r) + 1.0;
}
fn rexp2(hi: T, lo: T) -> T {
    let s = hi + lo;
    let xc = clamp(s, T(-104.0), T(89.0));
    let inside = xc == s;
    let n = round(xc * 1.442695);
    var r = fma(n, T(-0.6933594), select(xc, hi, inside));
    r = r + select(T(0.0), lo, inside);
    r = fma(n, T(2.1219444e-4), r);
    let n1 = round(n * 0.5);
    let y = rexp_poly(r) * pow2i(n1) * pow2i(n - n1);
    return select(y, s, is_nan(s));
}
fn rexp(x: T) -> T {
    // Through rexp2: written out without the `+ lo` between the two Cody–Waite steps, llvmpipe
    // fused them (n·(ln2_hi + ln2_lo), 7 ULP at |x| = 20).
    return rexp2(x, T(0.0));
}
";
