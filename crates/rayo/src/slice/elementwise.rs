//! Any op of the registry on slices: `unary(backend, op, x, out)`, `binary(backend, op, a, b,
//! out)`. The named functions (`relu`, `add`, ...) are these with the op fixed.

use super::{apply, apply2, GRAIN_MATH, GRAIN_STREAM};
use crate::backend::dispatch;
use crate::cpu::kernels::elementwise::{map, map2, BinaryFn, UnaryFn};
use crate::cpu::simd::Simd;
use crate::ops::{BinaryDef, BinaryOp, BinaryVisitor, Params, UnaryDef, UnaryOp, UnaryVisitor};
use crate::{Backend, Result};
use core::marker::PhantomData;

/// An op's CPU kernel as the [`UnaryFn`] the element-wise loop takes.
struct CpuUnary<D>(Params, PhantomData<D>);
impl<D> Clone for CpuUnary<D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D> Copy for CpuUnary<D> {}
impl<S: Simd, D: UnaryDef> UnaryFn<S> for CpuUnary<D> {
    const WIDE: bool = D::CPU_WIDE;
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        D::cpu(s, v, self.0)
    }
    #[inline(always)]
    fn apply3(self, s: S, v: [S::V; 3]) -> [S::V; 3] {
        D::cpu3(s, v, self.0)
    }
}

struct CpuBinary<D>(Params, PhantomData<D>);
impl<D> Clone for CpuBinary<D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D> Copy for CpuBinary<D> {}
impl<S: Simd, D: BinaryDef> BinaryFn<S> for CpuBinary<D> {
    #[inline(always)]
    fn apply(self, s: S, a: S::V, b: S::V) -> S::V {
        D::cpu(s, a, b, self.0)
    }
}

struct Map<'a, S> {
    s: S,
    x: &'a [f32],
    out: &'a mut [f32],
}
impl<S: Simd> UnaryVisitor for Map<'_, S> {
    type Out = ();
    #[inline(always)]
    fn visit<D: UnaryDef>(self, p: Params) {
        map(self.s, self.x, self.out, CpuUnary::<D>(p, PhantomData))
    }
}

struct Map2<'a, S> {
    s: S,
    a: &'a [f32],
    b: &'a [f32],
    out: &'a mut [f32],
}
impl<S: Simd> BinaryVisitor for Map2<'_, S> {
    type Out = ();
    #[inline(always)]
    fn visit<D: BinaryDef>(self, p: Params) {
        map2(self.s, self.a, self.b, self.out, CpuBinary::<D>(p, PhantomData))
    }
}

/// `out[i] = op(x[i])`. Errors: the lengths differ, or the op's parameters are outside its
/// domain (e.g. clip with min > max).
pub fn unary(backend: Backend, op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()> {
    op.validate()?;
    let grain = if op.is_heavy() { GRAIN_MATH } else { GRAIN_STREAM };
    apply(op.name(), x, out, grain, |x, out| dispatch!(backend, |s| op.visit(Map { s, x, out })))
}

/// `out[i] = op(a[i], b[i])`. Errors: the lengths differ, or bad parameters.
pub fn binary(backend: Backend, op: BinaryOp, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
    op.validate()?;
    apply2(op.name(), a, b, out, GRAIN_STREAM, |a, b, out| dispatch!(backend, |s| op.visit(Map2 { s, a, b, out })))
}
