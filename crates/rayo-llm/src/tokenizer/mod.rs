//! The tokenizer a GGUF file describes in its `tokenizer.ggml.*` metadata, token for token as
//! llama.cpp's `llama_tokenize` and `llama_token_to_piece` (`src/llama-vocab.cpp`).
//!
//! Models: byte-level BPE (`gpt2`) with the pre-tokenizer `tokenizer.ggml.pre` names
//! (`pretokenize.rs`, `regex_class.rs`: gpt-2, llama-bpe, qwen2, qwen35, smollm/starcoder,
//! falcon, deepseek-coder/-llm, default and their aliases), Gemma 4's BPE over characters
//! (`gemma4`), and SentencePiece (`llama`, `spm.rs`). Special tokens are cut out of the text
//! first (`special.rs`) when asked to. Anything else is an [`Error::Tokenizer`] naming it.
//!
//! ```no_run
//! # fn main() -> rayo_llm::Result<()> {
//! let file = rayo::gguf::GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let tok = rayo_llm::Tokenizer::from_gguf(file.metadata())?;
//! // As llama.cpp's llama-simple: add BOS/EOS as the model asks, parse <|im_start|> etc.
//! let ids = tok.encode("<|im_start|>user\nhi<|im_end|>", true, true)?;
//! // Streaming: write each token's bytes as they come (a piece may end mid-character).
//! let mut out = Vec::new();
//! for &id in &ids {
//!     out.extend_from_slice(tok.token_bytes(id)?);
//! }
//! assert_eq!(tok.decode(&ids)?, "<|im_start|>user\nhi<|im_end|>");
//! # Ok(())
//! # }
//! ```

mod bpe;
mod hash;
mod pretokenize;
mod regex_class;
mod special;
mod spm;
mod unicode;
mod unicode_data;
mod vocab;

use std::collections::HashSet;

use rayo::gguf::Metadata;

use crate::{Error, Result};
use bpe::Bpe;
use pretokenize::PreTokenizer;
use special::Fragment;
use vocab::{attr, SpecialIds, Vocab};

pub(crate) fn err(what: String) -> Error {
    Error::Tokenizer { what }
}

/// Which algorithm turns a piece of text into ids.
#[derive(Debug)]
enum Model {
    /// BPE after a pre-tokenizer (byte-level, or over characters for Gemma 4);
    /// `ignore_merges`: a word that is a token is taken whole (llama3).
    Bpe { bpe: Box<Bpe>, pre: PreTokenizer, ignore_merges: bool },
    /// SentencePiece; `add_space_prefix`: a space before text that starts the input or follows
    /// a special token.
    Spm { add_space_prefix: bool },
}

/// A tokenizer built from GGUF metadata.
#[derive(Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    special: SpecialIds,
    eog: HashSet<u32>,
    /// Special tokens, longest text first (the order the text is searched in).
    special_order: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    /// Every token's bytes as `llama_token_to_piece(id, special = true)` gives them, joined;
    /// token `i` is `piece_bytes[piece_ends[i - 1]..piece_ends[i]]`.
    piece_bytes: Vec<u8>,
    piece_ends: Vec<usize>,
}

