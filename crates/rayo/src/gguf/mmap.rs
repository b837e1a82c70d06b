//! The one `unsafe` of the GGUF reader: mapping a file read-only (memmap2, over the OS's mmap).

use crate::{Error, Result};
use std::path::Path;

/// The file at `path`, mapped read-only.
pub(crate) fn map(path: &Path) -> Result<memmap2::Mmap> {
    let io = |e: std::io::Error| Error::Io { path: Some(path.to_path_buf()), kind: e.kind(), message: e.to_string() };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the map is read-only and rayo never writes through it; what mmap cannot rule out is
    // another process truncating or rewriting the file while it is mapped (a SIGBUS or changed
    // bytes, as for llama.cpp's own mmap loader). Every read of the map is bounds-checked against
    // its length, fixed here, so changed bytes can give wrong values but no read out of bounds.
    unsafe { memmap2::Mmap::map(&file) }.map_err(io)
}
