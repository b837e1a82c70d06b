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
    /// A floating-point parameter is outside its domain (e.g. `clip` with min > max, a NaN
    /// `eps`). Integer and flag parameters are [`Error::InvalidArgument`].
    InvalidParameter { op: &'static str, name: &'static str, value: f64, reason: &'static str },
    /// An index is outside `0..len` (one dimension; a matrix index is
    /// [`Error::MatrixIndexOutOfBounds`]).
    IndexOutOfBounds { index: usize, len: usize },
    /// A strided matrix view that reaches past its data (or overlaps itself, for a mutable one).
    ViewOutOfBounds { op: &'static str, rows: usize, cols: usize, row_stride: usize, col_stride: usize, len: usize },
    /// A mutable matrix view whose strides would give two elements the same place.
    OverlappingView { op: &'static str, rows: usize, cols: usize, row_stride: usize, col_stride: usize },
    /// A buffer is larger than the device allows.
    BufferTooLarge { op: &'static str, bytes: u64, limit: u64 },
    /// A requested CPU backend is not supported by this CPU or target.
    UnsupportedBackend { backend: &'static str },
    /// An environment variable holds a value rayo does not understand (`expected` says what
    /// it accepts).
    InvalidEnv { var: &'static str, value: String, expected: &'static str },
    /// No device for the named API (wgpu, cuda) is present: no driver, no adapter.
    NoDevice { api: &'static str, reason: String },
    /// The device or driver reported a failure (lost device, mapping failure, launch error).
    Device { api: &'static str, message: String },
    /// A size computed from the given dimensions (an element count, a byte count, an offset)
    /// does not fit in `usize`.
    SizeOverflow { op: &'static str, dims: Vec<usize> },
    /// A matrix index `(row, col)` outside a `rows × cols` matrix.
    MatrixIndexOutOfBounds { row: usize, col: usize, rows: usize, cols: usize },
    /// A parameter that is not a float (a count, an index, a flag) is outside its domain.
    InvalidArgument { op: &'static str, name: &'static str, value: ArgValue, reason: &'static str },
    /// The system could not provide a buffer of this many bytes (a size that fits `usize`
    /// but not in memory).
    OutOfMemory { op: &'static str, bytes: u64 },
    /// A driver call failed: `api` names the driver (e.g. "cuda"), `message` is its text, and
    /// the driver's own error value is the [`source`](std::error::Error::source).
    Driver { api: &'static str, message: String, source: ErrorSource },
    /// A buffer (or buffer id) made by one device, stream or batch was given to another; `owner`
    /// and `user` are the ids of the two (see e.g. `CudaDevice::id`).
    ForeignBuffer { op: &'static str, owner: u64, user: u64 },
    /// A tensor type id rayo does not implement (`name` is ggml's name for it, or `unknown`).
    UnsupportedType { id: u32, name: &'static str },
    /// A length that is not a whole number of blocks of a quantized format.
    NotBlockMultiple { format: &'static str, len: usize, block: usize },
    /// A GGUF file that is truncated, corrupt or not GGUF: `offset` is the byte where the reader
    /// found the problem, `what` says what it expected and found.
    Gguf { offset: u64, what: crate::gguf::GgufProblem },
    /// A GGUF writer asked to write something that is not a valid GGUF file.
    GgufWrite { what: crate::gguf::GgufProblem },
    /// Opening, reading or writing a file (or another `io::Write`, `path` `None`) failed.
    Io { path: Option<std::path::PathBuf>, kind: std::io::ErrorKind, message: String },
}

/// The value of a non-float parameter in [`Error::InvalidArgument`], in its own type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgValue {
    /// A count, size or index.
    Usize(usize),
    /// A flag (e.g. whether an optional input was given).
    Bool(bool),
}

impl From<usize> for ArgValue {
    fn from(v: usize) -> ArgValue {
        ArgValue::Usize(v)
    }
}

impl From<bool> for ArgValue {
    fn from(v: bool) -> ArgValue {
        ArgValue::Bool(v)
    }
}

impl fmt::Display for ArgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgValue::Usize(v) => write!(f, "{v}"),
            ArgValue::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// The underlying error of [`Error::Driver`], shared (so `Error` stays `Clone`). Two are equal
/// whatever they hold: `Driver` errors compare by `api` and `message`.
#[derive(Clone)]
pub struct ErrorSource(pub std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl ErrorSource {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> ErrorSource {
        ErrorSource(std::sync::Arc::new(e))
    }
}

impl fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, _: &ErrorSource) -> bool {
        true
    }
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
            Error::SizeMismatch { op, shape, len } => match product(shape) {
                Some(want) => write!(f, "{op}: shape {shape:?} needs {want} elements, got {len}"),
                None => write!(f, "{op}: the element count of shape {shape:?} overflows usize (got {len} elements)"),
            },
            Error::EmptyInput { op } => write!(f, "{op}: input is empty"),
            Error::InvalidParameter { op, name, value, reason } => {
                write!(f, "{op}: invalid {name} = {value}: {reason}")
            }
            Error::IndexOutOfBounds { index, len } => {
                write!(f, "index {index} out of bounds for length {len}")
            }
            Error::ViewOutOfBounds { op, rows, cols, row_stride, col_stride, len } => {
                write!(f, "{op}: a {rows}x{cols} view with strides ({row_stride}, {col_stride}) does not fit data of length {len}")
            }
            Error::OverlappingView { op, rows, cols, row_stride, col_stride } => {
                write!(f, "{op}: a {rows}x{cols} view with strides ({row_stride}, {col_stride}) would write some elements twice")
            }
            Error::BufferTooLarge { op, bytes, limit } => {
                write!(f, "{op}: buffer of {bytes} bytes exceeds the device limit of {limit} bytes")
            }
            Error::UnsupportedBackend { backend } => {
                write!(f, "backend {backend} is not supported on this CPU/target")
            }
            Error::InvalidEnv { var, value, expected } => write!(f, "{var}={value:?} is not understood (expected {expected})"),
            Error::NoDevice { api, reason } => write!(f, "no {api} device: {reason}"),
            Error::Device { api, message } => write!(f, "{api} device error: {message}"),
            Error::SizeOverflow { op, dims } => write!(f, "{op}: a size computed from {dims:?} overflows usize"),
            Error::MatrixIndexOutOfBounds { row, col, rows, cols } => {
                write!(f, "index ({row}, {col}) out of bounds for a {rows}x{cols} matrix")
            }
            Error::InvalidArgument { op, name, value, reason } => write!(f, "{op}: invalid {name} = {value}: {reason}"),
            Error::OutOfMemory { op, bytes } => write!(f, "{op}: could not allocate {bytes} bytes"),
            Error::Driver { api, message, .. } => write!(f, "{api} driver error: {message}"),
            Error::ForeignBuffer { op, owner, user } => {
                write!(f, "{op}: buffer of device/batch {owner} used with device/batch {user}")
            }
            Error::UnsupportedType { id, name } => {
                write!(
                    f,
                    "tensor type {id} ({name}) is not supported by rayo (supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K..Q6_K Q8_K)"
                )
            }
            Error::NotBlockMultiple { format, len, block } => {
                write!(f, "{format}: {len} values is not a whole number of {block}-value blocks")
            }
            Error::Gguf { offset, what } => write!(f, "GGUF: at byte {offset}: {what}"),
            Error::GgufWrite { what } => write!(f, "GGUF writer: {what}"),
            Error::Io { path: Some(path), message, .. } => write!(f, "{}: {message}", path.display()),
            Error::Io { path: None, message, .. } => write!(f, "I/O error: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Driver { source, .. } => Some(&*source.0),
            _ => None,
        }
    }
}

/// Checks that two lengths agree.
#[inline]
pub(crate) fn check_len(op: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(Error::LengthMismatch { op, expected, actual })
    }
}

/// The product of `dims` (an element count), or [`Error::SizeOverflow`] naming them.
#[inline]
pub(crate) fn checked_product(op: &'static str, dims: &[usize]) -> Result<usize> {
    product(dims).ok_or_else(|| Error::SizeOverflow { op, dims: dims.to_vec() })
}

/// The product of `dims`: 0 when any of them is 0 (whatever the others), `None` when it
/// overflows.
pub(crate) fn product(dims: &[usize]) -> Option<usize> {
    if dims.contains(&0) {
        return Some(0);
    }
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The element count of a buffer of shape `dims`: [`Error::SizeOverflow`] unless the count,
/// and its size in bytes as f32, fit (`isize::MAX` bytes is what an allocation may hold).
#[inline]
pub(crate) fn checked_len(op: &'static str, dims: &[usize]) -> Result<usize> {
    match checked_product(op, dims)? {
        n if n <= isize::MAX as usize / 4 => Ok(n),
        _ => Err(Error::SizeOverflow { op, dims: dims.to_vec() }),
    }
}

/// `n` zeros (`n` from [`checked_len`]), or [`Error::OutOfMemory`] when the system cannot
/// provide them: for the constructors users call with sizes of their choosing (`zeros`).
pub(crate) fn zeroed(op: &'static str, n: usize) -> Result<Vec<f32>> {
    // A probe allocation, freed at once, tells whether the memory is there; `vec!` then takes
    // zeroed pages from the system (calloc) instead of writing n zeros.
    let mut probe: Vec<f32> = Vec::new();
    probe.try_reserve_exact(n).map_err(|_| Error::OutOfMemory { op, bytes: (n as u64).saturating_mul(4) })?;
    drop(probe);
    Ok(vec![0.0; n])
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
        let e = Error::SizeMismatch { op: "Tensor::zeros", shape: vec![usize::MAX, 2], len: 0 };
        assert!(e.to_string().contains("overflows usize"), "{e}");
        fn assert_send_sync<T: Send + Sync + std::error::Error>() {}
        assert_send_sync::<Error>();
    }

    #[test]
    fn driver_errors_have_a_source_and_compare_by_text() {
        use std::error::Error as _;
        let io = std::io::Error::other("CUDA_ERROR_LAUNCH_FAILED");
        let e = Error::Driver { api: "cuda", message: io.to_string(), source: ErrorSource::new(io) };
        let src = e.source().expect("a driver error has a source");
        assert_eq!(src.to_string(), "CUDA_ERROR_LAUNCH_FAILED");
        assert_eq!(e.to_string(), "cuda driver error: CUDA_ERROR_LAUNCH_FAILED");
        let same = Error::Driver { api: "cuda", message: "CUDA_ERROR_LAUNCH_FAILED".into(), source: ErrorSource::new(std::fmt::Error) };
        assert_eq!(e, same);
        assert_ne!(e, Error::Driver { api: "cuda", message: "other".into(), source: ErrorSource::new(std::fmt::Error) });
        assert!(Error::EmptyInput { op: "x" }.source().is_none());
        let f = Error::ForeignBuffer { op: "cuda download", owner: 1, user: 2 };
        assert_eq!(f.to_string(), "cuda download: buffer of device/batch 1 used with device/batch 2");
    }
}
