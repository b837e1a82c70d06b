//! A model's hyperparameters, read from a GGUF file's `{arch}.*` metadata keys.

use crate::arch::Architecture;
pub use crate::arch::RopeStyle;
use crate::shard::{Shard, RANK_KEY, WORLD_KEY};
use crate::{Error, Result};
use rayo::gguf::Metadata;

/// The largest value a count or width of the metadata may have: the GPU kernels take sizes as
/// `u32`, and no real model comes near it.
pub const MAX_DIM: usize = u32::MAX as usize;

/// A llama-family model's shape and constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The block's declaration, by `general.architecture`.
    pub arch: &'static Architecture,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Width of the feed-forward hidden layer.
    pub n_ff: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention: `n_head / n_head_kv` query heads share one).
    pub n_head_kv: usize,
    /// Values per head.
    pub head_dim: usize,
    /// Values per head that RoPE rotates (`rope.dimension_count`, at most `head_dim`).
    pub n_rot: usize,
    /// RoPE's frequency base.
    pub rope_base: f32,
    /// RMSNorm's epsilon.
    pub eps: f32,
    /// The context length the model was trained for (the most positions a session holds).
    pub context_length: usize,
    /// Tokens in the vocabulary (rows of the embedding table).
    pub vocab_size: usize,
    /// RoPE's linear scaling of positions on the global layers (`rope.scaling.type` `linear`:
    /// 1 / `rope.scaling.factor`); 1 without scaling.
    pub rope_scale: f32,
    /// Sliding-window attention on the local layers, for an architecture that declares it and a
    /// file that gives `attention.sliding_window`.
    pub sliding_window: Option<SlidingWindow>,
    /// RoPE's per-pair frequency divisors (`rope_freqs.weight`, `n_rot / 2` values: Llama 3's
    /// scaling), read by [`crate::Model`] from the file's tensor; `None` without it. A session's
    /// configuration holds LongRoPE's divisors for its context here ([`LongRope`]).
    pub rope_freqs: Option<Vec<f32>>,
    /// LongRoPE (Phi-3's long-context models), read by [`crate::Model`]: `None` without it.
    pub long_rope: Option<LongRope>,
    /// RoPE's cos and sin multiplied by this (`rope.scaling.attn_factor`: LongRoPE's scaling of
    /// attention; 1 without), as ggml's rope multiplies them by its `attn_factor`.
    pub rope_attn_factor: f32,
    /// The tensor-parallel rank this file holds ([`crate::shard`]: its `rayo.tensor_parallel.*`
    /// keys), else [`Shard::ALONE`]. Its widths (`n_head`, `n_head_kv`, `n_ff`) are the
    /// rank's; `vocab_size` is the whole vocabulary, of which the output head holds
    /// [`Shard::part`].
    pub shard: Shard,
}

/// LongRoPE's two sets of per-pair divisors (`rope_factors_long.weight`,
/// `rope_factors_short.weight`, `n_rot / 2` values each): a session whose context (positions
/// per sequence) is past `original_context` (`rope.scaling.original_context_length`, else the
/// trained context) divides by the long ones, any other by the short ones, as llama.cpp
/// chooses (`get_rope_factors`; a file's `rope_freqs.weight` comes first).
#[derive(Clone, Debug, PartialEq)]
pub struct LongRope {
    pub long: Vec<f32>,
    pub short: Vec<f32>,
    pub original_context: usize,
}

impl LongRope {
    /// The divisors a session of `context` positions per sequence uses.
    pub fn for_context(&self, context: usize) -> &[f32] {
        if context > self.original_context {
            &self.long
        } else {
            &self.short
        }
    }
}

/// Sliding-window attention ([`crate::arch::Architecture::swa_pattern`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SlidingWindow {
    /// Positions a query of a local layer sees, its own included (`attention.sliding_window`):
    /// position `p` sees `p + 1 − window ..= p`.
    pub window: usize,
    /// Layer `i` is local unless `i % pattern == pattern − 1`.
    pub pattern: usize,
    /// RoPE's base on the local layers (`rope.freq_base_swa`; their positions are not scaled).
    pub rope_base: f32,
}

