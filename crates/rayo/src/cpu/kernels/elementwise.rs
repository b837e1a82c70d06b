//! Element-wise maps: one input or two, one output, stores aligned to the vector width.
//!
//! The per-vector function is a trait with an `#[inline(always)]` method rather than a
//! closure: a large closure (a polynomial) called from several places in the unrolled loop may
//! be left out of line, and outside the ISA's target-feature context every intrinsic in it
//! becomes a call. A trait method marked `inline(always)` cannot be.

use crate::cpu::simd::Simd;

/// Outputs at least this long (elements) are written with streaming stores (experiment).
const STREAM_MIN: usize = 1 << 21;

/// `f(v)` on one vector of lanes.
pub trait UnaryFn<S: Simd>: Copy {
    /// Three vectors per step of [`map`]'s loop, through [`UnaryFn::apply3`], instead of two
    /// (more independent work in flight for a function bound by its own instructions'
    /// throughput; a longer loop body is not free for the others: exp measured 5% slower with
    /// four vectors a step).
    const WIDE: bool = false;
    fn apply(self, s: S, v: S::V) -> S::V;
    /// `apply` on three vectors; a function may interleave their steps (tanh does).
    #[inline(always)]
    fn apply3(self, s: S, v: [S::V; 3]) -> [S::V; 3] {
        [self.apply(s, v[0]), self.apply(s, v[1]), self.apply(s, v[2])]
    }
}

/// `f(a, b)` on two vectors of lanes.
pub trait BinaryFn<S: Simd>: Copy {
    fn apply(self, s: S, a: S::V, b: S::V) -> S::V;
}

/// A unit struct, or one with public fields.
macro_rules! fn_struct {
    ($name:ident) => {
        #[derive(Clone, Copy)]
        pub struct $name;
    };
    ($name:ident { $($field:ident: $ty:ty),* }) => {
        #[derive(Clone, Copy)]
        pub struct $name { $(pub $field: $ty),* }
    };
}
pub(crate) use fn_struct;

/// Defines a unit struct `$name` (or one with fields) implementing [`UnaryFn`] for every ISA.
macro_rules! unary_fn {
    ($name:ident $({ $($field:ident: $ty:ty),* })?, |$self_:ident, $s:ident, $v:ident| $body:expr) => {
        $crate::cpu::kernels::elementwise::fn_struct!($name $({ $($field: $ty),* })?);
        impl<S: $crate::cpu::simd::Simd> $crate::cpu::kernels::elementwise::UnaryFn<S> for $name {
            #[inline(always)]
            #[allow(unused_variables)]
            fn apply($self_, $s: S, $v: S::V) -> S::V {
                #[allow(unused_imports)]
                use $crate::cpu::simd::SimdExt as _;
                $body
            }
        }
    };
}
pub(crate) use unary_fn;

/// How many leading elements to process separately so that `out` is vector-aligned after them
/// (split-line stores cost more than the short head; for a reduction, split-line loads).
#[inline(always)]
pub(crate) fn head_len<S: Simd>(out: &[f32]) -> usize {
    let lane = (out.as_ptr() as usize / 4) % S::LANES;
    ((S::LANES - lane) % S::LANES).min(out.len())
}

/// `out[i] = f(x[i])`. `x` and `out` must have the same length (checked by the caller).
#[inline(always)]
pub fn map<S: Simd, F: UnaryFn<S>>(s: S, x: &[f32], out: &mut [f32], f: F) {
    debug_assert_eq!(x.len(), out.len());
    let h = head_len::<S>(out);
    let (xh, x) = x.split_at(h);
    let (oh, out) = out.split_at_mut(h);
    if h > 0 {
        s.store_partial(oh, f.apply(s, s.load_partial(xh, 0.0)));
    }
    let (x, out) = if F::WIDE {
        let mut xc = x.chunks_exact(3 * S::LANES);
        let mut oc = out.chunks_exact_mut(3 * S::LANES);
        for (xi, oi) in (&mut xc).zip(&mut oc) {
            let [a, b, c] = f.apply3(s, [s.load(xi), s.load(&xi[S::LANES..]), s.load(&xi[2 * S::LANES..])]);
            s.store(oi, a);
            s.store(&mut oi[S::LANES..], b);
            s.store(&mut oi[2 * S::LANES..], c);
        }
        (xc.remainder(), oc.into_remainder())
    } else {
        (x, out)
    };
    let mut xc = x.chunks_exact(2 * S::LANES);
    let mut oc = out.chunks_exact_mut(2 * S::LANES);
    for (xi, oi) in (&mut xc).zip(&mut oc) {
        let a = f.apply(s, s.load(xi));
        let b = f.apply(s, s.load(&xi[S::LANES..]));
        s.store(oi, a);
        s.store(&mut oi[S::LANES..], b);
    }
    let (xr, or) = (xc.remainder(), oc.into_remainder());
    let mut xc = xr.chunks_exact(S::LANES);
    let mut oc = or.chunks_exact_mut(S::LANES);
    for (xi, oi) in (&mut xc).zip(&mut oc) {
        s.store(oi, f.apply(s, s.load(xi)));
    }
    let xr = xc.remainder();
    if !xr.is_empty() {
        s.store_partial(oc.into_remainder(), f.apply(s, s.load_partial(xr, 0.0)));
    }
}

/// `out[i] = f(a[i], b[i])`. All three must have the same length (checked by the caller).
#[inline(always)]
pub fn map2<S: Simd, F: BinaryFn<S>>(s: S, a: &[f32], b: &[f32], out: &mut [f32], f: F) {
    debug_assert!(a.len() == out.len() && b.len() == out.len());
    let h = head_len::<S>(out);
    let (ah, a) = a.split_at(h);
    let (bh, b) = b.split_at(h);
    let (oh, out) = out.split_at_mut(h);
    if h > 0 {
        s.store_partial(oh, f.apply(s, s.load_partial(ah, 1.0), s.load_partial(bh, 1.0)));
    }
    let mut ac = a.chunks_exact(2 * S::LANES);
    let mut bc = b.chunks_exact(2 * S::LANES);
    let stream = out.len() >= STREAM_MIN;
    let mut oc = out.chunks_exact_mut(2 * S::LANES);
    for ((ai, bi), oi) in (&mut ac).zip(&mut bc).zip(&mut oc) {
        let x = f.apply(s, s.load(ai), s.load(bi));
        let y = f.apply(s, s.load(&ai[S::LANES..]), s.load(&bi[S::LANES..]));
        if stream {
            s.store_stream(oi, x);
            s.store_stream(&mut oi[S::LANES..], y);
        } else {
            s.store(oi, x);
            s.store(&mut oi[S::LANES..], y);
        }
    }
    if stream {
        s.stream_fence();
    }
    let (ar, br, or) = (ac.remainder(), bc.remainder(), oc.into_remainder());
    let mut ac = ar.chunks_exact(S::LANES);
    let mut bc = br.chunks_exact(S::LANES);
    let mut oc = or.chunks_exact_mut(S::LANES);
    for ((ai, bi), oi) in (&mut ac).zip(&mut bc).zip(&mut oc) {
        s.store(oi, f.apply(s, s.load(ai), s.load(bi)));
    }
    let (ar, br) = (ac.remainder(), bc.remainder());
    if !ar.is_empty() {
        s.store_partial(oc.into_remainder(), f.apply(s, s.load_partial(ar, 1.0), s.load_partial(br, 1.0)));
    }
}
