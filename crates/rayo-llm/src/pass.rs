//! The forward pass, written once over [`Backend`]: a model's weights as a backend holds them,
//! the activation buffers of a step, and the walk over the block its architecture declares
//! ([`crate::arch`]). A step's rows may belong to several sequences ([`Segment`]s, each with
//! its own KV cache and position): the products run over all rows at once (the weights are read
//! once per step), attention per sequence. [`crate::Session`] runs one sequence,
//! [`crate::batch::BatchSession`] many.

use crate::arch::Activation;
use crate::backend::Backend;
use crate::config::{product, Config};
use crate::model::Model;
use crate::weights::WeightRef;
use crate::{Error, Result};

pub(crate) struct Layer<B: Backend> {
    attn_norm: B::Vector,
    wq: B::Weight,
    wk: B::Weight,
    wv: B::Weight,
    bias: Option<[B::Vector; 3]>,
    qk_norm: Option<[B::Vector; 2]>,
    wo: B::Weight,
    ffn_norm: B::Vector,
    gate: B::Weight,
    up: B::Weight,
    down: B::Weight,
    /// After attention, after the MLP.
    post_norms: Option<[B::Vector; 2]>,
}

/// A model's weights as a backend holds them.
pub(crate) struct Weights<B: Backend> {
    token_embd: B::Weight,
    layers: Vec<Layer<B>>,
    output_norm: B::Vector,
    output: B::Weight,
}

impl<B: Backend> Weights<B> {
    /// Makes every tensor of `model` usable by `backend`.
    pub(crate) fn upload(model: &Model, backend: &mut B) -> Result<Weights<B>> {
        let file = model.file();
        let w = model.weights();
        let token_embd = backend.weight(file, &w.token_embd)?;
        let output = backend.weight(file, &w.output)?;
        let mut layers = Vec::with_capacity(w.layers.len());
        for l in &w.layers {
            let mut weight = |r: &WeightRef| backend.weight(file, r);
            let (wq, wk, wv, wo) = (weight(&l.wq)?, weight(&l.wk)?, weight(&l.wv)?, weight(&l.wo)?);
            let (gate, up, down) = (weight(&l.gate)?, weight(&l.up)?, weight(&l.down)?);
            let bias = match &l.bias {
                Some([a, b, c]) => Some([backend.vector(a)?, backend.vector(b)?, backend.vector(c)?]),
                None => None,
            };
            let qk_norm = match &l.qk_norm {
                Some([q, k]) => Some([backend.vector(q)?, backend.vector(k)?]),
                None => None,
            };
            let post_norms = match &l.post_norms {
                Some([a, f]) => Some([backend.vector(a)?, backend.vector(f)?]),
                None => None,
            };
            layers.push(Layer {
                attn_norm: backend.vector(&l.attn_norm)?,
                wq,
                wk,
                wv,
                bias,
                qk_norm,
                wo,
                ffn_norm: backend.vector(&l.ffn_norm)?,
                gate,
                up,
                down,
                post_norms,
            });
        }
        let output_norm = backend.vector(&w.output_norm)?;
        Ok(Weights { token_embd, layers, output_norm, output })
    }
}

/// The per-sequence buffers of a step whose rows hold several sequences: a sequence whose rows
/// do not start at row 0 is copied here for its attention.
pub(crate) struct SegmentBufs<B: Backend> {
    q: B::Buf,
    k: B::Buf,
    v: B::Buf,
    att: B::Buf,
}

