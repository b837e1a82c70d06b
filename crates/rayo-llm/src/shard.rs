//! Tensor parallelism's split of a model, as Megatron-LM cuts a transformer block: each of
//! `world` ranks holds a `1/world` part of every layer's products, and a step's activations are
//! whole again on every rank after two all-reduces per layer
//! ([`crate::Backend::all_reduce`]).
//! - Column-parallel (output rows cut): Q, K and V by whole heads (so the KV cache is cut by
//!   heads with them), their biases, the MLP's gate and up.
//! - Row-parallel (input columns cut): the attention's output projection and the MLP's down
//!   projection. Each rank's product is a partial sum; the all-reduce adds them before the
//!   residual add.
//! - The output head by vocabulary rows: each rank's logits, gathered
//!   ([`crate::Backend::all_gather_rows`]).
//! - The embedding table by vocabulary rows, and one row of zeros after them: a rank looks up
//!   the tokens in its rows and the zero row for every other token, and the all-reduce adds
//!   the ranks' rows ([`embedding_row`]).
//! - Whole on every rank: the norms, the per-head QK-norms and RoPE's divisors.
//!
//! A rank's part is itself a GGUF file, made in memory ([`split`]): its metadata names the
//! rank's heads and MLP width, and [`RANK_KEY`] / [`WORLD_KEY`]. Every backend loads a rank as
//! it loads any model; only the all-reduce and the gather know of the other ranks.

use crate::config::Config;
use crate::model::Model;
use crate::{Error, Result};
use rayo::gguf::{GgufFile, GgufWriter, TensorInfo};
use std::ops::Range;

/// Metadata key of a rank's file: its rank.
pub const RANK_KEY: &str = "rayo.tensor_parallel.rank";
/// Metadata key of a rank's file: how many ranks the model is split over.
pub const WORLD_KEY: &str = "rayo.tensor_parallel.world";

/// One rank of a tensor-parallel world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub rank: usize,
    pub world: usize,
}

impl Shard {
    /// A whole model: rank 0 of 1.
    pub const ALONE: Shard = Shard { rank: 0, world: 1 };

    /// Rank `rank` of `world`: an error unless `rank < world`.
    pub fn new(rank: usize, world: usize) -> Result<Shard> {
        if rank >= world {
            return Err(Error::hyper(format!("tensor-parallel rank {rank} is not below the world size {world}")));
        }
        Ok(Shard { rank, world })
    }

    /// Whether this is the whole model.
    pub fn is_alone(&self) -> bool {
        self.world == 1
    }

    /// This rank's part of `n` things cut into `world` runs, in rank order, as even as they go
    /// (each `⌊n/world⌋` or one more long).
    pub fn part(&self, n: usize) -> Range<usize> {
        let at = |r: usize| (n as u128 * r as u128 / self.world as u128) as usize;
        at(self.rank)..at(self.rank + 1)
    }
}

/// How one tensor is cut.
#[derive(Debug, PartialEq)]
enum Cut {
    /// Whole on every rank.
    Whole,
    /// The rows (of a vector: its values) in runs of these lengths, each run cut as
    /// [`Shard::part`] cuts: a rank holds its part of every run, in order (a fused tensor's
    /// runs are its Q, K, V or gate, up rows).
    Rows(Vec<usize>),
    /// The columns (every row's values) cut as [`Shard::part`] cuts.
    Cols,
}

/// The embedding table's name.
const EMBEDDING: &str = "token_embd.weight";

/// The rows of a rank's embedding table: its part of the vocabulary, and the zero row.
pub fn embedding_rows(shard: Shard, vocab: usize) -> usize {
    match shard.is_alone() {
        true => vocab,
        false => shard.part(vocab).len() + 1,
    }
}

/// The row of `shard`'s embedding table that token `id` (of a vocabulary of `vocab`) reads:
/// its own row where the rank holds it, else the zero row after them (alone: `id`). A token
/// past the vocabulary is an error naming both.
pub fn embedding_row(shard: Shard, vocab: usize, id: u32) -> Result<u32> {
    if id as usize >= vocab {
        return Err(Error::TokenPastVocab { id, vocab });
    }
    Ok(row_of_id(shard, vocab, id))
}

/// [`embedding_row`] of an id already checked to be below `vocab`.
pub(crate) fn row_of_id(shard: Shard, vocab: usize, id: u32) -> u32 {
    if shard.is_alone() {
        return id;
    }
    let part = shard.part(vocab);
    let row = if part.contains(&(id as usize)) { id as usize - part.start } else { part.len() };
    row as u32
}

