//! Opening the GGUF file a command was given, with one error shape for every command (`gguf`,
//! `quantize`, `generate`, `chat`, `tokenize`, `bench --model`, `synth --tokenizer`): the path
//! once, what is wrong with it in words, and what to do.
//!
//! - `cannot open model file PATH: no such file (...)`
//! - `PATH is a directory, not a GGUF file: give the path of a .gguf file`
//! - `PATH is not a GGUF file (it starts with "# rayo\n", a GGUF file with "GGUF")`
//!
//! A file that is GGUF but broken inside keeps the parser's message, which names the byte.

use rayo::gguf::GgufFile;
use std::io::{ErrorKind, Read};
use std::path::Path;

/// What a command tells a user who has no model yet.
pub const FETCH_HINT: &str = "scripts/fetch-smollm2.sh fetches SmolLM2-135M-Instruct into .cache/models/";

/// Opens and parses the GGUF file at `path`. `what` names it in the message ("model file",
/// "GGUF file"); `hint` (may be empty) says where to get one when it is missing.
pub fn open_gguf(path: &Path, what: &str, hint: &str) -> Result<GgufFile, String> {
    check(path, what, hint)?;
    GgufFile::open(path).map_err(|e| match e {
        // An error opening or mapping the file already names the path.
        rayo::Error::Io { kind, message, .. } => format!("cannot open {what} {}: {}", path.display(), io_words(kind, &message)),
        e => format!("{}: {e}", path.display()),
    })
}

/// The checks before the parser: the file is there, is a file, can be read, and starts with
/// GGUF's magic.
fn check(path: &Path, what: &str, hint: &str) -> Result<(), String> {
    let p = path.display();
    let hint = if hint.is_empty() { String::new() } else { format!(" ({hint})") };
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot open {what} {p}: {}{hint}", io_words(e.kind(), &e.to_string())))?;
    if meta.is_dir() {
        return Err(format!("{p} is a directory, not a GGUF file: give the path of a .gguf file{hint}"));
    }
    let mut head = Vec::with_capacity(16);
    std::fs::File::open(path)
        .and_then(|f| f.take(16).read_to_end(&mut head))
        .map_err(|e| format!("cannot open {what} {p}: {}", io_words(e.kind(), &e.to_string())))?;
    if head.is_empty() {
        return Err(format!("{p} is not a GGUF file (it is empty): give the path of a .gguf file{hint}"));
    }
    if !head.starts_with(b"GGUF") {
        let shown: String = head.iter().flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect();
        return Err(format!("{p} is not a GGUF file (it starts with \"{shown}\", a GGUF file with \"GGUF\"): give the path of a .gguf file{hint}"));
    }
    Ok(())
}

/// An I/O error in words, without the `(os error N)` tail: "no such file", "permission denied".
fn io_words(kind: ErrorKind, message: &str) -> String {
    match kind {
        ErrorKind::NotFound => "no such file".into(),
        ErrorKind::PermissionDenied => "permission denied".into(),
        _ => match message.find(" (os error") {
            Some(i) => message[..i].to_string(),
            None => message.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(path: &Path) -> String {
        open_gguf(path, "model file", "HINT").err().unwrap()
    }

    #[test]
    fn missing_directory_and_foreign_files_say_so_once() {
        let dir = std::env::temp_dir().join(format!("rayo-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.gguf");
        assert_eq!(err(&missing), format!("cannot open model file {}: no such file (HINT)", missing.display()));
        assert_eq!(err(&dir), format!("{} is a directory, not a GGUF file: give the path of a .gguf file (HINT)", dir.display()));
        let text = dir.join("notes.txt");
        std::fs::write(&text, "# rayo\n\u{1}and more than sixteen bytes").unwrap();
        let e = err(&text);
        assert!(
            e.starts_with(&format!("{} is not a GGUF file (it starts with \"# rayo\\n\\x01and more\", a GGUF file with \"GGUF\")", text.display())),
            "{e}"
        );
        let empty = dir.join("empty.gguf");
        std::fs::write(&empty, "").unwrap();
        assert!(err(&empty).contains("is not a GGUF file (it is empty)"));
        let cut = dir.join("cut.gguf");
        std::fs::write(&cut, b"GGUF\x03\0\0\0").unwrap();
        let e = err(&cut);
        assert!(e.starts_with(&format!("{}: GGUF: at byte", cut.display())) && e.matches(&cut.display().to_string()).count() == 1, "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