/// Activation buffers, each with room for `rows` rows.
pub(crate) struct Buffers<B: Backend> {
    x: B::Buf,
    xn: B::Buf,
    q: B::Buf,
    k: B::Buf,
    v: B::Buf,
    /// The queries and keys after their per-head norm, for an architecture with QK-norm.
    qk_normed: Option<(B::Buf, B::Buf)>,
    att: B::Buf,
    gate: B::Buf,
    up: B::Buf,
    /// A sublayer's normed output, for an architecture with post-norms.
    post: Option<B::Buf>,
    /// For steps of several sequences, else `None`.
    segment: Option<SegmentBufs<B>>,
    /// The final norm of up to `logit_rows` rows, and their logits.
    last: B::Buf,
    pub(crate) logits: B::Buf,
    /// A tensor-parallel rank's logits of its vocabulary rows, before they are gathered into
    /// `logits` (`None` alone).
    head_part: Option<B::Buf>,
}

impl<B: Backend> Buffers<B> {
    /// Buffers for steps of up to `rows` rows, logits for up to `logit_rows` of them at once,
    /// and room to copy a sequence out when `segments`. Errors: a size past `usize`.
    pub(crate) fn new(backend: &mut B, cfg: &Config, rows: usize, logit_rows: usize, segments: bool) -> Result<Buffers<B>> {
        let (d, qw, kvw, ff) = (cfg.n_embd, cfg.q_width(), cfg.kv_width(), cfg.n_ff);
        // Every size below, in f32 bytes, known to fit before anything is allocated.
        let widest = d.max(qw).max(ff);
        product(&[("batch", rows), ("widest activation row", widest), ("bytes per f32", 4)])?;
        product(&[("logit rows", logit_rows), ("vocab_size", cfg.vocab_size), ("bytes per f32", 4)])?;
        let mut buf = |n: usize| backend.buffer(rows * n);
        Ok(Buffers {
            x: buf(d)?,
            xn: buf(d.max(qw))?,
            q: buf(qw)?,
            k: buf(kvw)?,
            v: buf(kvw)?,
            qk_normed: match cfg.arch.qk_norm {
                true => Some((buf(qw)?, buf(kvw)?)),
                false => None,
            },
            att: buf(qw)?,
            gate: buf(ff)?,
            up: buf(ff)?,
            post: match cfg.arch.post_norms {
                true => Some(buf(d)?),
                false => None,
            },
            segment: match segments {
                true => Some(SegmentBufs { q: buf(qw)?, k: buf(kvw)?, v: buf(kvw)?, att: buf(qw)? }),
                false => None,
            },
            // (rows past `logit_rows` to a multiple of 128: a device's GEMM takes padded inputs)
            last: backend.buffer(if logit_rows > 1 { logit_rows.next_multiple_of(128) } else { 1 } * d.max(qw))?,
            logits: backend.buffer(logit_rows * cfg.vocab_size)?,
            head_part: match cfg.shard.is_alone() {
                true => None,
                false => Some(backend.buffer(logit_rows * cfg.shard.part(cfg.vocab_size).len())?),
            },
        })
    }
}

/// Rows of a step that belong to one sequence: the next `rows` rows run at positions
/// `pos0..pos0 + rows` of KV cache `kv`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub kv: usize,
    pub pos0: usize,
    pub rows: usize,
}