/// The BPE pre-tokenizer for `tokenizer.ggml.pre`, whether merges are skipped for words that
/// are tokens, and whether BOS is added by default (llama.cpp's table, the families whose code
/// paths rayo has).
fn bpe_pre(pre: Option<&str>) -> Result<(PreTokenizer, bool, bool)> {
    use PreTokenizer::*;
    Ok(match pre.unwrap_or("default") {
        "default" => (Default, false, false),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2" | "jina-v5-nano" => (Llama3, true, true),
        "dbrx" | "smaug-bpe" => (Llama3, false, false),
        "falcon" => (Falcon, false, false),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => (Starcoder, false, false),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "mpt"
        | "olmo" | "jais" | "trillion" | "granite-docling" | "exaone4" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => (Gpt2, false, false),
        "qwen35" => (Qwen35, false, false),
        "gemma4" | "granite-embed-multi-311m" => (Gemma4, false, true),
        "deepseek-coder" => (DeepseekCoder, false, false),
        "deepseek-llm" => (DeepseekLlm, false, false),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "stablelm2" | "hunyuan" | "solar-open" | "megrez" => (Qwen2, false, false),
        other => {
            return Err(err(format!(
            "tokenizer.ggml.pre = {other:?} is not supported (rayo has gpt-2, llama-bpe, qwen2, qwen35, smollm/starcoder, falcon, deepseek-coder, deepseek-llm, gemma4, default and their aliases)"
        )))
        }
    })
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's metadata.
    pub fn from_gguf(meta: &Metadata) -> Result<Tokenizer> {
        let model_name = vocab::string(meta, "tokenizer.ggml.model")?.ok_or_else(|| err("tokenizer.ggml.model is missing".into()))?;
        let pre_name = vocab::string(meta, "tokenizer.ggml.pre")?;
        let mut vocab = Vocab::from_gguf(meta)?;
        let (model, defaults, mut add_bos) = match model_name {
            "gpt2" | "gemma4" => {
                // The gemma4 model is SentencePiece-style BPE with no default special ids.
                let gemma = model_name == "gemma4";
                let (pre, ignore_merges, add_bos) = bpe_pre(if gemma { Some("gemma4") } else { pre_name })?;
                let bpe = Box::new(Bpe::from_gguf(meta, &vocab)?);
                let defaults = if gemma { SpecialIds::default() } else { SpecialIds { bos: Some(11), eos: Some(11), ..SpecialIds::default() } };
                (Model::Bpe { bpe, pre, ignore_merges }, defaults, add_bos)
            }
            "llama" => {
                let add_space_prefix = vocab::boolean(meta, "tokenizer.ggml.add_space_prefix")?.unwrap_or(true);
                (Model::Spm { add_space_prefix }, SpecialIds { bos: Some(1), eos: Some(2), unk: Some(0), ..SpecialIds::default() }, true)
            }
            other => return Err(err(format!("tokenizer.ggml.model = {other:?} is not supported (rayo has gpt2, gemma4 and llama)"))),
        };
        let (special, eog) = vocab.special_ids(meta, defaults)?;
        add_bos = vocab::boolean(meta, "tokenizer.ggml.add_bos_token")?.unwrap_or(add_bos);
        // llama.cpp forces BOS on for Gemma 4.
        let escape_spaces = matches!(model, Model::Bpe { pre: PreTokenizer::Gemma4, .. });
        add_bos |= escape_spaces;
        let add_eos = vocab::boolean(meta, "tokenizer.ggml.add_eos_token")?.unwrap_or(false);

        let special_order = special::special_order(&vocab);
        special::strip_attrs(&mut vocab, meta, &special_order)?;

        let unescape = escape_spaces || matches!(model, Model::Spm { .. });
        let mut piece_bytes = Vec::with_capacity(vocab.len() * 8);
        let mut piece_ends = Vec::with_capacity(vocab.len());
        for i in 0..vocab.len() {
            piece(&vocab, i, unescape, &mut piece_bytes);
            piece_ends.push(piece_bytes.len());
        }
        Ok(Tokenizer { vocab, model, special, eog, special_order, add_bos, add_eos, piece_bytes, piece_ends })
    }

    /// The ids of `text`, as llama.cpp's `llama_tokenize(text, add_special, parse_special)`:
    /// `add_special` adds BOS/EOS where the model asks for them, `parse_special` lets control
    /// tokens written in the text (`<|im_start|>`) become those tokens.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        let frags = special::partition(&self.vocab, &self.special_order, text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.push(self.special.bos.ok_or_else(|| err("the model asks for a BOS token (tokenizer.ggml.add_bos_token) but has none".into()))?);
        }
        let mut prev_special = true;
        for f in frags {
            match f {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(s, e) => {
                    let piece = text.get(s..e).ok_or_else(|| err(format!("special-token cut {s}..{e} is not on a character boundary")))?;
                    match &self.model {
                        Model::Bpe { bpe, pre, ignore_merges } => self.encode_bpe(bpe, *pre, *ignore_merges, piece, &mut out)?,
                        Model::Spm { add_space_prefix } => {
                            let mut t = String::with_capacity(piece.len() + 3);
                            if *add_space_prefix && prev_special {
                                t.push(' ');
                            }
                            t.push_str(piece);
                            spm::encode(&self.vocab, &t.replace(' ', "\u{2581}"), &mut out)?;
                        }
                    }
                    prev_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.push(self.special.eos.ok_or_else(|| err("the model asks for an EOS token (tokenizer.ggml.add_eos_token) but has none".into()))?);
        }
        Ok(out)
    }

    fn encode_bpe(&self, bpe: &Bpe, pre: PreTokenizer, ignore_merges: bool, text: &str, out: &mut Vec<u32>) -> Result<()> {
        if pre == PreTokenizer::Gemma4 {
            return self.encode_gemma4(bpe, &text.replace(' ', "\u{2581}"), out);
        }
        let cpts: Vec<u32> = text.chars().map(|c| c as u32).collect();
        // Byte offset of each code point, to slice words out of `text`.
        let mut offs = Vec::with_capacity(cpts.len() + 1);
        offs.extend(text.char_indices().map(|(i, _)| i));
        offs.push(text.len());
        let table = unicode::byte_to_char_table();
        for (a, b) in pre.split(&cpts) {
            let word = &text.as_bytes()[offs[a]..offs[b]];
            if ignore_merges {
                let encoded: String = word.iter().map(|&x| table[x as usize]).collect();
                if let Some(id) = self.vocab.id(&encoded) {
                    out.push(id);
                    continue;
                }
            }
            bpe.encode_word(word, out);
        }
        Ok(())
    }

    /// Gemma 4: BPE over UTF-8 characters (spaces already `▁`), lines and newline runs apart;
    /// a character that is not a token becomes `<0xXX>` byte tokens (skipped where missing).
    fn encode_gemma4(&self, bpe: &Bpe, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let cpts: Vec<u32> = chars.iter().map(|&(_, c)| c as u32).collect();
        let mut buf = [0u8; 4];
        for (a, b) in PreTokenizer::Gemma4.split(&cpts) {
            let end = chars.get(b).map_or(text.len(), |&(i, _)| i);
            let word = &text[chars[a].0..end];
            if word.bytes().all(|x| x == b'\n') {
                if let Some(id) = self.vocab.id(word) {
                    out.push(id);
                    continue;
                }
            }
            let ids = chars[a..b].iter().map(|&(_, c)| self.vocab.id(c.encode_utf8(&mut buf))).collect();
            bpe.merge(ids, |id, i| match id {
                Some(id) => out.push(id),
                None => {
                    let mut cb = [0u8; 4];
                    for x in chars[a + i].1.encode_utf8(&mut cb).bytes() {
                        out.extend(self.vocab.id(&format!("<0x{x:02X}>")));
                    }
                }
            });
        }
        Ok(())
    }

    /// The bytes of token `id` as llama.cpp's `llama_token_to_piece(id, special = true)` renders
    /// them (a byte-level token may hold part of a UTF-8 character).
    pub fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        let i = id as usize;
        let end = *self.piece_ends.get(i).ok_or_else(|| err(format!("token id {id} is past the vocabulary ({} tokens)", self.vocab.len())))?;
        let start = if i == 0 { 0 } else { self.piece_ends[i - 1] };
        Ok(&self.piece_bytes[start..end])
    }

    /// The text of `ids`: their bytes joined, read as UTF-8 (invalid sequences become U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.token_bytes(id)?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.special.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.special.eos
    }

    /// Whether `id` ends generation (llama.cpp's EOG set: EOS, EOT, EOM, FIM pad/repo/sep and
    /// the tokens whose text marks an end: `<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// The end-of-generation tokens, ascending.
    pub fn eog_ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.eog.iter().copied().collect();
        v.sort_unstable();
        v
    }

    /// Whether encoding with `add_special` adds BOS / EOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// See [`Tokenizer::adds_bos`].
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }

    /// The text of token `id` as the vocabulary stores it (GPT-2 byte characters, `▁` for
    /// spaces in SentencePiece), if `id` is in the vocabulary.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.texts.get(id as usize).map(String::as_str)
    }

    /// The id of the token whose text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }

    /// Whether `id` is a control token (rendered only when special tokens are shown).
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attrs.get(id as usize).is_some_and(|a| a & attr::CONTROL != 0)
    }
}

/// `llama_token_to_piece(id, special = true)` for token `i`.
fn piece(vocab: &Vocab, i: usize, unescape: bool, out: &mut Vec<u8>) {
    let a = vocab.attrs[i];
    let text = &vocab.texts[i];
    if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
        out.extend_from_slice(text.as_bytes());
    } else if a & attr::NORMAL != 0 {
        if unescape {
            out.extend_from_slice(text.replace('\u{2581}', " ").as_bytes());
        } else {
            decode_byte_chars(text, out);
        }
    } else if a & attr::BYTE != 0 {
        // "<0xXX>"; llama.cpp's strtol reads what hex digits there are.
        let hex = text.get(3..5).unwrap_or("");
        let digits: String = hex.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        out.push(u8::from_str_radix(&digits, 16).unwrap_or(0));
    }
    // Unused and undefined tokens render as nothing.
}

/// GPT-2 byte characters back to bytes (llama.cpp's `llama_decode_text`, its marker for a
/// character outside the map included).
fn decode_byte_chars(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        match unicode::char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
}