/// How tensor `name` of a model of `cfg` is cut (the names [`crate::weights::Weights`] reads).
fn cut_of(name: &str, cfg: &Config) -> Cut {
    let (q, kv, ff) = (cfg.q_width(), cfg.kv_width(), cfg.n_ff);
    let Some((_, tensor)) = name.strip_prefix("blk.").and_then(|rest| rest.split_once('.')) else {
        return match name {
            "output.weight" | EMBEDDING => Cut::Rows(vec![cfg.vocab_size]),
            _ => Cut::Whole,
        };
    };
    match tensor {
        "attn_q.weight" | "attn_q.bias" => Cut::Rows(vec![q]),
        "attn_k.weight" | "attn_k.bias" | "attn_v.weight" | "attn_v.bias" => Cut::Rows(vec![kv]),
        "attn_qkv.weight" => Cut::Rows(vec![q, kv, kv]),
        "ffn_gate.weight" => Cut::Rows(vec![ff]),
        // an architecture with fused projections holds gate and up in one `ffn_up`
        "ffn_up.weight" if cfg.arch.fused => Cut::Rows(vec![ff, ff]),
        "ffn_up.weight" => Cut::Rows(vec![ff]),
        "attn_output.weight" | "ffn_down.weight" => Cut::Cols,
        _ => Cut::Whole,
    }
}

/// Checks that `world` ranks can split a model of `cfg`: whole heads of queries and of keys
/// and values, an MLP width and a vocabulary that divide, a model not already split.
pub fn check(cfg: &Config, world: usize) -> Result<()> {
    if world == 0 {
        return Err(Error::hyper("a tensor-parallel world of 0 ranks"));
    }
    if !cfg.shard.is_alone() {
        let s = cfg.shard;
        return Err(Error::hyper(format!("the model is already rank {} of {}: split the whole model", s.rank, s.world)));
    }
    for (what, n) in [("query heads", cfg.n_head), ("key/value heads", cfg.n_head_kv), ("MLP width (feed_forward_length)", cfg.n_ff)] {
        if n % world != 0 {
            let fits: Vec<String> = (1..=n.min(64)).filter(|w| n % w == 0).map(|w| w.to_string()).collect();
            return Err(Error::hyper(format!(
                "{world} tensor-parallel ranks cannot split the {n} {what} evenly (worlds that can: {})",
                fits.join(", ")
            )));
        }
    }
    if cfg.vocab_size < world {
        return Err(Error::hyper(format!("{world} tensor-parallel ranks cannot split a vocabulary of {} tokens", cfg.vocab_size)));
    }
    Ok(())
}

/// Errors unless a model of `cfg` is the rank `runs` that backend `name` runs: a rank's part on
/// a backend alone or of another rank, or a whole model on a rank of several.
pub(crate) fn check_rank(cfg: &Config, runs: Shard, name: &str) -> Result<()> {
    let has = cfg.shard;
    if has == runs {
        return Ok(());
    }
    let what = |s: Shard| if s.is_alone() { "a whole model".to_string() } else { format!("rank {} of {}", s.rank, s.world) };
    Err(Error::hyper(format!(
        "the model is {}, but the {name} backend runs {}{}",
        what(has),
        what(runs),
        if has.is_alone() { " (split the model for it: rayo_llm::shard::split)" } else { "" }
    )))
}

/// Rank `shard.rank`'s part of `model` (see the module's documentation), as a model of its
/// own. Errors, naming the numbers: a world that cannot split the model ([`check`]), a cut
/// through a quantization block (a row-parallel matrix's columns per rank must be whole
/// blocks: 256 values for K-quants).
pub fn split(model: &Model, shard: Shard) -> Result<Model> {
    let cfg = model.config();
    check(cfg, shard.world)?;
    Shard::new(shard.rank, shard.world)?;
    let file = model.file();
    let mut out = GgufWriter::new();
    *out.metadata_mut() = file.metadata().clone();
    let arch = cfg.arch.name;
    let w = shard.world;
    for (key, v) in [
        ("attention.head_count", cfg.n_head / w),
        ("attention.head_count_kv", cfg.n_head_kv / w),
        ("feed_forward_length", cfg.n_ff / w),
        // the head size no longer follows from the width and the rank's heads
        ("attention.key_length", cfg.head_dim),
        ("attention.value_length", cfg.head_dim),
        // nor the vocabulary from the embedding table's rows
        ("vocab_size", cfg.vocab_size),
    ] {
        out.set(format!("{arch}.{key}"), v as u32);
    }
    out.set(RANK_KEY, shard.rank as u32);
    out.set(WORLD_KEY, w as u32);
    for t in file.tensors() {
        let (mut shape, mut bytes) = cut(t, file.tensor_data(t)?, &cut_of(&t.name, cfg), shard)?;
        if t.name == EMBEDDING && !shard.is_alone() {
            // the zero row: every value 0 in any format (a block's scales and values all 0)
            bytes.resize(bytes.len() + t.ty.bytes_for(cfg.n_embd)?, 0);
            shape[1] += 1;
        }
        out.add_tensor(&t.name, t.ty, &shape, bytes)?;
    }
    if file.tensor("output.weight").is_none() {
        // tied embeddings: the rank's head is its rows of the embedding table
        let t = file.tensor("token_embd.weight").ok_or_else(|| Error::tensor("token_embd.weight", "is missing"))?;
        let (shape, bytes) = cut(t, file.tensor_data(t)?, &Cut::Rows(vec![cfg.vocab_size]), shard)?;
        out.add_tensor("output.weight", t.ty, &shape, bytes)?;
    }
    let bytes = out.write_to(Vec::new())?;
    Model::from_file(GgufFile::from_bytes(bytes)?)
}

