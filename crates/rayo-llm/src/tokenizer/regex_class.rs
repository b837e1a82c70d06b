//! Character-class regexes as llama.cpp matches them with `std::regex` (the pre-tokenizer
//! passes it has no hand-written splitter for): `[C]`, `[C]+`, `\s?[C]+`, `\s+$`,
//! `[0-9][0-9][0-9]`. A regex with `\p{..}` runs on llama.cpp's "collapsed" text (ASCII as is,
//! every other code point replaced by a byte for its category, non-ASCII whitespace by `\v`);
//! one without runs on the code points, non-ASCII whitespace again as `\v` ("wide").

use super::pretokenize::{Class, Splitter};
use super::unicode::Flags;

/// `\p{N}` as llama.cpp's `std::regex` sees it on collapsed text: ASCII digits, and non-ASCII
/// code points whose category is number (non-ASCII whitespace collapses to `\v` first).
pub(super) fn collapsed_number(c: u32, f: Flags) -> bool {
    if c < 128 {
        (b'0' as u32..=b'9' as u32).contains(&c)
    } else {
        !f.is_whitespace() && f.category() == Flags::NUMBER
    }
}

/// `[\p{P}\$\+<=>\^~\|]` on collapsed text: `\p{P}` and `$+<=>^~|`.
pub(super) fn collapsed_punct_or_sym(c: u32, f: Flags) -> bool {
    collapsed_punct(c, f) || (c < 128 && matches!(c as u8, b'$' | b'+' | b'<' | b'=' | b'>' | b'^' | b'~' | b'|'))
}

/// `\s` in `std::regex`: C's `isspace`, and non-ASCII whitespace, which llama.cpp turns into
/// `\v` before matching.
pub(super) fn regex_space(c: u32, f: Flags) -> bool {
    matches!(c, 9..=13 | 32) || (c >= 128 && f.is_whitespace())
}

/// The code point a wide (non-collapsed) `std::regex` pass sees.
pub(super) fn wide(c: u32, f: Flags) -> u32 {
    if c >= 128 && f.is_whitespace() {
        0x0B
    } else {
        c
    }
}

pub(super) fn in_ranges(c: u32, ranges: &[(u32, u32)]) -> bool {
    ranges.iter().any(|&(a, b)| (a..=b).contains(&c))
}

pub(super) fn newline(c: u32, _: Flags) -> bool {
    c == '\n' as u32
}

pub(super) fn cr_lf(c: u32, _: Flags) -> bool {
    c == '\r' as u32 || c == '\n' as u32
}

/// `\p{L}` on collapsed text.
pub(super) fn collapsed_letter(c: u32, f: Flags) -> bool {
    if c < 128 {
        (c as u8).is_ascii_alphabetic()
    } else {
        !f.is_whitespace() && f.category() == Flags::LETTER
    }
}

/// `\p{P}` on collapsed text (llama.cpp's ASCII punctuation list).
pub(super) fn collapsed_punct(c: u32, f: Flags) -> bool {
    if c < 128 {
        matches!(c as u8, b'!'..=b'#' | b'%'..=b'*' | b','..=b'/' | b':'..=b';' | b'?'..=b'@' | b'['..=b']' | b'_' | b'{' | b'}')
    } else {
        !f.is_whitespace() && f.category() == Flags::PUNCTUATION
    }
}

/// `[一-龥ࠀ-一가-퟿]`.
pub(super) fn cjk(c: u32, f: Flags) -> bool {
    in_ranges(wide(c, f), &[(0x4E00, 0x9FA5), (0x0800, 0x4E00), (0xAC00, 0xD7FF)])
}

/// DeepSeek LLM's letter list (`\s?[A-Za-zµÀ-ÖØ-ö...]+` in llama-vocab.cpp).
#[rustfmt::skip]
const DEEPSEEK_LETTERS: [(u32, u32); 87] = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF), (0x1C4, 0x293),
    (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x376), (0x377, 0x377), (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386),
    (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B),
    (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D),
    (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4),
    (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB),
    (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128), (0x212A, 0x212D),
    (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2183),
    (0x2184, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF2), (0x2CF3, 0x2CF3),
    (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3),
    (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
];

pub(super) fn deepseek_letter(c: u32, f: Flags) -> bool {
    in_ranges(wide(c, f), &DEEPSEEK_LETTERS)
}

/// `[!-/:-~！-／：-～‘-‟　-。]`.
pub(super) fn deepseek_punct(c: u32, f: Flags) -> bool {
    in_ranges(wide(c, f), &[(0x21, 0x2F), (0x3A, 0x7E), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E), (0x2018, 0x201F), (0x3000, 0x3002)])
}

impl Splitter<'_> {
    /// A one-class regex as `std::regex` splits with it: `[class]` (each match one code point)
    /// or `[class]+` (`runs`: maximal runs); the text between matches becomes words too.
    pub fn class(&mut self, class: Class, runs: bool) {
        let mut pos = self.lo;
        while pos < self.hi {
            if class(self.cpts[pos], self.flags[pos]) {
                self.add(pos);
                pos += 1;
                while runs && pos < self.hi && class(self.cpts[pos], self.flags[pos]) {
                    pos += 1;
                }
                self.add(pos);
            } else {
                pos += 1;
            }
        }
        self.add(self.hi);
    }

    /// `\s?C+` as `std::regex` finds it, leftmost first: a space joins the run after it.
    pub fn space_then_class_run(&mut self, class: Class) {
        let at = |s: &Self, p: usize| p < s.hi && class(s.cpts[p], s.flags[p]);
        let mut pos = self.lo;
        while pos < self.hi {
            let start = pos;
            if regex_space(self.cpts[pos], self.flags[pos]) && at(self, pos + 1) {
                pos += 1;
            } else if !at(self, pos) {
                pos += 1;
                continue;
            }
            while at(self, pos) {
                pos += 1;
            }
            self.add(start);
            self.add(pos);
        }
        self.add(self.hi);
    }

    /// `\s+$`: the whitespace run that reaches the end of the piece.
    pub fn trailing_space(&mut self) {
        let mut t = self.hi;
        while t > self.lo && regex_space(self.cpts[t - 1], self.flags[t - 1]) {
            t -= 1;
        }
        self.add(t);
        self.add(self.hi);
    }

    /// `[0-9][0-9][0-9]`: three ASCII digits, leftmost first, without overlap.
    pub fn digit_triples(&mut self) {
        let digit = |c: u32| (b'0' as u32..=b'9' as u32).contains(&c);
        let mut pos = self.lo;
        while pos + 3 <= self.hi {
            if (0..3).all(|k| digit(self.cpts[pos + k])) {
                self.add(pos);
                pos += 3;
                self.add(pos);
            } else {
                pos += 1;
            }
        }
        self.add(self.hi);
    }
}
