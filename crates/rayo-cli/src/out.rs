//! Writing to stdout without panicking when the reader has gone (`rayo bench | head -1`): Rust
//! ignores SIGPIPE, so a write to a closed pipe is an `EPIPE` error, which `println!` turns into a
//! panic. [`outln!`] writes through [`write_line`] instead: a closed pipe ends the process quietly
//! with status 0 (the reader took what it wanted), any other write error with status 1.

use std::io::{ErrorKind, Write};

/// Writes one line to stdout and flushes it (so a table appears row by row).
pub fn write_line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush()) {
        exit_on(e);
    }
}

/// What a failed write to stdout ends with: status 0 for a closed pipe, 1 otherwise.
fn exit_on(e: std::io::Error) -> ! {
    if e.kind() == ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    let _ = writeln!(std::io::stderr(), "rayo: writing to stdout: {e}");
    std::process::exit(1);
}

/// `println!` that ends the process quietly when stdout is a closed pipe.
macro_rules! outln {
    () => {
        $crate::out::write_line(format_args!(""))
    };
    ($($t:tt)*) => {
        $crate::out::write_line(format_args!($($t)*))
    };
}

/// Writes one line to stderr in one `write` call, ignoring a closed stderr. Stderr is unbuffered,
/// so `writeln!` would write each formatted piece on its own, and the lines of processes that
/// share one stderr (the ranks `--rank-processes` starts) would interleave mid-line; one write
/// of a line shorter than `PIPE_BUF` (4,096 bytes) reaches a pipe whole.
pub fn write_err_line(args: std::fmt::Arguments) {
    let mut line = args.to_string();
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `eprintln!` that writes its line whole and ignores a closed stderr instead of panicking.
macro_rules! errln {
    ($($t:tt)*) => {
        $crate::out::write_err_line(format_args!($($t)*))
    };
}

pub(crate) use {errln, outln};
