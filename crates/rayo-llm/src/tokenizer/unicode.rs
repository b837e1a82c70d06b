//! Code point classes as llama.cpp's pre-tokenizers see them (`src/unicode.cpp`), and GPT-2's
//! byte ↔ code point map.

use super::unicode_data::{RANGES, WHITESPACE};

/// llama.cpp's `unicode_cpt_flags`: one category bit (`\p{N}`, `\p{L}`, ...) plus `\s`. The
/// value 0 is what llama.cpp's splitters read past the end of a piece (`flags{}`); every code
/// point inside has at least one bit set (unassigned ones have [`Flags::UNDEFINED`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags(u16);

impl Flags {
    pub const UNDEFINED: u16 = 0x0001;
    pub const NUMBER: u16 = 0x0002;
    pub const LETTER: u16 = 0x0004;
    pub const ACCENT_MARK: u16 = 0x0010;
    pub const PUNCTUATION: u16 = 0x0020;
    pub const WHITESPACE: u16 = 0x0100;

    /// The flags of code point `cpt` (U+FFFD stands in for bytes that are not UTF-8).
    pub fn of(cpt: u32) -> Flags {
        if cpt >= 0x110000 {
            return Flags(Flags::UNDEFINED);
        }
        // The last range whose start is <= cpt.
        let i = RANGES.partition_point(|&(start, _)| start <= cpt) - 1;
        let mut f = RANGES[i].1 as u16;
        if WHITESPACE.binary_search(&cpt).is_ok() {
            f |= Flags::WHITESPACE;
        }
        Flags(f)
    }

    pub fn is_number(self) -> bool {
        self.0 & Flags::NUMBER != 0
    }
    pub fn is_letter(self) -> bool {
        self.0 & Flags::LETTER != 0
    }
    /// `\p{M}`.
    pub fn is_mark(self) -> bool {
        self.0 & Flags::ACCENT_MARK != 0
    }
    pub fn is_whitespace(self) -> bool {
        self.0 & Flags::WHITESPACE != 0
    }
    /// Any bit: false only past the end of a piece.
    pub fn any(self) -> bool {
        self.0 != 0
    }
    /// The category bits alone (llama.cpp's `category_flag()`).
    pub fn category(self) -> u16 {
        self.0 & 0xFF
    }
}

/// The flags of every code point of `cpts` (computed once per text: the splitters look each
/// one up several times).
pub(crate) fn flags_of(cpts: &[u32]) -> Vec<Flags> {
    cpts.iter().map(|&c| Flags::of(c)).collect()
}

/// GPT-2's byte → code point map (`bytes_to_unicode`): printable Latin-1 bytes stand for
/// themselves, the other 68 take U+0100 onwards in byte order.
pub(crate) fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let cp = if printable {
            b
        } else {
            n += 1;
            255 + n
        };
        // Every value is below U+0144: a valid scalar.
        table[b as usize] = char::from_u32(cp).unwrap_or('\u{FFFD}');
    }
    table
}

/// The inverse of [`byte_to_char_table`]: the byte a code point stands for, if any.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cp as u8),
        // The non-printable bytes in order: 0x00-0x20 (33), 0x7F-0xA0 (34), 0xAD.
        0x100..=0x120 => Some((cp - 0x100) as u8),
        0x121..=0x142 => Some((cp - 0x121 + 0x7F) as u8),
        0x143 => Some(0xAD),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_round_trips_and_matches_gpt2() {
        let t = byte_to_char_table();
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
        assert_eq!(t[b'a' as usize], 'a');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(t[b as usize]), Some(b));
        }
        assert_eq!(char_to_byte('€'), None);
    }

    #[test]
    fn flags_follow_llama_cpp_tables() {
        assert!(Flags::of('7' as u32).is_number());
        assert!(Flags::of('é' as u32).is_letter());
        assert!(Flags::of('中' as u32).is_letter());
        assert!(Flags::of(' ' as u32).is_whitespace());
        assert!(Flags::of(0x3000).is_whitespace());
        assert!(Flags::of('²' as u32).is_number());
        assert!(!Flags::of('!' as u32).is_letter());
        assert!(Flags::of(0x10FFFF).any());
        assert!(!Flags::default().any());
    }
}