impl Config {
    /// Reads the configuration from `meta`; `vocab_rows` is the number of rows of
    /// `token_embd.weight` (used when `{arch}.vocab_size` is absent). Errors name the key.
    pub fn from_gguf(meta: &Metadata, vocab_rows: usize) -> Result<Config> {
        let arch = meta
            .get("general.architecture")
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::Metadata { key: "general.architecture".into(), problem: "is missing or not a string".into() })?
            .to_string();
        let arch = crate::arch::find(&arch)?;
        let key = |k: &str| format!("{}.{k}", arch.name);
        let int = |k: &str| -> Result<Option<usize>> {
            match meta.get(&key(k)) {
                None => Ok(None),
                Some(v) => v
                    .to_u64()
                    .and_then(|v| usize::try_from(v).ok())
                    .filter(|&v| v > 0 && v <= MAX_DIM)
                    .map(Some)
                    .ok_or_else(|| Error::Metadata { key: key(k), problem: format!("is {v:?}, expected an integer from 1 to {MAX_DIM}") }),
            }
        };
        let need = |k: &str| int(k)?.ok_or_else(|| Error::Metadata { key: key(k), problem: "is missing".into() });
        let float = |k: &str, default: f32| -> Result<f32> {
            match meta.get(&key(k)) {
                None => Ok(default),
                Some(v) => v
                    .to_f64()
                    .map(|v| v as f32)
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .ok_or_else(|| Error::Metadata { key: key(k), problem: format!("is {v:?}, expected a positive number") }),
            }
        };
        let n_embd = need("embedding_length")?;
        let n_head = need("attention.head_count")?;
        let n_head_kv = int("attention.head_count_kv")?.unwrap_or(n_head);
        if n_head % n_head_kv != 0 {
            return Err(Error::hyper(format!("{n_head} query heads cannot share {n_head_kv} key/value heads evenly")));
        }
        let head_dim = match int("attention.key_length")? {
            Some(d) => d,
            None if n_embd % n_head == 0 => n_embd / n_head,
            None => return Err(Error::hyper(format!("embedding length {n_embd} is not a multiple of {n_head} heads"))),
        };
        if let Some(v) = int("attention.value_length")? {
            if v != head_dim {
                return Err(Error::hyper(format!("value length {v} differs from key length {head_dim} (not supported)")));
            }
        }
        let n_rot = int("rope.dimension_count")?.unwrap_or(head_dim);
        let rope_scale = match meta.get(&key("rope.scaling.type")).map(|v| v.as_str()) {
            None | Some(Some("none")) => 1.0,
            Some(Some("linear")) => 1.0 / float("rope.scaling.factor", 1.0)?,
            Some(t) => {
                let what = t.map_or_else(|| "not a string".to_string(), |t| format!("`{t}`"));
                return Err(Error::hyper(format!("{} is {what}: only `none` and `linear` are supported", key("rope.scaling.type"))));
            }
        };
        let sliding_window = match (arch.swa_pattern, int("attention.sliding_window")?) {
            (Some(default), Some(window)) => Some(SlidingWindow {
                window,
                pattern: int("attention.sliding_window_pattern")?.unwrap_or(default),
                rope_base: float("rope.freq_base_swa", 10_000.0)?,
            }),
            _ => None,
        };
        if let Some(v) = meta.get(&key("final_logit_softcapping")) {
            if v.to_f64() != Some(0.0) {
                return Err(Error::hyper(format!("{} is {v:?}: soft-capped logits are not supported", key("final_logit_softcapping"))));
            }
        }
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(Error::hyper(format!("rope dimension count {n_rot} must be even and at most the head size {head_dim}")));
        }
        let rope_attn_factor = float("rope.scaling.attn_factor", 1.0)?;
        if !(rope_attn_factor.is_finite() && rope_attn_factor > 0.0) {
            return Err(Error::Metadata {
                key: key("rope.scaling.attn_factor"),
                problem: format!("is {rope_attn_factor}, expected a finite positive value"),
            });
        }
        let cfg = Config {
            n_layer: need("block_count")?,
            n_embd,
            n_ff: need("feed_forward_length")?,
            n_head,
            n_head_kv,
            head_dim,
            n_rot,
            rope_base: float("rope.freq_base", 10_000.0)?,
            eps: float("attention.layer_norm_rms_epsilon", 1e-5)?,
            context_length: need("context_length")?,
            vocab_size: int("vocab_size")?.unwrap_or(vocab_rows),
            rope_scale,
            sliding_window,
            rope_freqs: None,
            long_rope: None,
            rope_attn_factor,
            shard: shard_of(meta)?,
            arch,
        };
        // llama.cpp scales Gemma 3 27B's queries by 1/√(n_embd/n_head), not 1/√head_dim.
        if arch.name == "gemma3" && cfg.n_layer == 62 {
            return Err(Error::hyper("Gemma 3 27B (62 layers) scales its queries by 1/√(n_embd/n_head), which this engine does not do yet"));
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks what [`Config::from_gguf`] checks, for a configuration made by hand: every count
    /// from 1 to [`MAX_DIM`], whole groups of query heads, an even `n_rot` at most `head_dim`, and
    /// every size computed from the counts (the widths, each weight matrix's values, a row of
    /// each as f32 bytes) within `usize`. Errors name the metadata keys and their values.
    pub fn validate(&self) -> Result<()> {
        let key = |k: &str| format!("{}.{k}", self.arch.name);
        let counts = [
            ("block_count", self.n_layer),
            ("embedding_length", self.n_embd),
            ("feed_forward_length", self.n_ff),
            ("attention.head_count", self.n_head),
            ("attention.head_count_kv", self.n_head_kv),
            ("attention.key_length", self.head_dim),
            ("context_length", self.context_length),
            ("vocab_size", self.vocab_size),
        ];
        for (k, v) in counts {
            if v == 0 || v > MAX_DIM {
                return Err(Error::Metadata { key: key(k), problem: format!("is {v}, expected from 1 to {MAX_DIM}") });
            }
        }
        if self.n_head % self.n_head_kv != 0 {
            return Err(Error::hyper(format!("{} query heads cannot share {} key/value heads evenly", self.n_head, self.n_head_kv)));
        }
        if let Some(sw) = &self.sliding_window {
            for (k, v) in [("attention.sliding_window", sw.window), ("attention.sliding_window_pattern", sw.pattern)] {
                if v == 0 {
                    return Err(Error::Metadata { key: key(k), problem: "is 0, expected at least 1".into() });
                }
            }
        }
        if self.n_rot > self.head_dim || self.n_rot % 2 != 0 {
            let (n, h) = (self.n_rot, self.head_dim);
            return Err(Error::hyper(format!("rope dimension count {n} must be even and at most the head size {h}")));
        }
        let (head, kv, hd) = (key("attention.head_count"), key("attention.head_count_kv"), key("attention.key_length"));
        let q = product(&[(&head, self.n_head), (&hd, self.head_dim)])?;
        let kvw = product(&[(&kv, self.n_head_kv), (&hd, self.head_dim)])?;
        for w in [q, kvw] {
            if w > MAX_DIM {
                return Err(Error::hyper(format!(
                    "{head} {} (or {kv} {}) × {hd} {} = {w} is past {MAX_DIM}",
                    self.n_head, self.n_head_kv, self.head_dim
                )));
            }
        }
        // Each weight matrix's f32 bytes (what a dequantized row or a backend's copy may take).
        let (embd, ff, vocab) = (key("embedding_length"), key("feed_forward_length"), key("vocab_size"));
        let q_name = format!("{head} × {hd}");
        let f32_bytes = ("bytes per f32", 4);
        product(&[(&vocab, self.vocab_size), (&embd, self.n_embd), f32_bytes])?;
        product(&[(&q_name, q), (&embd, self.n_embd), f32_bytes])?;
        product(&[(&ff, self.n_ff), (&embd, self.n_embd), f32_bytes])?;
        Ok(())
    }

    /// The window of `layer`'s attention when it is a local layer, else `None` (the whole
    /// prefix).
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.sliding_window.as_ref().filter(|s| layer % s.pattern != s.pattern - 1).map(|s| s.window)
    }

    /// RoPE's base and position scale on `layer`.
    pub fn rope_of(&self, layer: usize) -> (f32, f32) {
        match &self.sliding_window {
            Some(s) if self.window(layer).is_some() => (s.rope_base, 1.0),
            _ => (self.rope_base, self.rope_scale),
        }
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.n_head / self.n_head_kv.max(1)
    }

    /// Width of the queries (`n_head · head_dim`).
    /// ([`Config::validate`] checked that it fits; an unchecked configuration saturates.)
    pub fn q_width(&self) -> usize {
        self.n_head.saturating_mul(self.head_dim)
    }

    /// Width of the keys and of the values (`n_head_kv · head_dim`).
    /// ([`Config::validate`] checked that it fits; an unchecked configuration saturates.)
    pub fn kv_width(&self) -> usize {
        self.n_head_kv.saturating_mul(self.head_dim)
    }
}

