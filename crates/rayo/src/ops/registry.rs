//! The [`UnaryOp`] and [`BinaryOp`] enums, generated from the list of op definitions: adding an
//! op is its file in `unary/` or `binary/` plus one line here.

use super::{binary as b, unary as u, BinaryDef, Params, UnaryDef};
use crate::Result;

/// Calls back with an op's definition type (how a backend reaches the op's code generically).
pub(crate) trait UnaryVisitor {
    type Out;
    fn visit<D: UnaryDef>(self, p: Params) -> Self::Out;
}

pub(crate) trait BinaryVisitor {
    type Out;
    fn visit<D: BinaryDef>(self, p: Params) -> Self::Out;
}

macro_rules! f32_field {
    ($x:ident) => {
        f32
    };
}

macro_rules! define_ops {
    ($enum:ident, $def:ident, $visitor:ident, $(#[$doc:meta])* { $($(#[$vdoc:meta])* $variant:ident $(( $($p:ident),+ ))? => $ty:path,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum $enum {
            $($(#[$vdoc])* $variant $(( $(f32_field!($p)),+ ))?,)*
        }

        impl $enum {
            // Every op of this kind (parameters 0; see `all`).
            const KINDS: &'static [$enum] = &[$($enum::$variant $(( $({ let _ = stringify!($p); 0.0 }),+ ))?,)*];

            /// Every op with its [`sample`](Self::with_sample_params) parameters.
            pub fn all() -> Vec<$enum> {
                Self::KINDS.iter().map(|op| op.with_sample_params()).collect()
            }

            /// The same op with the parameters its definition suggests for tests and benches.
            pub fn with_sample_params(self) -> $enum {
                match self {
                    $($enum::$variant { .. } => {
                        #[allow(unused_variables, unused_mut)]
                        let mut i = 0;
                        #[allow(unused_variables)]
                        let s = <$ty as $def>::SAMPLE;
                        $enum::$variant $(( $({ let _ = stringify!($p); i += 1; s[i - 1] }),+ ))?
                    })*
                }
            }

            /// The parameters (unused slots are 0).
            pub fn params(self) -> Params {
                match self {
                    $($enum::$variant $(( $($p),+ ))? => {
                        let v: &[f32] = &[$($($p),+)?];
                        let mut a = [0.0f32; 2];
                        a[..v.len()].copy_from_slice(v);
                        a
                    })*
                }
            }

            /// Calls `v` with this op's definition type and parameters.
            #[inline(always)]
            pub(crate) fn visit<V: $visitor>(self, v: V) -> V::Out {
                let p = self.params();
                match self {
                    $($enum::$variant { .. } => v.visit::<$ty>(p),)*
                }
            }

            /// The name used by the API, `rayo bench` and errors.
            pub fn name(self) -> &'static str {
                match self {
                    $($enum::$variant { .. } => <$ty as $def>::NAME,)*
                }
            }

            /// Looks an op up by name (with its sample parameters).
            pub fn from_name(name: &str) -> Option<$enum> {
                Self::all().into_iter().find(|op| op.name() == name)
            }

            /// Names of its scalar parameters.
            pub fn param_names(self) -> &'static [&'static str] {
                match self {
                    $($enum::$variant { .. } => <$ty as $def>::PARAMS,)*
                }
            }

            /// An error when the parameters are outside the op's domain.
            pub fn validate(self) -> Result<()> {
                let p = self.params();
                match self {
                    $($enum::$variant { .. } => <$ty as $def>::validate(p),)*
                }
            }

            /// Whether the op evaluates a polynomial per element (the CPU splits it over
            /// threads at smaller sizes than a memory-bound op).
            pub fn is_heavy(self) -> bool {
                match self {
                    $($enum::$variant { .. } => <$ty as $def>::HEAVY,)*
                }
            }

            /// Error bound on the CPU.
            pub fn cpu_bound(self) -> super::Bound {
                match self {
                    $($enum::$variant { .. } => <$ty as $def>::CPU_BOUND,)*
                }
            }

            /// Error bound on GPUs.
            pub fn gpu_bound(self) -> super::Bound {
                match self {
                    $($enum::$variant { .. } => <$ty as $def>::GPU_BOUND,)*
                }
            }

            /// The WGSL function `op_<name>` of every op of this kind, concatenated.
            #[cfg(any(feature = "gpu", feature = "gpu-wasm"))]
            pub(crate) fn wgsl_library() -> String {
                let mut s = String::new();
                $(s.push_str(<$ty as $def>::WGSL); s.push('\n');)*
                s
            }
        }
    };
}

define_ops!(UnaryOp, UnaryDef, UnaryVisitor,
    /// An element-wise function of one input, on every backend. Parameters travel with the
    /// variant; see each definition in [`crate::ops`] for its bound and special values.
    {
        Relu => u::Relu,
        /// `x` for x > 0, `alpha·x` otherwise.
        LeakyRelu(alpha) => u::LeakyRelu,
        /// `x` for x > 0, `alpha·(eˣ − 1)` otherwise.
        Elu(alpha) => u::Elu,
        Selu => u::Selu,
        Sigmoid => u::Sigmoid,
        Tanh => u::Tanh,
        Swish => u::Swish,
        Gelu => u::Gelu,
        Mish => u::Mish,
        Hardswish => u::Hardswish,
        Abs => u::Abs,
        Neg => u::Neg,
        Sqrt => u::Sqrt,
        Exp => u::Exp,
        Ln => u::Ln,
        /// Clamps to `[min, max]` (min ≤ max, neither NaN).
        Clip(min, max) => u::Clip,
        /// `k·x`.
        Scale(k) => u::Scale,
    }
);

define_ops!(BinaryOp, BinaryDef, BinaryVisitor,
    /// An element-wise function of two inputs of equal length, on every backend.
    {
        Add => b::Add,
        Sub => b::Sub,
        Mul => b::Mul,
        Div => b::Div,
        /// The larger, NaN winning.
        Max => b::Max,
        /// The smaller, NaN winning.
        Min => b::Min,
        /// `alpha·x + y`.
        Axpy(alpha) => b::Axpy,
    }
);

impl UnaryOp {
    /// The f64 reference.
    pub fn reference(self, x: f64) -> f64 {
        struct R(f64);
        impl UnaryVisitor for R {
            type Out = f64;
            fn visit<D: UnaryDef>(self, p: Params) -> f64 {
                D::reference(self.0, [p[0] as f64, p[1] as f64])
            }
        }
        self.visit(R(x))
    }
}

impl BinaryOp {
    /// The f64 reference.
    pub fn reference(self, x: f64, y: f64) -> f64 {
        struct R(f64, f64);
        impl BinaryVisitor for R {
            type Out = f64;
            fn visit<D: BinaryDef>(self, p: Params) -> f64 {
                D::reference(self.0, self.1, [p[0] as f64, p[1] as f64])
            }
        }
        self.visit(R(x, y))
    }

    /// What the error bound is relative to (|reference|, or the size of the terms for an op
    /// whose result can cancel).
    pub fn magnitude(self, x: f64, y: f64) -> f64 {
        struct M(f64, f64);
        impl BinaryVisitor for M {
            type Out = f64;
            fn visit<D: BinaryDef>(self, p: Params) -> f64 {
                D::magnitude(self.0, self.1, [p[0] as f64, p[1] as f64])
            }
        }
        self.visit(M(x, y))
    }
}
