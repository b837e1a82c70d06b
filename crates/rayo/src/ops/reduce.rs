//! Reductions to one value, defined once for every backend: what each element contributes
//! ([`ReduceLoad`]), how contributions combine ([`ReduceCombine`]), the value of an empty input,
//! and the f64 reference every backend is tested against.
//!
//! Semantics on every backend: a NaN anywhere makes `Max`, `Min`, `NormInf` NaN (as PyTorch
//! does); `Sum`, `Dot`, `NormL1`, `NormL2` follow IEEE arithmetic (NaN in, NaN out; inf − inf is
//! NaN). `Max`/`Min` of an empty input is [`Error::EmptyInput`](crate::Error::EmptyInput); the
//! others are 0.

/// A reduction of one vector (two for `Dot`) to one value, the same on the CPU, wgpu and CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Σ x
    Sum,
    /// max x (NaN if any element is NaN)
    Max,
    /// min x (NaN if any element is NaN)
    Min,
    /// Σ x·y (two inputs of equal length)
    Dot,
    /// Σ |x|
    NormL1,
    /// √(Σ x²)
    NormL2,
    /// max |x| (NaN if any element is NaN)
    NormInf,
}

/// What one element contributes to a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceLoad {
    /// x
    Plain,
    /// |x|
    Abs,
    /// x²
    Square,
    /// x·y
    Product,
}

/// How contributions combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceCombine {
    Sum,
    /// The larger, NaN winning.
    Max,
    /// The smaller, NaN winning.
    Min,
}

impl ReduceOp {
    /// Every reduction, in the order tests and benches list them.
    pub const ALL: [ReduceOp; 7] =
        [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Dot, ReduceOp::NormL1, ReduceOp::NormL2, ReduceOp::NormInf];

    /// The name the API and `rayo bench` use.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Dot => "dot",
            ReduceOp::NormL1 => "norm_l1",
            ReduceOp::NormL2 => "norm_l2",
            ReduceOp::NormInf => "norm_inf",
        }
    }

    /// Parses [`ReduceOp::name`].
    pub fn from_name(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Inputs: 2 for `Dot`, 1 otherwise.
    pub fn arity(self) -> usize {
        if self == ReduceOp::Dot {
            2
        } else {
            1
        }
    }

    pub fn load(self) -> ReduceLoad {
        match self {
            ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min => ReduceLoad::Plain,
            ReduceOp::Dot => ReduceLoad::Product,
            ReduceOp::NormL1 | ReduceOp::NormInf => ReduceLoad::Abs,
            ReduceOp::NormL2 => ReduceLoad::Square,
        }
    }

    pub fn combine(self) -> ReduceCombine {
        match self {
            ReduceOp::Sum | ReduceOp::Dot | ReduceOp::NormL1 | ReduceOp::NormL2 => ReduceCombine::Sum,
            ReduceOp::Max | ReduceOp::NormInf => ReduceCombine::Max,
            ReduceOp::Min => ReduceCombine::Min,
        }
    }

    /// The result for an empty input; `None` where it is undefined (an `EmptyInput` error).
    pub fn empty_value(self) -> Option<f32> {
        match self {
            ReduceOp::Max | ReduceOp::Min => None,
            _ => Some(0.0),
        }
    }

    /// The argument checks every backend makes, in one order: `y` given exactly for `Dot`
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `y`), then equal
    /// lengths ([`Error::LengthMismatch`](crate::Error::LengthMismatch)). `op` names the
    /// caller in the error.
    pub fn check_args(self, op: &'static str, x: usize, y: Option<usize>) -> crate::Result<()> {
        if (self == ReduceOp::Dot) != y.is_some() {
            let reason = if y.is_some() { "only dot takes a second input" } else { "dot needs a second input" };
            return Err(crate::Error::InvalidArgument { op, name: "y", value: crate::ArgValue::Bool(y.is_some()), reason });
        }
        match y {
            Some(y) if y != x => Err(crate::Error::LengthMismatch { op, expected: x, actual: y }),
            _ => Ok(()),
        }
    }

    /// Applied once to the combined value (the square root of `NormL2`).
    pub fn finish(self, acc: f64) -> f64 {
        if self == ReduceOp::NormL2 {
            acc.sqrt()
        } else {
            acc
        }
    }

    /// The f64 reference: `None` for an empty input where the result is undefined.
    pub fn reference(self, x: &[f64], y: Option<&[f64]>) -> Option<f64> {
        if x.is_empty() {
            return self.empty_value().map(f64::from);
        }
        let load = |i: usize| match self.load() {
            ReduceLoad::Plain => x[i],
            ReduceLoad::Abs => x[i].abs(),
            ReduceLoad::Square => x[i] * x[i],
            ReduceLoad::Product => x[i] * y.map_or(f64::NAN, |y| y[i]),
        };
        let mut acc = load(0);
        for i in 1..x.len() {
            let v = load(i);
            acc = combine_f64(self.combine(), acc, v);
        }
        Some(self.finish(acc))
    }
}

/// `a ⊕ b` in f64 with the NaN rule of [`ReduceCombine`].
pub fn combine_f64(c: ReduceCombine, a: f64, b: f64) -> f64 {
    match c {
        ReduceCombine::Sum => a + b,
        _ if a.is_nan() || b.is_nan() => f64::NAN,
        ReduceCombine::Max => a.max(b),
        ReduceCombine::Min => a.min(b),
    }
}
