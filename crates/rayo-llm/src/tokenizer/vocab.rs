//! The vocabulary from GGUF metadata: token texts, scores and attributes, the text → id map,
//! and the special ids (BOS, EOS, EOT, FIM, ...) with llama.cpp's defaults and its
//! end-of-generation set (`llama_vocab::impl::load` in `src/llama-vocab.cpp`).

use std::collections::HashSet;

use rayo::gguf::{GgufArray, GgufValue, Metadata};

use super::err;
use super::hash::TextIndex;
use crate::Result;

/// llama.cpp's `llama_token_attr` bits.
pub(crate) mod attr {
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;
}

/// A GGUF token type (`tokenizer.ggml.token_type`) as llama.cpp's attribute.
fn attr_of_type(ty: i32) -> u16 {
    match ty {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => 0, // undefined
    }
}

/// The vocabulary.
#[derive(Debug)]
pub(crate) struct Vocab {
    pub texts: Vec<String>,
    pub scores: Vec<f32>,
    pub attrs: Vec<u16>,
    pub to_id: TextIndex,
}

/// The special ids, `None` where the model has none.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

/// One special id's slot in [`SpecialIds`].
type Field = fn(&mut SpecialIds) -> &mut Option<u32>;

/// The array under `key` (absent: `None`; present with another type: an error).
pub(crate) fn array<'m>(meta: &'m Metadata, key: &str) -> Result<Option<&'m GgufArray>> {
    match meta.get(key) {
        None => Ok(None),
        Some(GgufValue::Array(a)) => Ok(Some(a)),
        Some(v) => Err(err(format!("{key} is a {}, not an array", v.ty()))),
    }
}

/// The string under `key`.
pub(crate) fn string<'m>(meta: &'m Metadata, key: &str) -> Result<Option<&'m str>> {
    match meta.get(key) {
        None => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or_else(|| err(format!("{key} is a {}, not a string", v.ty()))),
    }
}

/// The bool under `key`.
pub(crate) fn boolean(meta: &Metadata, key: &str) -> Result<Option<bool>> {
    match meta.get(key) {
        None => Ok(None),
        Some(v) => v.as_bool().map(Some).ok_or_else(|| err(format!("{key} is a {}, not a bool", v.ty()))),
    }
}

impl Vocab {
    /// Tokens, scores and types from `tokenizer.ggml.{tokens,scores,token_type}`.
    pub fn from_gguf(meta: &Metadata) -> Result<Vocab> {
        let key = "tokenizer.ggml.tokens";
        let tokens = array(meta, key)?.ok_or_else(|| err(format!("{key} is missing")))?;
        let tokens = tokens.as_strs().ok_or_else(|| err(format!("{key} holds {}s, not strings", tokens.elem_type())))?;
        let n = tokens.len();
        if n == 0 || n > i32::MAX as usize {
            return Err(err(format!("{key} has {n} tokens")));
        }

        let scores = match array(meta, "tokenizer.ggml.scores")? {
            None => vec![0.0; n],
            Some(a) => {
                let s: Vec<f32> = match (a.as_f32s(), a.as_i32s()) {
                    (Some(f), _) => f.iter().take(n).copied().collect(),
                    (_, Some(i)) => i.iter().take(n).map(|&v| v as f32).collect(),
                    _ => return Err(err(format!("tokenizer.ggml.scores holds {}s, not f32 or i32", a.elem_type()))),
                };
                if s.len() < n {
                    return Err(err(format!("tokenizer.ggml.scores has {} entries for {n} tokens", s.len())));
                }
                s
            }
        };

        let attrs = match array(meta, "tokenizer.ggml.token_type")? {
            None => vec![attr::NORMAL; n],
            Some(a) => {
                let t = a.as_i32s().ok_or_else(|| err(format!("tokenizer.ggml.token_type holds {}s, not i32", a.elem_type())))?;
                if t.len() < n {
                    return Err(err(format!("tokenizer.ggml.token_type has {} entries for {n} tokens", t.len())));
                }
                t[..n].iter().map(|&ty| attr_of_type(ty)).collect()
            }
        };

        // llama.cpp renames empty tokens; a later duplicate text wins the map, as there.
        let texts: Vec<String> = tokens.iter().enumerate().map(|(i, t)| if t.is_empty() { format!("[EMPTY_{i}]") } else { t.clone() }).collect();
        let to_id = TextIndex::new(&texts);
        Ok(Vocab { texts, scores, attrs, to_id })
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.to_id.get(&self.texts, text)
    }

    /// The smallest id whose text is one of `names`.
    fn find(&self, names: &[&str]) -> Option<u32> {
        names.iter().filter_map(|t| self.id(t)).min()
    }

