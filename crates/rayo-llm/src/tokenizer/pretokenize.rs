//! Pre-tokenizers: how a text is cut into words before BPE, ported from llama.cpp's
//! hand-written splitters (`unicode_regex_split_custom_*` in `src/unicode.cpp`) and, for the
//! character-class regexes llama.cpp runs through `std::regex`, equivalent scanners
//! ([`super::regex_class`]). Positions are code point indices; each pass cuts every piece of the
//! previous pass further (a piece's end is a hard boundary, as in llama.cpp).

use super::regex_class::{
    cjk, collapsed_letter, collapsed_number, collapsed_punct, collapsed_punct_or_sym, cr_lf, deepseek_letter, deepseek_punct, newline,
};
use super::unicode::{flags_of, Flags};

/// A pre-tokenizer: llama.cpp's list of regexes for one `tokenizer.ggml.pre` family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PreTokenizer {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)` (gpt-2, mpt, olmo, ...).
    Gpt2,
    /// `\p{N}` then the GPT-2 pattern: every digit alone (starcoder, refact, smollm, command-r, ...).
    Starcoder,
    /// Llama 3: case-insensitive contractions, `\p{N}{1,3}`, newline-aware whitespace.
    Llama3,
    /// Qwen2: as Llama 3 with single digits.
    Qwen2,
    /// Qwen3.5: as Qwen2 with combining marks (`\p{M}`) in words.
    Qwen35,
    /// llama.cpp's default (no or `default` pre type): punctuation runs, GPT-2, `\p{N}+`, digit triples.
    Default,
    /// Falcon: punctuation runs, GPT-2, digit triples.
    Falcon,
    /// DeepSeek Coder: `[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, CJK runs, `\p{N}`.
    DeepseekCoder,
    /// DeepSeek LLM: `[\r\n]`, `\s?` + runs of its letter list, of its punctuation list,
    /// trailing whitespace, CJK runs, `\p{N}+`.
    DeepseekLlm,
    /// Gemma 4 (SentencePiece-style BPE): `[^\n]+|[\n]+` only.
    Gemma4,
}

/// One pass over every piece.
#[derive(Clone, Copy)]
enum Pass {
    Gpt2,
    Llama3,
    Qwen2,
    Qwen35,
    /// Each `\p{N}` code point alone.
    EachNumber,
    /// Maximal runs of `\p{N}`.
    NumberRuns,
    /// Maximal runs of `[\p{P}\$\+<=>\^~\|]`.
    PunctRuns,
    /// `[0-9][0-9][0-9]`, leftmost first.
    DigitTriples,
    /// Each code point of a class alone.
    Each(Class),
    /// Maximal runs of a class.
    Runs(Class),
    /// `\s?` then a maximal run of a class.
    SpaceThenRun(Class),
    /// `\s+$`: the whitespace that ends the piece.
    TrailingSpace,
}

/// A character class as a `std::regex` pass sees a code point.
pub(super) type Class = fn(u32, Flags) -> bool;

impl PreTokenizer {
    fn passes(self) -> &'static [Pass] {
        match self {
            PreTokenizer::Gpt2 => &[Pass::Gpt2],
            PreTokenizer::Starcoder => &[Pass::EachNumber, Pass::Gpt2],
            PreTokenizer::Llama3 => &[Pass::Llama3],
            PreTokenizer::Qwen2 => &[Pass::Qwen2],
            PreTokenizer::Qwen35 => &[Pass::Qwen35],
            PreTokenizer::Default => &[Pass::PunctRuns, Pass::Gpt2, Pass::NumberRuns, Pass::DigitTriples],
            PreTokenizer::Falcon => &[Pass::PunctRuns, Pass::Gpt2, Pass::DigitTriples],
            PreTokenizer::Gemma4 => &[Pass::Runs(newline)],
            PreTokenizer::DeepseekCoder => {
                &[Pass::Each(cr_lf), Pass::SpaceThenRun(collapsed_letter), Pass::SpaceThenRun(collapsed_punct), Pass::Runs(cjk), Pass::EachNumber]
            }
            PreTokenizer::DeepseekLlm => &[
                Pass::Each(cr_lf),
                Pass::SpaceThenRun(deepseek_letter),
                Pass::SpaceThenRun(deepseek_punct),
                Pass::TrailingSpace,
                Pass::Runs(cjk),
                Pass::NumberRuns,
            ],
        }
    }

    /// The words of `cpts` as `(start, end)` code point ranges, in order, covering all of it.
    pub fn split(self, cpts: &[u32]) -> Vec<(usize, usize)> {
        let flags = flags_of(cpts);
        let mut pieces = vec![(0, cpts.len())];
        if cpts.is_empty() {
            return Vec::new();
        }
        for &pass in self.passes() {
            let mut out = Vec::with_capacity(pieces.len() * 2);
            for &(lo, hi) in &pieces {
                let mut s = Splitter { cpts, flags: &flags, lo, hi, prev: lo, out: &mut out };
                match pass {
                    Pass::Gpt2 => s.gpt2(),
                    Pass::Llama3 => s.llama3(false, false),
                    Pass::Qwen2 => s.llama3(true, false),
                    Pass::Qwen35 => s.llama3(true, true),
                    Pass::EachNumber => s.class(collapsed_number, false),
                    Pass::NumberRuns => s.class(collapsed_number, true),
                    Pass::PunctRuns => s.class(collapsed_punct_or_sym, true),
                    Pass::DigitTriples => s.digit_triples(),
                    Pass::Each(c) => s.class(c, false),
                    Pass::Runs(c) => s.class(c, true),
                    Pass::SpaceThenRun(c) => s.space_then_class_run(c),
                    Pass::TrailingSpace => s.trailing_space(),
                }
            }
            pieces = out;
        }
        pieces
    }
}

