//! Byte-level tokens can end inside a UTF-8 character: streamed text is cut at character
//! boundaries, the incomplete tail kept for the next token.

/// Joins token bytes into text, one complete character at a time.
#[derive(Default, Debug)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds `bytes`; returns the text now complete (invalid sequences become U+FFFD).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..good]).unwrap_or_default());
                    match e.error_len() {
                        // Invalid bytes: replaced, and the scan goes on after them.
                        Some(n) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..good + n);
                        }
                        // An incomplete character at the end: kept for the next push.
                        None => {
                            self.pending.drain(..good);
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end of the stream (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_characters_across_pushes_and_replaces_invalid_bytes() {
        let mut u = Utf8Stream::default();
        let s = "a€🦙b".as_bytes();
        let mut out = String::new();
        for b in s {
            out += &u.push(&[*b]);
        }
        assert_eq!(out + &u.finish(), "a€🦙b");
        assert_eq!(u.push(&[0xff, b'x']), "\u{FFFD}x");
        assert_eq!(u.push(&[0xe2, 0x82]), "");
        assert_eq!(u.finish(), "\u{FFFD}");
    }
}