/// `tokens` through every layer (the block `c.arch` declares), their rows cut into `segments`
/// in order (`kvs[s.kv]` holds segment `s`'s cache); leaves the final hidden states in `f.x`.
pub(crate) fn layers_pass<B: Backend>(
    b: &mut B,
    c: &Config,
    w: &Weights<B>,
    kvs: &mut [B::Kv],
    f: &mut Buffers<B>,
    tokens: &[u32],
    segments: &[Segment],
) -> Result<()> {
    let m = tokens.len();
    if segments.iter().map(|s| s.rows).sum::<usize>() != m {
        return Err(Error::Batch(format!("segments of {} rows for {m} tokens", segments.iter().map(|s| s.rows).sum::<usize>())));
    }
    let (qw, kvw) = (c.q_width(), c.kv_width());
    // the leading one-row segments are decoding sequences' tokens (BatchSession puts them first)
    let ones = segments.iter().take_while(|s| s.rows == 1).count();
    b.one_token_rows(ones);
    // their caches and positions
    let one_rows: Vec<(usize, usize)> = segments[..ones].iter().map(|s| (s.kv, s.pos0)).collect();
    let Buffers { x, xn, q, k, v, qk_normed, att, gate, up, post, segment, .. } = f;
    // each token's row of the table (a tensor-parallel rank's: its own rows, the zero row for
    // the others' tokens, then added over the ranks)
    let rows: Vec<u32> = tokens.iter().map(|&t| crate::shard::embedding_row(c.shard, c.vocab_size, t)).collect::<Result<_>>()?;
    b.embed(&w.token_embd, &rows, x)?;
    if !c.shard.is_alone() {
        b.all_reduce(x, m * c.n_embd)?;
    }
    if c.arch.embed_scale {
        // as llama.cpp: √n_embd in f32
        b.scale(x, (c.n_embd as f32).sqrt(), m * c.n_embd)?;
    }
    for (i, l) in w.layers.iter().enumerate() {
        let biases: Vec<&B::Vector> = l.bias.iter().flatten().collect();
        b.norm_matmuls_bias(x, &l.attn_norm, c.eps, m, &[&l.wq, &l.wk, &l.wv], &biases, xn, &mut [&mut *q, &mut *k, &mut *v])?;
        // QK-norm: a step of one sequence hands it to the backend with the attention (which
        // may fuse the two); a step of several normalizes every row first
        let one_sequence = segments.len() == 1;
        let (q, k, mut norm_inside) = match (&l.qk_norm, qk_normed.as_mut()) {
            (Some([nq, nk]), Some((qn, kn))) if one_sequence => (&mut *q, &mut *k, Some(((nq, nk), (qn, kn)))),
            (Some([nq, nk]), Some((qn, kn))) => {
                // each head is a row of `head_dim` values
                b.rms_norm(q, nq, c.eps, m * c.n_head, qn)?;
                b.rms_norm(k, nk, c.eps, m * c.n_head_kv, kn)?;
                (qn, kn, None)
            }
            _ => (&mut *q, &mut *k, None),
        };
        // the leading one-token rows in one op, where the backend has it (else one by one)
        let batched = ones > 1 && b.rope_attention_one_token_rows(c, i, (&mut *kvs, &one_rows), (&mut *q, &mut *k, &*v), att)?;
        let skip = if batched { ones } else { 0 };
        let mut r0 = skip;
        for s in &segments[skip..] {
            let n = kvs.len();
            let kv = kvs.get_mut(s.kv).ok_or_else(|| Error::Batch(format!("KV cache {} of {n}", s.kv)))?;
            if let Some((norms, (qn, kn))) = &mut norm_inside {
                b.qk_norm_rope_attention(c, kv, i, (&*q, &*k, &*v), *norms, (&mut **qn, &mut **kn), (s.rows, s.pos0), att)?;
            } else if r0 == 0 {
                b.rope_attention(c, kv, i, (&mut *q, &mut *k, &*v), s.rows, s.pos0, att)?;
            } else {
                let t = segment.as_mut().ok_or_else(|| Error::Batch("a second sequence in a one-sequence step".into()))?;
                b.copy_rows(q, r0, &mut t.q, 0, s.rows, qw)?;
                b.copy_rows(k, r0, &mut t.k, 0, s.rows, kvw)?;
                b.copy_rows(v, r0, &mut t.v, 0, s.rows, kvw)?;
                b.rope_attention(c, kv, i, (&mut t.q, &mut t.k, &t.v), s.rows, s.pos0, &mut t.att)?;
                b.copy_rows(&t.att, 0, att, r0, s.rows, qw)?;
            }
            r0 += s.rows;
        }
        let d = m * c.n_embd;
        // a tensor-parallel rank's output and down projections are partial sums (of its heads,
        // of its part of the MLP): the ranks add them up before the residual takes them
        let split = !c.shard.is_alone();
        match (&l.post_norms, &mut *post) {
            (Some([after_attention, after_ffn]), Some(post)) => {
                b.matmul(&l.wo, att, m, xn)?;
                if split {
                    b.all_reduce(xn, d)?;
                }
                b.norm_add(x, xn, after_attention, c.eps, m, post, d)?;
                mlp(b, c, l, x, m, xn, gate, up)?;
                b.matmul(&l.down, gate, m, xn)?;
                if split {
                    b.all_reduce(xn, d)?;
                }
                b.norm_add(x, xn, after_ffn, c.eps, m, post, d)?;
            }
            _ if split => {
                b.matmul(&l.wo, att, m, xn)?;
                b.all_reduce(xn, d)?;
                b.add(x, xn, d)?;
                mlp(b, c, l, x, m, xn, gate, up)?;
                b.matmul(&l.down, gate, m, xn)?;
                b.all_reduce(xn, d)?;
                b.add(x, xn, d)?;
            }
            _ => {
                b.matmul_add(&l.wo, att, m, xn, x, d)?;
                mlp(b, c, l, x, m, xn, gate, up)?;
                b.matmul_add(&l.down, gate, m, xn, x, d)?;
            }
        }
    }
    Ok(())
}

