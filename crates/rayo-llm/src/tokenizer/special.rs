//! Special tokens in text: llama.cpp's `tokenizer_st_partition` cuts the text at every
//! occurrence of a control, user-defined or unknown token (longest texts first), leaving the
//! pieces between to the tokenizer. With `parse_special` false only user-defined tokens cut.

use rayo::gguf::Metadata;

use super::vocab::{attr, string, Vocab};
use crate::Result;

/// A piece of the text: raw text (a byte range) or a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(usize, usize),
    Token(u32),
}

/// The special tokens in llama.cpp's search order: longest text first.
pub(crate) fn special_order(vocab: &Vocab) -> Vec<u32> {
    let mut ids: Vec<u32> =
        (0..vocab.len() as u32).filter(|&i| vocab.attrs[i as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0).collect();
    ids.sort_by_key(|&i| std::cmp::Reverse(vocab.texts[i as usize].len()));
    ids
}

/// The space-stripping attributes llama.cpp sets by model name, pre type or architecture (the
/// end of `llama_vocab::impl::load`): Phi-3's special tokens eat the spaces after them (but not
/// `<unk>`, `<s>`, `<|endoftext|>`), a jina/nomic/modern-bert mask token the spaces before it.
pub(crate) fn strip_attrs(vocab: &mut Vocab, meta: &Metadata, order: &[u32]) -> Result<()> {
    let name = string(meta, "general.name")?.unwrap_or("").to_ascii_lowercase();
    let pre = string(meta, "tokenizer.ggml.pre")?.unwrap_or("");
    let arch = string(meta, "general.architecture")?.unwrap_or("");
    let set = |vocab: &mut Vocab, text: &str, bit: u16, on: bool| {
        if let Some(id) = vocab.id(text) {
            let a = &mut vocab.attrs[id as usize];
            *a = if on { *a | bit } else { *a & !bit };
        }
    };
    if ["jina-v2-de", "jina-v2-es", "jina-v2-code"].iter().any(|p| pre.contains(p))
        || ["nomic-bert-moe", "jina-bert-v3"].iter().any(|a| arch.contains(a))
    {
        set(vocab, "<mask>", attr::LSTRIP, true);
    } else if name.contains("phi-3") || name.contains("phi3") {
        for &id in order {
            vocab.attrs[id as usize] |= attr::RSTRIP;
        }
        set(vocab, "</s>", attr::RSTRIP, true);
        for t in ["<unk>", "<s>", "<|endoftext|>"] {
            set(vocab, t, attr::RSTRIP, false);
        }
    } else if name.contains("modern-bert") {
        set(vocab, "[MASK]", attr::LSTRIP, true);
    }
    Ok(())
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Cuts `text` at the special tokens of `order`.
pub(crate) fn partition(vocab: &Vocab, order: &[u32], text: &str, parse_special: bool) -> Vec<Fragment> {
    let bytes = text.as_bytes();
    let mut frags = if text.is_empty() { Vec::new() } else { vec![Fragment::Text(0, text.len())] };
    for &id in order {
        let a = vocab.attrs[id as usize];
        if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            continue;
        }
        let tok = vocab.texts[id as usize].as_bytes();
        if !frags.iter().any(|f| matches!(*f, Fragment::Text(s, e) if find(&bytes[s..e], tok).is_some())) {
            continue;
        }
        let mut next = Vec::with_capacity(frags.len() + 2);
        for f in frags {
            let Fragment::Text(mut s, e) = f else {
                next.push(f);
                continue;
            };
            while let Some(m) = find(&bytes[s..e], tok).map(|m| s + m) {
                let mut left_end = m;
                if a & attr::LSTRIP != 0 {
                    while left_end > s && is_c_space(bytes[left_end - 1]) {
                        left_end -= 1;
                    }
                }
                if left_end > s {
                    next.push(Fragment::Text(s, left_end));
                }
                next.push(Fragment::Token(id));
                s = m + tok.len();
                if a & attr::RSTRIP != 0 {
                    while s < e && is_c_space(bytes[s]) {
                        s += 1;
                    }
                }
            }
            if s < e {
                next.push(Fragment::Text(s, e));
            }
        }
        frags = next;
    }
    frags
}

/// The first occurrence of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    let mut i = 0;
    while i <= last_start {
        // Skip to the next occurrence of the first byte, then compare the rest.
        let p = hay[i..=last_start].iter().position(|&b| b == first)?;
        i += p;
        if &hay[i + 1..i + needle.len()] == rest {
            return Some(i);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::find;

    #[test]
    fn find_first_occurrence() {
        assert_eq!(find(b"ab<|x|><|x|>", b"<|x|>"), Some(2));
        assert_eq!(find(b"<|x|", b"<|x|>"), None);
        assert_eq!(find(b"<<|x|>", b"<|x|>"), Some(1));
        assert_eq!(find(b"ab", b""), None);
        assert_eq!(find(b"ab<", b"<|"), None);
        assert_eq!(find(b"<|", b"<|"), Some(0));
    }
}
