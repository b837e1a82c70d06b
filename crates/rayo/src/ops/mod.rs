//! The op registry: every element-wise op and reduction defined once (name, f64 reference,
//! parameters, NaN/±inf/−0 semantics), and iterated by every backend, test and bench.

mod reduce;

pub use reduce::{combine_f64, ReduceCombine, ReduceLoad, ReduceOp};