/// The tensor-parallel rank a file's metadata names ([`RANK_KEY`] and [`WORLD_KEY`], both or
/// neither), else [`Shard::ALONE`].
fn shard_of(meta: &Metadata) -> Result<Shard> {
    let int = |key: &str| -> Result<Option<usize>> {
        meta.get(key)
            .map(|v| {
                v.to_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n <= MAX_DIM)
                    .ok_or_else(|| Error::Metadata { key: key.into(), problem: format!("is {v:?}, expected an integer from 0 to {MAX_DIM}") })
            })
            .transpose()
    };
    match (int(RANK_KEY)?, int(WORLD_KEY)?) {
        (None, None) => Ok(Shard::ALONE),
        (Some(rank), Some(world)) => Shard::new(rank, world),
        (None, Some(_)) => {
            Err(Error::Metadata { key: RANK_KEY.into(), problem: format!("is missing (the file has {WORLD_KEY}: a rank's file names both)") })
        }
        (Some(_), None) => {
            Err(Error::Metadata { key: WORLD_KEY.into(), problem: format!("is missing (the file has {RANK_KEY}: a rank's file names both)") })
        }
    }
}

/// The product of `factors` (each named, for the error), or an [`Error::Hyperparameters`] naming them all
/// when it does not fit in `usize`.
pub fn product(factors: &[(&str, usize)]) -> Result<usize> {
    factors.iter().try_fold(1usize, |acc, &(_, v)| acc.checked_mul(v)).ok_or_else(|| {
        let terms: Vec<String> = factors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        Error::hyper(format!("{} overflows the {}-bit size type", terms.join(" × "), usize::BITS))
    })
}
