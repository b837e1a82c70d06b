//! A fast non-cryptographic hasher (the multiply-rotate scheme of rustc's FxHash) for the
//! vocabulary's text → id map and the merge table: std's SipHash costs more than building the
//! rest of the tokenizer. Worst-case inputs only slow a lookup down.

use std::hash::{BuildHasher, Hasher};

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BuildFastHasher;

impl BuildHasher for BuildFastHasher {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FastHasher(u64);

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.add(v as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.add(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

/// Hash of a text for [`TextIndex`].
fn text_hash(text: &str) -> u64 {
    let mut h = FastHasher(0);
    h.write(text.as_bytes());
    // Mix the high bits down: the table indexes with the low ones.
    let x = h.finish();
    x ^ (x >> 29) ^ (x >> 47)
}

/// Text → id over texts stored elsewhere (the vocabulary's list): an open-addressing table of
/// ids, so the vocabulary's strings are not copied into a map.
#[derive(Debug, Default)]
pub(crate) struct TextIndex {
    slots: Vec<u32>,
    mask: usize,
}

const EMPTY: u32 = u32::MAX;

impl TextIndex {
    /// Indexes `texts`; of two equal texts the later id wins (llama.cpp's `token_to_id[word] = i`).
    pub fn new(texts: &[String]) -> TextIndex {
        let size = (texts.len() * 2).next_power_of_two().max(16);
        let mut t = TextIndex { slots: vec![EMPTY; size], mask: size - 1 };
        for (id, text) in texts.iter().enumerate() {
            let mut i = text_hash(text) as usize & t.mask;
            loop {
                let s = t.slots[i];
                if s == EMPTY || texts[s as usize] == *text {
                    t.slots[i] = id as u32;
                    break;
                }
                i = (i + 1) & t.mask;
            }
        }
        t
    }

    /// The id of `text` in `texts` (the list the index was built from).
    pub fn get(&self, texts: &[String], text: &str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = text_hash(text) as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            if texts[s as usize] == text {
                return Some(s);
            }
            i = (i + 1) & self.mask;
        }
    }
}
