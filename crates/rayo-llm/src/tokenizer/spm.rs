//! SentencePiece-style merging (`tokenizer.ggml.model = llama`), as llama.cpp's
//! `llm_tokenizer_spm_session`: start from UTF-8 characters, repeatedly merge the adjacent pair
//! whose concatenation is the token with the highest score (ties to the left), and spell
//! whatever is left that is not a token as `<0xXX>` byte tokens.

use std::collections::BinaryHeap;

use super::err;
use super::vocab::Vocab;
use crate::Result;

/// A symbol: a byte range of the text and its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

const NONE: usize = usize::MAX;

/// A candidate merge, ordered as llama.cpp's queue: higher score first, then smaller left.
#[derive(PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// The id of byte `b`: `<0xXX>`, else the one-byte text (llama.cpp's `byte_to_token`).
pub(crate) fn byte_token(vocab: &Vocab, b: u8) -> Result<u32> {
    vocab
        .id(&format!("<0x{b:02X}>"))
        .or_else(|| if b < 0x80 { vocab.id(core::str::from_utf8(&[b]).unwrap_or("")) } else { None })
        .ok_or_else(|| err(format!("the vocabulary has no token for byte 0x{b:02X} (<0x{b:02X}>)")))
}

/// Appends the ids of `text` (already escaped: spaces as `▁`) to `out`.
pub(crate) fn encode(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<()> {
    let mut syms: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, (start, c)) in text.char_indices().enumerate() {
        let len = c.len_utf8();
        syms.push(Symbol { start, len, prev: if i == 0 { NONE } else { i - 1 }, next: if start + len == text.len() { NONE } else { i + 1 } });
    }
    let mut heap = BinaryHeap::with_capacity(syms.len());
    let try_add = |heap: &mut BinaryHeap<Bigram>, syms: &[Symbol], l: usize, r: usize| {
        if l == NONE || r == NONE {
            return;
        }
        let size = syms[l].len + syms[r].len;
        let s = &text[syms[l].start..syms[l].start + size];
        if let Some(id) = vocab.id(s) {
            heap.push(Bigram { score: vocab.scores[id as usize], left: l, right: r, size });
        }
    };
    for i in 1..syms.len() {
        try_add(&mut heap, &syms, i - 1, i);
    }
    while let Some(b) = heap.pop() {
        let (l, r) = (b.left, b.right);
        // Stale: one side merged away, or either grew.
        if syms[l].len == 0 || syms[r].len == 0 || syms[l].len + syms[r].len != b.size {
            continue;
        }
        syms[l].len += syms[r].len;
        syms[r].len = 0;
        syms[l].next = syms[r].next;
        if syms[r].next != NONE {
            let rn = syms[r].next;
            syms[rn].prev = l;
        }
        try_add(&mut heap, &syms, syms[l].prev, l);
        try_add(&mut heap, &syms, l, syms[l].next);
    }
    let mut i = if syms.is_empty() { NONE } else { 0 };
    while i != NONE {
        let s = &text[syms[i].start..syms[i].start + syms[i].len];
        // Every merge made a token, so a piece that is not one is a single character.
        match vocab.id(s) {
            Some(id) => out.push(id),
            None => {
                for &b in s.as_bytes() {
                    out.push(byte_token(vocab, b)?);
                }
            }
        }
        i = syms[i].next;
    }
    Ok(())
}