/// `gate = act(rms_norm(x)·Wgate) · (rms_norm(x)·Wup)` for `m` rows, with the architecture's
/// activation (`xn` and `up` as scratch).
#[allow(clippy::too_many_arguments)]
fn mlp<B: Backend>(b: &mut B, c: &Config, l: &Layer<B>, x: &B::Buf, m: usize, xn: &mut B::Buf, gate: &mut B::Buf, up: &mut B::Buf) -> Result<()> {
    let len = m * c.n_ff;
    match c.arch.ffn {
        Activation::Silu => b.norm_swiglu(x, &l.ffn_norm, c.eps, m, (&l.gate, &l.up), xn, gate, up, len),
        Activation::GeluTanh => b.norm_geglu(x, &l.ffn_norm, c.eps, m, (&l.gate, &l.up), xn, gate, up, len),
    }
}

/// The logits of rows `rows` of `f.x` into `f.logits` (one row of `vocab` values each, in
/// order; at most the buffers' `logit_rows`). `Alone::Each`: every row's logits are the bits it
/// gets alone (as a one-sequence session computes them: what batch invariance needs);
/// `Alone::No`: the rows as one batched product (the output head read once per tile of rows, as
/// a prompt's products: what scoring many positions needs).
pub(crate) fn logits_pass<B: Backend>(b: &mut B, c: &Config, w: &Weights<B>, f: &mut Buffers<B>, rows: &[usize], alone: Alone) -> Result<()> {
    let n = rows.len();
    b.one_token_rows(match alone {
        Alone::Each => n,
        Alone::No => 0,
    });
    let Buffers { x, xn, last, logits, head_part, .. } = f;
    // a tensor-parallel rank's logits of its vocabulary rows first, then every rank's gathered
    let out = head_part.as_mut().unwrap_or(&mut *logits);
    if rows.iter().enumerate().all(|(i, &r)| i == r) {
        // rows 0..n (a step of one-token rows): in place
        b.norm_matmuls(x, &w.output_norm, c.eps, n, &[&w.output], last, &mut [out])?;
    } else {
        // gathered into `xn` (rows of `n_embd`), then normed into `last`
        for (i, &r) in rows.iter().enumerate() {
            b.copy_rows(x, r, xn, i, 1, c.n_embd)?;
        }
        b.norm_matmuls(xn, &w.output_norm, c.eps, n, &[&w.output], last, &mut [out])?;
    }
    match head_part {
        Some(part) => b.all_gather_rows(part, n, c.vocab_size, logits),
        None => Ok(()),
    }
}

/// How [`logits_pass`] computes several rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alone {
    /// Each row's logits the bits it gets alone.
    Each,
    /// One batched product.
    No,
}