pub(super) const OUT_OF_RANGE: u32 = u32::MAX;

/// One piece `[lo, hi)` being cut; `prev` is where the next word starts.
pub(super) struct Splitter<'a> {
    pub cpts: &'a [u32],
    pub flags: &'a [Flags],
    pub lo: usize,
    pub hi: usize,
    pub prev: usize,
    pub out: &'a mut Vec<(usize, usize)>,
}

impl Splitter<'_> {
    fn cpt(&self, pos: usize) -> u32 {
        if self.lo <= pos && pos < self.hi {
            self.cpts[pos]
        } else {
            OUT_OF_RANGE
        }
    }

    fn flags(&self, pos: usize) -> Flags {
        if self.lo <= pos && pos < self.hi {
            self.flags[pos]
        } else {
            Flags::default()
        }
    }

    /// Ends the current word at `end`; returns its length.
    pub fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev;
        if len > 0 {
            self.out.push((self.prev, end));
        }
        self.prev = end;
        len
    }

    /// `'s|'t|'re|'ve|'m|'ll|'d` at `pos` (ASCII case folded when `fold`): its length.
    fn contraction(&self, pos: usize, fold: bool) -> usize {
        let low = |c: u32| if fold && (b'A' as u32..=b'Z' as u32).contains(&c) { c + 32 } else { c };
        if self.cpt(pos) != '\'' as u32 || pos + 1 >= self.hi {
            return 0;
        }
        let next = low(self.cpt(pos + 1));
        if [b's', b't', b'm', b'd'].iter().any(|&b| next == b as u32) {
            return 2;
        }
        if pos + 2 < self.hi {
            let nn = low(self.cpt(pos + 2));
            let pair = |a: u8, b: u8| next == a as u32 && nn == b as u32;
            if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                return 3;
            }
        }
        0
    }

    /// Counts whitespace from `pos`; also returns one past the last `\r`/`\n` in it (0: none).
    fn whitespace_run(&self, pos: usize) -> (usize, usize) {
        let (mut n, mut last_nl) = (0, 0);
        while self.flags(pos + n).is_whitespace() {
            let c = self.cpt(pos + n);
            if c == '\r' as u32 || c == '\n' as u32 {
                last_nl = pos + n + 1;
            }
            n += 1;
        }
        (n, last_nl)
    }

    /// `<space>?` then a run of code points whose flags satisfy `class`, when the first one
    /// does; returns whether it took a word.
    fn space_then_run(&mut self, pos: &mut usize, class: impl Fn(Flags) -> bool) -> bool {
        let space = self.cpt(*pos) == ' ' as u32;
        let mut f2 = if space { self.flags(*pos + 1) } else { self.flags(*pos) };
        if !class(f2) {
            return false;
        }
        *pos += space as usize;
        while class(f2) {
            *pos += 1;
            f2 = self.flags(*pos);
        }
        true
    }

    /// The splitters' last alternatives at `pos`, before a run of `num_ws` whitespace code
    /// points: `\s+(?!\S)` (the run but its last, when something follows), `\s+`, else one
    /// code point. Ends the piece there and returns its end.
    fn whitespace_or_one(&mut self, pos: usize, num_ws: usize) -> usize {
        let end = if num_ws > 1 && self.cpt(pos + num_ws) != OUT_OF_RANGE {
            pos + num_ws - 1
        } else if num_ws > 0 {
            pos + num_ws
        } else {
            pos + 1
        };
        self.add(end);
        end
    }

    /// llama.cpp's `unicode_regex_split_custom_gpt2`.
    fn gpt2(&mut self) {
        let other = |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.any();
        let mut pos = self.lo;
        while pos < self.hi {
            let n = self.contraction(pos, false);
            if n > 0 {
                pos += self.add(pos + n);
                continue;
            }
            // <space>?\p{L}+ | <space>?\p{N}+ | <space>?[^\s\p{L}\p{N}]+
            if self.space_then_run(&mut pos, Flags::is_letter)
                || self.space_then_run(&mut pos, Flags::is_number)
                || self.space_then_run(&mut pos, other)
            {
                self.add(pos);
                continue;
            }
            let (num_ws, _) = self.whitespace_run(pos);
            pos = self.whitespace_or_one(pos, num_ws);
        }
    }

    /// llama.cpp's `unicode_regex_split_custom_llama3`; with `single_digits`, `_qwen2` (`\p{N}`
    /// instead of `\p{N}{1,3}`); with `marks` too, `_qwen35` (`\p{M}` counts as a letter).
    fn llama3(&mut self, single_digits: bool, marks: bool) {
        let letter = |f: Flags| f.is_letter() || (marks && f.is_mark());
        let mut pos = self.lo;
        while pos < self.hi {
            let cpt = self.cpt(pos);
            let flags = self.flags(pos);
            let n = self.contraction(pos, true);
            if n > 0 {
                pos += self.add(pos + n);
                continue;
            }
            let newline = cpt == '\r' as u32 || cpt == '\n' as u32;
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(newline || flags.is_number()) && (letter(flags) || letter(self.flags(pos + 1))) {
                pos += 1;
                while letter(self.flags(pos)) {
                    pos += 1;
                }
                self.add(pos);
                continue;
            }
            // \p{N}{1,3} | \p{N}
            if flags.is_number() {
                if single_digits {
                    pos += 1;
                } else {
                    let mut ini = pos;
                    while self.flags(pos).is_number() {
                        pos += 1;
                        if pos - ini >= 3 {
                            self.add(pos);
                            ini = pos;
                        }
                    }
                }
                self.add(pos);
                continue;
            }
            // <space>?[^\s\p{L}\p{N}]+[\r\n]*  (llama.cpp tests the first code point's own
            // flags for "in range" here, not the one after the space)
            let space = cpt == ' ' as u32;
            let mut f2 = if space { self.flags(pos + 1) } else { flags };
            let other = |f: Flags| !(f.is_whitespace() || letter(f) || f.is_number());
            if other(f2) && flags.any() {
                pos += space as usize;
                while other(f2) && f2.any() {
                    pos += 1;
                    f2 = self.flags(pos);
                }
                while self.cpt(pos) == '\r' as u32 || self.cpt(pos) == '\n' as u32 {
                    pos += 1;
                }
                self.add(pos);
                continue;
            }
            let (num_ws, last_nl) = self.whitespace_run(pos);
            // \s*[\r\n]+
            if last_nl > 0 {
                pos = last_nl;
                self.add(pos);
                continue;
            }
            pos = self.whitespace_or_one(pos, num_ws);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, text: &str) -> Vec<String> {
        let cpts: Vec<u32> = text.chars().map(|c| c as u32).collect();
        pre.split(&cpts).into_iter().map(|(a, b)| text.chars().skip(a).take(b - a).collect()).collect()
    }

    #[test]
    fn gpt2_words() {
        assert_eq!(words(PreTokenizer::Gpt2, "Hello world's  end 123!!"), ["Hello", " world", "'s", " ", " end", " 123", "!!"]);
        assert_eq!(words(PreTokenizer::Gpt2, "a  "), ["a", "  "]);
    }

    #[test]
    fn starcoder_splits_every_digit() {
        assert_eq!(words(PreTokenizer::Starcoder, "x 3333+77"), ["x", " ", "3", "3", "3", "3", "+", "7", "7"]);
    }

    #[test]
    fn llama3_groups_three_digits_and_newlines() {
        assert_eq!(words(PreTokenizer::Llama3, "1234567 I'M\n\n hi"), ["123", "456", "7", " I", "'M", "\n\n", " hi"]);
        assert_eq!(words(PreTokenizer::Qwen2, "12"), ["1", "2"]);
    }

    #[test]
    fn deepseek_regex_passes() {
        assert_eq!(words(PreTokenizer::DeepseekCoder, "  ab,\ncd 12"), [" ", " ab", ",", "\n", "cd", " ", "1", "2"]);
        assert_eq!(words(PreTokenizer::DeepseekLlm, "x 中文  "), ["x", " ", "中文", "  "]);
    }

    #[test]
    fn default_digit_triples() {
        assert_eq!(words(PreTokenizer::Falcon, "12345"), ["123", "45"]);
    }
}
