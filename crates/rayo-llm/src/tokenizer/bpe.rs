//! Byte-level BPE (`tokenizer.ggml.model = gpt2`): each word's UTF-8 bytes become GPT-2's
//! byte characters, then adjacent symbols merge lowest merge rank first, ties to the left, as
//! llama.cpp's `llm_tokenizer_bpe_session` does.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rayo::gguf::Metadata;

use super::err;
use super::hash::BuildFastHasher;
use super::unicode::byte_to_char_table;
use super::vocab::{array, Vocab};
use crate::Result;

/// The merge table and the byte characters' ids.
#[derive(Debug)]
pub(crate) struct Bpe {
    /// (left id, right id) → (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32), BuildFastHasher>,
    /// The id of each byte's GPT-2 character, if the vocabulary has it.
    byte_ids: [Option<u32>; 256],
}

/// A symbol while merging: its token id (or none: a byte character missing from the vocabulary,
/// which never merges and is dropped, as in llama.cpp) and its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    id: Option<u32>,
    prev: usize,
    next: usize,
    alive: bool,
}

const NONE: usize = usize::MAX;

/// A merge candidate: (rank, left index, left id, right id, merged id), smallest first.
type Candidate = Reverse<(u32, usize, u32, u32, u32)>;

impl Bpe {
    /// The merges of `tokenizer.ggml.merges` ("left right", rank = position; the first of two
    /// equal pairs wins). A merge naming a text that is not a token is an error.
    pub fn from_gguf(meta: &Metadata, vocab: &Vocab) -> Result<Bpe> {
        let key = "tokenizer.ggml.merges";
        let list = array(meta, key)?.ok_or_else(|| err(format!("{key} is missing")))?;
        let list = list.as_strs().ok_or_else(|| err(format!("{key} holds {}s, not strings", list.elem_type())))?;
        let mut merges = HashMap::with_capacity_and_hasher(list.len(), BuildFastHasher);
        let mut joined = String::new();
        for (rank, m) in list.iter().enumerate() {
            // llama.cpp splits at the first space after the first byte.
            let pos = m.as_bytes().iter().skip(1).position(|&b| b == b' ').map(|p| p + 1);
            let Some(pos) = pos else {
                return Err(err(format!("{key}[{rank}] = {m:?} has no space between its two parts")));
            };
            let (a, b) = (&m[..pos], &m[pos + 1..]);
            let id = |t: &str| vocab.id(t).ok_or_else(|| err(format!("{key}[{rank}] = {m:?} names {t:?}, which is not a token")));
            let (ia, ib) = (id(a)?, id(b)?);
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let merged = id(&joined)?;
            merges.entry((ia, ib)).or_insert((rank as u32, merged));
        }
        let table = byte_to_char_table();
        let mut byte_ids = [None; 256];
        let mut buf = [0u8; 4];
        for (b, c) in table.iter().enumerate() {
            byte_ids[b] = vocab.id(c.encode_utf8(&mut buf));
        }
        Ok(Bpe { merges, byte_ids })
    }

    /// Appends the ids of one word (its raw UTF-8 bytes) to `out`: byte-level BPE, where each
    /// byte starts as its GPT-2 character (one missing from the vocabulary is dropped, as in
    /// llama.cpp).
    pub fn encode_word(&self, word: &[u8], out: &mut Vec<u32>) {
        if let [b] = word {
            out.extend(self.byte_ids[*b as usize]);
            return;
        }
        self.merge(word.iter().map(|&b| self.byte_ids[b as usize]).collect(), |id, _| out.extend(id));
    }

    /// Merges symbols that start as `ids` (`None`: not a token; it never merges) and hands each
    /// final symbol to `emit` with the index of its first initial symbol, in order.
    pub fn merge(&self, ids: Vec<Option<u32>>, mut emit: impl FnMut(Option<u32>, usize)) {
        let n = ids.len();
        let mut syms: Vec<Symbol> = ids
            .into_iter()
            .enumerate()
            .map(|(i, id)| Symbol { id, prev: if i == 0 { NONE } else { i - 1 }, next: if i + 1 == n { NONE } else { i + 1 }, alive: true })
            .collect();
        // (rank, left index) smallest first; the pair ids tell a stale entry from a live one.
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(n);
        let push = |heap: &mut BinaryHeap<_>, syms: &[Symbol], l: usize, r: usize| {
            if l == NONE || r == NONE {
                return;
            }
            if let (Some(a), Some(b)) = (syms[l].id, syms[r].id) {
                if let Some(&(rank, merged)) = self.merges.get(&(a, b)) {
                    heap.push(Reverse((rank, l, a, b, merged)));
                }
            }
        };
        for i in 1..n {
            push(&mut heap, &syms, i - 1, i);
        }
        while let Some(Reverse((_, l, a, b, merged))) = heap.pop() {
            let r = syms[l].next;
            // Stale: the left symbol died or grew, or its right neighbour changed.
            if !syms[l].alive || r == NONE || syms[l].id != Some(a) || syms[r].id != Some(b) {
                continue;
            }
            syms[l].id = Some(merged);
            syms[r].alive = false;
            let rn = syms[r].next;
            syms[l].next = rn;
            if rn != NONE {
                syms[rn].prev = l;
            }
            push(&mut heap, &syms, syms[l].prev, l);
            push(&mut heap, &syms, l, rn);
        }
        let mut i = if n == 0 { NONE } else { 0 };
        while i != NONE {
            emit(syms[i].id, i);
            i = syms[i].next;
        }
    }
}
