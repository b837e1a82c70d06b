//! One error type for the whole crate. Every variant carries the numbers that explain it.

use core::fmt;

/// Everything that can go wrong in rayo, as a value. No op panics on bad input.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// Two inputs (or an input and an output buffer) whose lengths must agree do not.
    LengthMismatch { op: &'static str, expected: usize, actual: usize },
    /// Matrix/tensor shapes that must agree do not (both shapes are given).
    ShapeMismatch { op: &'static str, left: Vec<usize>, right: Vec<usize> },
    /// `data.len()` is not the product of the shape.
    SizeMismatch { op: &'static str, shape: Vec<usize>, len: usize },
    /// The result is undefined for an empty input (max, argmax, softmax, ...).
    EmptyInput { op: &'static str },
    /// A parameter is outside its domain (e.g. `clip` with min > max).
    InvalidParameter { op: &'static str, name: &'static str, value: f64, reason: &'static str },
    /// An index is outside `0..len`.
    IndexOutOfBounds { index: usize, len: usize },
    /// A strided matrix view that reaches past its data (or overlaps itself, for a mutable one).
    ViewOutOfBounds { op: &'static str, rows: usize, cols: usize, row_stride: usize, col_stride: usize, len: usize },
    /// A mutable matrix view whose strides would give two elements the same place.
    OverlappingView { op: &'static str, rows: usize, cols: usize, row_stride: usize, col_stride: usize },
    /// A buffer is larger than the device allows.
    BufferTooLarge { op: &'static str, bytes: u64, limit: u64 },
    /// A requested CPU backend is not supported by this CPU or target.
    UnsupportedBackend { backend: &'static str },
    /// An environment variable holds a value rayo does not understand.
    InvalidEnv { var: &'static str, value: String },
    /// No device for the named API (wgpu, cuda) is present: no driver, no adapter.
    NoDevice { api: &'static str, reason: String },
    /// The device or driver reported a failure (lost device, mapping failure, launch error).
    Device { api: &'static str, message: String },
    /// A handle used with an owner other than its own: a wgpu `BufferId` of another batch, or a
    /// `GpuBuffer` of another device (owners are numbered uniquely in the process).
    ForeignBuffer { op: &'static str, expected_owner: u64, actual_owner: u64 },
}

/// `Result` with [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::LengthMismatch { op, expected, actual } => {
                write!(f, "{op}: length mismatch: expected {expected}, got {actual}")
            }
            Error::ShapeMismatch { op, left, right } => {
                write!(f, "{op}: shape mismatch: {left:?} vs {right:?}")
            }
            Error::SizeMismatch { op, shape, len } => {
                let want: usize = shape.iter().product();
                write!(f, "{op}: shape {shape:?} needs {want} elements, got {len}")
            }
            Error::EmptyInput { op } => write!(f, "{op}: input is empty"),
            Error::InvalidParameter { op, name, value, reason } => {
                write!(f, "{op}: invalid {name} = {value}: {reason}")
            }
            Error::IndexOutOfBounds { index, len } => {
                write!(f, "index {index} out of bounds for length {len}")
            }
            Error::ViewOutOfBounds { op, rows, cols, row_stride, col_stride, len } => write!(
                f,
                "{op}: a {rows}x{cols} view with strides ({row_stride}, {col_stride}) does not fit data of length {len}"
            ),
            Error::OverlappingView { op, rows, cols, row_stride, col_stride } => write!(
                f,
                "{op}: a {rows}x{cols} view with strides ({row_stride}, {col_stride}) would write some elements twice"
            ),
            Error::BufferTooLarge { op, bytes, limit } => {
                write!(f, "{op}: buffer of {bytes} bytes exceeds the device limit of {limit} bytes")
            }
            Error::UnsupportedBackend { backend } => {
                write!(f, "backend {backend} is not supported on this CPU/target")
            }
            Error::InvalidEnv { var, value } => write!(f, "{var}={value:?} is not understood"),
            Error::NoDevice { api, reason } => write!(f, "no {api} device: {reason}"),
            Error::Device { api, message } => write!(f, "{api} device error: {message}"),
            Error::ForeignBuffer { op, expected_owner, actual_owner } => {
                write!(f, "{op}: the buffer belongs to owner {actual_owner} (a batch or device), not to owner {expected_owner} that it was used with")
            }
        }
    }
}

impl std::error::Error for Error {}

/// Checks that two lengths agree.
#[inline]
pub(crate) fn check_len(op: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(Error::LengthMismatch { op, expected, actual })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_numbers() {
        let e = Error::LengthMismatch { op: "add", expected: 3, actual: 4 };
        assert_eq!(e.to_string(), "add: length mismatch: expected 3, got 4");
        let e = Error::SizeMismatch { op: "Tensor::from_vec", shape: vec![2, 3], len: 5 };
        assert_eq!(e.to_string(), "Tensor::from_vec: shape [2, 3] needs 6 elements, got 5");
        fn assert_send_sync<T: Send + Sync + std::error::Error>() {}
        assert_send_sync::<Error>();
    }
}
