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

/// Text → id over texts stored elsewhere (the vocabulary's list): an open-addressing table
/// whose slots hold the id, the length and the first 8 bytes of the text, so a lookup of a
/// short text (most tokens) touches one slot and no string, and the vocabulary's strings are
/// not copied into a map.
#[derive(Debug, Default)]
pub(crate) struct TextIndex {
    slots: Vec<Slot>,
    mask: usize,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    id: u32,
    len: u32,
    head: u64,
}

const EMPTY: u32 = u32::MAX;

/// The first 8 bytes of `text`, zero-padded.
fn head(text: &str) -> u64 {
    let b = text.as_bytes();
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

impl TextIndex {
    /// Indexes `texts`; of two equal texts the later id wins (llama.cpp's `token_to_id[word] = i`).
    pub fn new(texts: &[String]) -> TextIndex {
        let size = (texts.len() * 2).next_power_of_two().max(16);
        let mut t = TextIndex { slots: vec![Slot { id: EMPTY, len: 0, head: 0 }; size], mask: size - 1 };
        for (id, text) in texts.iter().enumerate() {
            let i = t.probe(texts, text);
            t.slots[i] = Slot { id: id as u32, len: text.len() as u32, head: head(text) };
        }
        t
    }

    /// The slot holding `text`, or the empty slot where it would go.
    fn probe(&self, texts: &[String], text: &str) -> usize {
        let (len, h) = (text.len() as u32, head(text));
        let mut i = text_hash(text) as usize & self.mask;
        loop {
            let s = self.slots[i];
            // Equal length and first 8 bytes: equal if that is all of it, else compare.
            if s.id == EMPTY || (s.len == len && s.head == h && (len <= 8 || texts[s.id as usize] == text)) {
                return i;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The id of `text` in `texts` (the list the index was built from).
    pub fn get(&self, texts: &[String], text: &str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let s = self.slots[self.probe(texts, text)];
        (s.id != EMPTY).then_some(s.id)
    }
}

#[cfg(test)]
mod tests {
    use super::TextIndex;

    #[test]
    fn text_index_finds_exact_texts_later_duplicate_wins() {
        let texts: Vec<String> = ["a", "abcdefgh", "abcdefghX", "abcdefghY", "", "a", "ab\0"].iter().map(|s| s.to_string()).collect();
        let t = TextIndex::new(&texts);
        assert_eq!(t.get(&texts, "a"), Some(5));
        assert_eq!(t.get(&texts, "abcdefgh"), Some(1));
        assert_eq!(t.get(&texts, "abcdefghY"), Some(3));
        assert_eq!(t.get(&texts, "abcdefghZ"), None);
        assert_eq!(t.get(&texts, ""), Some(4));
        assert_eq!(t.get(&texts, "ab"), None); // same padded head as "ab\0", other length
        assert_eq!(t.get(&texts, "ab\0"), Some(6));
        assert_eq!(TextIndex::default().get(&texts, "a"), None);
    }
}