    /// Reads the special ids over `defaults` (llama.cpp's per-type defaults), detects the
    /// EOT/FIM tokens by their text, and returns them with the end-of-generation set. Marks
    /// the tokens it detects as control, as llama.cpp does.
    pub fn special_ids(&mut self, meta: &Metadata, defaults: SpecialIds) -> Result<(SpecialIds, HashSet<u32>)> {
        let n = self.len() as u64;
        let mut s = defaults;
        let keys: [(&str, Field); 17] = [
            ("bos_token_id", |s| &mut s.bos),
            ("eos_token_id", |s| &mut s.eos),
            ("eot_token_id", |s| &mut s.eot),
            ("eom_token_id", |s| &mut s.eom),
            ("unknown_token_id", |s| &mut s.unk),
            ("seperator_token_id", |s| &mut s.sep),
            ("padding_token_id", |s| &mut s.pad),
            ("mask_token_id", |s| &mut s.mask),
            ("fim_pre_token_id", |s| &mut s.fim_pre),
            ("fim_suf_token_id", |s| &mut s.fim_suf),
            ("fim_mid_token_id", |s| &mut s.fim_mid),
            ("fim_pad_token_id", |s| &mut s.fim_pad),
            ("fim_rep_token_id", |s| &mut s.fim_rep),
            ("fim_sep_token_id", |s| &mut s.fim_sep),
            ("prefix_token_id", |s| &mut s.fim_pre),
            ("suffix_token_id", |s| &mut s.fim_suf),
            ("middle_token_id", |s| &mut s.fim_mid),
        ];
        for (name, field) in keys {
            let slot = field(&mut s);
            if slot.is_some_and(|id| id as u64 >= n) {
                *slot = None; // a default past the vocabulary is disabled
            }
            let key = format!("tokenizer.ggml.{name}");
            let Some(v) = meta.get(&key) else { continue };
            let id = v.to_i64().ok_or_else(|| err(format!("{key} is a {}, not an integer", v.ty())))?;
            // llama.cpp reads a u32 and keeps the default when it is past the vocabulary.
            if (0..n as i64).contains(&id) {
                *slot = Some(id as u32);
            } else {
                log::warn!("{key} = {id} is past the vocabulary ({n} tokens); using {slot:?}");
            }
        }

        // Detection by text, where the metadata names none (llama.cpp's list, same order).
        let detect: [(Field, &[&str]); 7] = [
            (
                |s| &mut s.eot,
                &[
                    "<|eot_id|>",
                    "<|im_end|>",
                    "<|end|>",
                    "<end_of_turn>",
                    "<|endoftext|>",
                    "<|end_of_text|>",
                    "<EOT>",
                    "_<EOT>",
                    "[EOT]",
                    "<｜end▁of▁sentence｜>",
                    "<end_of_utterance>",
                ],
            ),
            (|s| &mut s.eom, &["<|eom_id|>"]),
            (
                |s| &mut s.fim_pre,
                &["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"],
            ),
            (
                |s| &mut s.fim_suf,
                &["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"],
            ),
            (
                |s| &mut s.fim_mid,
                &["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"],
            ),
            (|s| &mut s.fim_pad, &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"]),
            (|s| &mut s.fim_rep, &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"]),
        ];
        let fim_sep_names: &[&str] = &["<|file_sep|>"];
        for (field, names) in detect.iter().copied().chain([((|s: &mut SpecialIds| &mut s.fim_sep) as Field, fim_sep_names)]) {
            if field(&mut s).is_none() {
                if let Some(id) = self.find(names) {
                    *field(&mut s) = Some(id);
                    self.attrs[id as usize] |= attr::CONTROL;
                }
            }
        }

        // Control tokens whose text says "unused" are unused.
        for (a, t) in self.attrs.iter_mut().zip(&self.texts) {
            if *a & attr::CONTROL != 0 && t.contains("unused") {
                *a |= attr::UNUSED;
            }
        }

        let mut eog: HashSet<u32> = [s.fim_pad, s.fim_rep, s.fim_sep].into_iter().flatten().collect();
        const EOG_TEXTS: &[&str] = &[
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<|return|>",
            "<|call|>",
            "<|flush|>",
            "<|calls|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "</s>",
            "<|eom_id|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "[EOS]",
            "<|end_of_text|>",
            "<end_of_utterance>",
            "<eos>",
            "<turn|>",
            "<|tool_response>",
            "<｜end▁of▁sentence｜>",
            "[e~[",
        ];
        // (Through the text map, as llama.cpp: of two tokens with one text only the last counts.)
        for id in EOG_TEXTS.iter().filter_map(|t| self.id(t)).collect::<Vec<_>>() {
            eog.insert(id);
            self.attrs[id as usize] |= attr::CONTROL;
        }
        for id in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"].iter().filter_map(|t| self.id(t)).collect::<Vec<_>>() {
            self.attrs[id as usize] = attr::USER_DEFINED;
        }
        eog.extend([s.eos, s.eot, s.eom].into_iter().flatten());

        // o200k_harmony / solar-open: "<|end|>" is not an end of generation there.
        let texts = &self.texts;
        let find = |eog: &HashSet<u32>, t: &str| eog.iter().copied().find(|&id| texts[id as usize] == t);
        if let Some(end) = find(&eog, "<|end|>") {
            let call = find(&eog, "<|call|>").is_some();
            if (find(&eog, "<|return|>").is_some() && call) || (find(&eog, "<|calls|>").is_some() && find(&eog, "<|flush|>").is_some()) {
                eog.remove(&end);
                self.attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        // gemma4 / plamo: "</s>" is a normal token.
        if let Some(s_id) = find(&eog, "</s>") {
            if find(&eog, "<|tool_response>").is_some() || find(&eog, "<|plamo:eos|>").is_some() {
                eog.remove(&s_id);
                self.attrs[s_id as usize] = attr::NORMAL;
            }
        }
        Ok((s, eog))
    }
}
