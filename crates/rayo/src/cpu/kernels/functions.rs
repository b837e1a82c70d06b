//! The softmax helpers' per-vector functions (the element-wise ops themselves live in
//! `crate::ops`, one file each).

use super::elementwise::unary_fn;
use crate::cpu::math;

// e^(x − m) (softmax numerator).
unary_fn!(ExpShifted { m: f32 }, |self, s, v| math::exp(s, s.sub(v, s.splat(self.m))));
// (x − m) − c (log-softmax).
unary_fn!(SubTwice { m: f32, c: f32 }, |self, s, v| s.sub(s.sub(v, s.splat(self.m)), s.splat(self.c)));
