//! Interned names of one kernel: parameters, shared arrays and labels live once in a text arena,
//! and instructions refer to them by a copyable [`Name`] (no `String` per operand or branch).

/// A name interned in one kernel ([`super::PtxKernel::intern`], `shared_array`, `new_label`).
/// `kernel` ties it to that kernel, so the checker can reject a name from another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name {
    pub(crate) kernel: u32,
    pub(crate) index: u32,
}

/// The text arena: every name's bytes, and where each one starts and ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Names {
    text: String,
    spans: Vec<(u32, u32)>,
}

impl Names {
    /// Room for a typical kernel's names (parameters, shared arrays, labels) without growing.
    pub(crate) fn new() -> Names {
        Names { text: String::with_capacity(256), spans: Vec::with_capacity(32) }
    }

    /// The text of name `index` (empty for an index this table never gave out).
    pub(crate) fn get(&self, index: u32) -> &str {
        match self.spans.get(index as usize) {
            Some(&(s, e)) => &self.text[s as usize..e as usize],
            None => "",
        }
    }

    fn find(&self, s: &str) -> Option<u32> {
        self.spans.iter().position(|&(a, b)| &self.text[a as usize..b as usize] == s).map(|i| i as u32)
    }

    /// The index of `s`, added if new.
    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        if let Some(i) = self.find(s) {
            return i;
        }
        let start = self.text.len();
        self.text.push_str(s);
        self.seal(start)
    }

    /// Interns the text written at the end of the arena since `start` (by `write` below).
    pub(crate) fn intern_tail(&mut self, start: usize) -> u32 {
        let (a, b) = (start, self.text.len());
        let found = self.spans.iter().position(|&(s, e)| self.text[s as usize..e as usize] == self.text[a..b]);
        match found {
            Some(i) => {
                self.text.truncate(start);
                i as u32
            }
            None => self.seal(start),
        }
    }

    fn seal(&mut self, start: usize) -> u32 {
        self.spans.push((start as u32, self.text.len() as u32));
        (self.spans.len() - 1) as u32
    }

    /// The arena, to write a new name at its end (then [`Names::intern_tail`]).
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_gives_one_index_per_text() {
        let mut n = Names::default();
        let a = n.intern("tile_a");
        let b = n.intern("tile_b");
        assert_ne!(a, b);
        assert_eq!(n.intern("tile_a"), a);
        let start = n.text_mut().len();
        n.text_mut().push_str("tile_b");
        assert_eq!(n.intern_tail(start), b, "a name written in place is found again");
        assert_eq!((n.get(a), n.get(b), n.get(7)), ("tile_a", "tile_b", ""));
    }
}