/// Tensor `t`'s part (its shape and bytes, from its `data`) that `shard` holds.
fn cut(t: &TensorInfo, data: &[u8], how: &Cut, shard: Shard) -> Result<(Vec<u64>, Vec<u8>)> {
    let dims = |v: u64| usize::try_from(v).map_err(|_| Error::tensor(&t.name, format!("has a dimension {v} past usize")));
    let (cols, rows) = match t.shape[..] {
        [c] => (dims(c)?, 1),
        [c, r] => (dims(c)?, dims(r)?),
        _ if *how == Cut::Whole => return Ok((t.shape.clone(), data.to_vec())),
        _ => return Err(Error::tensor(&t.name, format!("has shape {:?}; tensor parallelism cuts only matrices and vectors", t.shape))),
    };
    match how {
        Cut::Whole => Ok((t.shape.clone(), data.to_vec())),
        Cut::Rows(runs) => {
            let len = if t.shape.len() == 1 { cols } else { rows };
            if runs.iter().sum::<usize>() != len {
                return Err(Error::tensor(&t.name, format!("has {len} rows, not the {runs:?} its cut expects")));
            }
            let mut parts = Vec::with_capacity(runs.len());
            let mut at = 0;
            for &run in runs {
                let p = shard.part(run);
                parts.push(at + p.start..at + p.end);
                at += run;
            }
            let kept = parts.iter().map(|p| p.len()).sum::<usize>() as u64;
            if t.shape.len() == 1 {
                Ok((vec![kept], columns(t, data, 1, cols, &parts)?))
            } else {
                let row = t.ty.bytes_for(cols)?;
                Ok((vec![cols as u64, kept], parts.iter().flat_map(|p| &data[p.start * row..p.end * row]).copied().collect()))
            }
        }
        Cut::Cols => {
            let p = shard.part(cols);
            let shape = if t.shape.len() == 1 { vec![p.len() as u64] } else { vec![p.len() as u64, rows as u64] };
            Ok((shape, columns(t, data, rows, cols, std::slice::from_ref(&p))?))
        }
    }
}

/// Columns `parts` (in order) of every one of `rows` rows of `cols` values: each bound must be
/// at a block's start in `t`'s type.
fn columns(t: &TensorInfo, data: &[u8], rows: usize, cols: usize, parts: &[Range<usize>]) -> Result<Vec<u8>> {
    let (ty, block) = (t.ty, t.ty.block_size());
    if let Some(at) = parts.iter().flat_map(|p| [p.start, p.end]).find(|at| at % block != 0) {
        return Err(Error::tensor(
            &t.name,
            format!(
                "holds {} blocks of {block} values: its {cols} columns cut at column {at} split a block (each rank's columns must be whole blocks)",
                ty.name()
            ),
        ));
    }
    let bytes = |n: usize| ty.bytes_for(n).map_err(Error::from);
    let row = bytes(cols)?;
    let mut out = Vec::new();
    for r in 0..rows {
        let line = &data[r * row..(r + 1) * row];
        for p in parts {
            out.extend_from_slice(&line[bytes(p.start)?..bytes(p.end)?]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_every_index_once_in_order() {
        for world in 1..=5 {
            for n in [0, 1, 4, 7, 257] {
                let parts: Vec<Range<usize>> = (0..world).map(|r| Shard { rank: r, world }.part(n)).collect();
                assert_eq!(parts[0].start, 0);
                assert_eq!(parts[world - 1].end, n);
                for p in parts.windows(2) {
                    assert_eq!(p[0].end, p[1].start);
                }
                assert!(parts.iter().all(|p| p.len() == n / world || p.len() == n / world + 1), "{n} over {world}: {parts:?}");
            }
        }
        assert!(Shard::new(2, 2).is_err());
    }

    #[test]
    fn each_token_reads_one_rank_s_row_and_the_others_their_zero_row() {
        for world in 1..=4 {
            for vocab in [1usize, 7, 10] {
                if vocab < world {
                    continue;
                }
                for id in 0..vocab as u32 {
                    let rows: Vec<u32> = (0..world).map(|rank| embedding_row(Shard { rank, world }, vocab, id).unwrap()).collect();
                    let owners: Vec<usize> = (0..world).filter(|&r| Shard { rank: r, world }.part(vocab).contains(&(id as usize))).collect();
                    assert_eq!(owners.len(), 1, "token {id} of {vocab} over {world}");
                    for (rank, &row) in rows.iter().enumerate() {
                        let shard = Shard { rank, world };
                        let zero = embedding_rows(shard, vocab) as u32 - 1;
                        match rank == owners[0] {
                            true => assert_eq!(row as usize, id as usize - shard.part(vocab).start),
                            false => assert_eq!(row, zero, "token {id}, rank {rank} of {world}"),
                        }
                        assert!((row as usize) < embedding_rows(shard, vocab));
                    }
                }
                let e = embedding_row(Shard { rank: 0, world }, vocab, vocab as u32).unwrap_err().to_string();
                assert!(e.contains(&vocab.to_string()), "{e}");
            }
        }
    }
}
