//! The CPU backend: weights used in place from the file's memory map, quantized products
//! from [`rayo::quant`] threaded over weight rows, element-wise ops from [`rayo::slice`].

mod attention;
mod products;
pub(crate) mod rope;
mod weight;
mod workers;

use crate::backend::{Backend, KvType, RowBest};
use crate::collective::Collective;
use crate::config::Config;
use crate::shard::Shard;
use crate::weights::WeightRef;
use crate::{Error, Result};
pub use attention::CpuKv;
use attention::Heads;
use products::Products;
use rayo::gguf::GgufFile;
use rayo::ops::{BinaryOp, UnaryOp};
use rayo::quant::{self, Activations};
use std::sync::Arc;
pub use weight::CpuWeight;
use workers::{Task, Workers};

/// Below this much attention work (query rows × positions × query width) a batch's attention
/// stays on the calling thread.
const ATTENTION_PAR_WORK: usize = 1 << 16;

/// The CPU backend of one model file.
pub struct Cpu {
    file: Arc<GgufFile>,
    workers: Workers,
    act: Activations,
    simd: rayo::Backend,
    scratch: Vec<f32>,
    /// [`Backend::one_token_rows`]: the leading rows of the products that take a row's
    /// one-token arithmetic (`None`: one row alone does, rows of a batch do not).
    one_token: Option<usize>,
    /// The tensor-parallel world this backend runs a rank of ([`Cpu::with_group`]), else `None`.
    group: Option<Box<dyn Collective>>,
}

impl Cpu {
    /// A backend for the weights of `file` on `threads` threads (0 = all cores), activations
    /// quantized to 8 bits as llama.cpp does ([`Activations::Quantized`]).
    pub fn new(file: Arc<GgufFile>, threads: usize) -> Cpu {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        Cpu {
            file,
            workers: Workers::new(threads - 1),
            act: Activations::Quantized,
            simd: rayo::Backend::selected(),
            scratch: Vec::new(),
            one_token: None,
            group: None,
        }
    }

    /// The same running `group`'s rank of a tensor-parallel world: a session on it takes that
    /// rank's part of a model ([`crate::shard::split`]).
    pub fn with_group(mut self, group: Box<dyn Collective>) -> Cpu {
        self.group = Some(group);
        self
    }

    /// The same with the given kind of activations for the quantized products.
    pub fn with_activations(mut self, act: Activations) -> Cpu {
        self.act = act;
        self
    }

    /// The activations and the one-token rows of a product of `m` rows.
    fn kind(&self, m: usize) -> (Activations, usize) {
        (self.act, self.one_token.map_or(usize::from(m == 1), |n| n.min(m)))
    }

    /// The threads the products use.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// A batch's attention with the heads split over the threads (one query row, or a batch
    /// too small to share, on the calling thread).
    #[allow(clippy::too_many_arguments)]
    fn attend(&mut self, cfg: &Config, kv: &mut CpuKv, layer: usize, q: &[f32], m: usize, pos0: usize, out: &mut [f32]) -> Result<()> {
        let (qw, hd, simd) = (cfg.q_width(), cfg.head_dim, self.simd);
        let parts = (self.workers.len() + 1).min(cfg.n_head);
        // Scores and weighted sums: about 4·m·positions·q_width flops.
        if m == 1 || parts == 1 || m * (pos0 + m) * qw < ATTENTION_PAR_WORK {
            return kv.attend(simd, cfg, layer, q, pos0, out);
        }
        let (keys, values) = kv.prefix(simd, layer, pos0 + m, Vec::new(), Vec::new())?;
        let heads = Heads { cfg: cfg.clone(), width: kv.width(), f16: kv.is_f16(), pos0, m, window: cfg.window(layer) };
        let shared = Arc::new((heads, q.to_vec(), keys, values));
        let bound = |k: usize| cfg.n_head * k / parts;
        let tasks: Vec<Task> = (1..parts)
            .map(|k| {
                let (sh, h) = (Arc::clone(&shared), bound(k)..bound(k + 1));
                Box::new(move || {
                    let mut y = vec![0f32; m * h.len() * hd];
                    sh.0.attend(simd, &sh.1, &sh.2, &sh.3, h, &mut y)?;
                    Ok(y)
                }) as Task
            })
            .collect();
        let mut y0 = vec![0f32; m * bound(1) * hd];
        let (mine, theirs) = self.workers.run(tasks, || shared.0.attend(simd, &shared.1, &shared.2, &shared.3, 0..bound(1), &mut y0))?;
        mine?;
        products::put(out, qw, 0, bound(1) * hd, &y0);
        for (k, y) in theirs.into_iter().enumerate() {
            products::put(out, qw, bound(k + 1) * hd, bound(k + 2) * hd, &y?);
        }
        Ok(())
    }
}

/// A sequence's one token in a step: its cache and position, its rows of Q, K, V and output.
struct OneTokenRow<'a> {
    kv: &'a mut CpuKv,
    pos: usize,
    q: &'a mut [f32],
    k: &'a mut [f32],
    v: &'a [f32],
    out: &'a mut [f32],
}

fn check_len(op: &'static str, have: usize, need: usize) -> Result<()> {
    if have < need {
        return Err(rayo::Error::LengthMismatch { op, expected: need, actual: have }.into());
    }
    Ok(())
}

impl Backend for Cpu {
    type Weight = CpuWeight;
    type Vector = Vec<f32>;
    type Buf = Vec<f32>;
    type Kv = CpuKv;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn shard(&self) -> Shard {
        self.group.as_ref().map_or(Shard::ALONE, |g| g.shard())
    }

    fn all_reduce(&mut self, buf: &mut Vec<f32>, len: usize) -> Result<()> {
        check_len("all_reduce", buf.len(), len)?;
        let g = self.group.as_ref().ok_or_else(|| Error::backend("cpu", "has no all-reduce (it runs no tensor-parallel rank)"))?;
        g.all_reduce_sum(&mut buf[..len])
    }

    fn all_gather_rows(&mut self, part: &Vec<f32>, m: usize, width: usize, out: &mut Vec<f32>) -> Result<()> {
        let g = self.group.as_ref().ok_or_else(|| Error::backend("cpu", "has no all-gather (it runs no tensor-parallel rank)"))?;
        let world = g.shard().world;
        let mine = g.shard().part(width).len();
        check_len("all_gather_rows", part.len(), m * mine)?;
        check_len("all_gather_rows", out.len(), m * width)?;
        let mut all = std::mem::take(&mut self.scratch);
        all.resize(m * width, 0.0);
        g.all_gather(&part[..m * mine], &mut all)?;
        crate::collective::parts_to_rows(&all, m, width, world, out);
        self.scratch = all;
        Ok(())
    }

    fn one_token_rows(&mut self, n: usize) {
        self.one_token = Some(n);
    }

    fn weight(&mut self, file: &GgufFile, w: &WeightRef) -> Result<CpuWeight> {
        if !std::ptr::eq(file.as_bytes(), self.file.as_bytes()) {
            return Err(Error::backend("cpu", format!("tensor {} comes from another file than this backend's", w.name)));
        }
        w.matrix(file)?;
        Ok(CpuWeight::new(w.clone()))
    }

    fn vector(&mut self, v: &[f32]) -> Result<Vec<f32>> {
        Ok(v.to_vec())
    }

    fn buffer(&mut self, len: usize) -> Result<Vec<f32>> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| rayo::Error::OutOfMemory { op: "llm buffer", bytes: len as u64 * 4 })?;
        v.resize(len, 0.0);
        Ok(v)
    }

    fn kv_cache(&mut self, cfg: &Config, positions: usize, ty: KvType) -> Result<CpuKv> {
        CpuKv::new(cfg, positions, ty)
    }

    fn embed(&mut self, table: &CpuWeight, tokens: &[u32], x: &mut Vec<f32>) -> Result<()> {
        let w = table.tensor.matrix(&self.file)?;
        check_len("embed", x.len(), tokens.len() * w.cols())?;
        for (&t, row) in tokens.iter().zip(x.chunks_exact_mut(w.cols())) {
            if t as usize >= w.rows() {
                return Err(Error::TokenPastVocab { id: t, vocab: w.rows() });
            }
            quant::dequantize_with(self.simd, w.ty(), w.row(t as usize), row)?;
        }
        Ok(())
    }

    fn rms_norm(&mut self, x: &Vec<f32>, w: &Vec<f32>, eps: f32, m: usize, out: &mut Vec<f32>) -> Result<()> {
        let d = w.len();
        check_len("rms_norm", x.len().min(out.len()), m * d)?;
        for (xr, yr) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)).take(m) {
            // As ggml: the sum of squares in f64, the scale in f32.
            let ss: f64 = xr.iter().map(|&v| (v * v) as f64).sum();
            let scale = 1.0 / ((ss / d as f64) as f32 + eps).sqrt();
            for ((y, &v), &g) in yr.iter_mut().zip(xr).zip(w) {
                *y = v * scale * g;
            }
        }
        Ok(())
    }

    fn matmul(&mut self, w: &CpuWeight, x: &Vec<f32>, m: usize, out: &mut Vec<f32>) -> Result<()> {
        let rows = w.tensor.rows;
        check_len("matmul", out.len(), m * rows)?;
        let out = &mut out[..m * rows];
        products::run(&self.file, &self.workers, self.simd, self.kind(m), Products::Each(&[w]), x, m, |_, r0, r1, y| {
            products::put(out, rows, r0, r1, y)
        })
    }

    fn add_bias(&mut self, x: &mut Vec<f32>, b: &Vec<f32>, m: usize) -> Result<()> {
        check_len("add_bias", x.len(), m * b.len())?;
        for row in x.chunks_exact_mut(b.len()).take(m) {
            row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
        }
        Ok(())
    }

    fn add(&mut self, x: &mut Vec<f32>, y: &Vec<f32>, len: usize) -> Result<()> {
        check_len("add", x.len().min(y.len()), len)?;
        x[..len].iter_mut().zip(&y[..len]).for_each(|(a, b)| *a += b);
        Ok(())
    }

    fn swiglu(&mut self, gate: &mut Vec<f32>, up: &Vec<f32>, len: usize) -> Result<()> {
        check_len("swiglu", gate.len().min(up.len()), len)?;
        self.scratch.resize(len, 0.0);
        rayo::slice::unary(self.simd, UnaryOp::Swish, &gate[..len], &mut self.scratch[..len])?;
        rayo::slice::binary(self.simd, BinaryOp::Mul, &self.scratch[..len], &up[..len], &mut gate[..len]).map_err(crate::Error::from)
    }

    fn geglu(&mut self, gate: &mut Vec<f32>, up: &Vec<f32>, len: usize) -> Result<()> {
        check_len("geglu", gate.len().min(up.len()), len)?;
        // tanh's argument, rayo's SIMD tanh, then the rest, a chunk at a time: plain arithmetic
        // the compiler vectorizes (libm's scalar `tanhf` was a quarter of Gemma 3's prompt time).
        const CHUNK: usize = 256;
        let (mut arg, mut th) = ([0f32; CHUNK], [0f32; CHUNK]);
        for (g, u) in gate[..len].chunks_mut(CHUNK).zip(up[..len].chunks(CHUNK)) {
            let (arg, th) = (&mut arg[..g.len()], &mut th[..g.len()]);
            arg.iter_mut().zip(&*g).for_each(|(a, &x)| *a = gelu_tanh_arg(x));
            rayo::slice::unary(self.simd, UnaryOp::Tanh, arg, th)?;
            g.iter_mut().zip(u).zip(&*th).for_each(|((g, &u), &t)| *g = gelu_from_tanh(*g, t) * u);
        }
        Ok(())
    }

    fn scale(&mut self, x: &mut Vec<f32>, s: f32, len: usize) -> Result<()> {
        check_len("scale", x.len(), len)?;
        x[..len].iter_mut().for_each(|v| *v *= s);
        Ok(())
    }

    fn rope(&mut self, cfg: &Config, layer: usize, q: &mut Vec<f32>, k: &mut Vec<f32>, m: usize, pos0: usize) -> Result<()> {
        check_len("rope", q.len(), m * cfg.q_width())?;
        check_len("rope", k.len(), m * cfg.kv_width())?;
        rope::rope(cfg, layer, &mut q[..m * cfg.q_width()], &mut k[..m * cfg.kv_width()], pos0);
        Ok(())
    }

    fn attention(
        &mut self,
        cfg: &Config,
        kv: &mut CpuKv,
        layer: usize,
        q: &Vec<f32>,
        k: &Vec<f32>,
        v: &Vec<f32>,
        m: usize,
        pos0: usize,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        check_len("attention", q.len().min(out.len()), m * cfg.q_width())?;
        check_len("attention", k.len().min(v.len()), m * cfg.kv_width())?;
        kv.store(layer, pos0, &k[..m * cfg.kv_width()], &v[..m * cfg.kv_width()])?;
        self.attend(cfg, kv, layer, &q[..m * cfg.q_width()], m, pos0, &mut out[..m * cfg.q_width()])
    }

    fn rope_attention_one_token_rows(
        &mut self,
        cfg: &Config,
        layer: usize,
        (kvs, rows): (&mut [CpuKv], &[(usize, usize)]),
        (q, k, v): (&mut Vec<f32>, &mut Vec<f32>, &Vec<f32>),
        out: &mut Vec<f32>,
    ) -> Result<bool> {
        let (n, qw, kw, simd) = (rows.len(), cfg.q_width(), cfg.kv_width(), self.simd);
        check_len("rope_attention_one_token_rows", q.len().min(out.len()), n * qw)?;
        check_len("rope_attention_one_token_rows", k.len().min(v.len()), n * kw)?;
        // each row with its own cache (one sequence's token each)
        let count = kvs.len();
        let mut caches: Vec<Option<&mut CpuKv>> = kvs.iter_mut().map(Some).collect();
        let mut work = Vec::with_capacity(n);
        let (qs, ks, outs) = (q[..n * qw].chunks_exact_mut(qw), k[..n * kw].chunks_exact_mut(kw), out[..n * qw].chunks_exact_mut(qw));
        for ((((&(c, pos), q), k), v), o) in rows.iter().zip(qs).zip(ks).zip(v[..n * kw].chunks_exact(kw)).zip(outs) {
            let kv = caches.get_mut(c).and_then(Option::take);
            let kv = kv.ok_or_else(|| Error::Batch(format!("one-token rows name cache {c} twice or past the {count} caches")))?;
            work.push(OneTokenRow { kv, pos, q, k, v, out: o });
        }
        // a row as `rope_attention` runs it alone: RoPE, the store, one-row attention
        let run = move |rows: Vec<OneTokenRow<'_>>| -> Result<Vec<f32>> {
            for r in rows {
                rope::rope(cfg, layer, r.q, r.k, r.pos);
                r.kv.store(layer, r.pos, r.k, r.v)?;
                r.kv.attend(simd, cfg, layer, r.q, r.pos, r.out)?;
            }
            Ok(Vec::new())
        };
        // the rows shared among the threads, in runs (the caller takes the first)
        let parts = (self.workers.len() + 1).min(n).max(1);
        let mut shares: Vec<Vec<_>> = (0..parts).map(|_| Vec::new()).collect();
        for (i, w) in work.into_iter().enumerate() {
            shares[i * parts / n].push(w);
        }
        let mut shares = shares.into_iter();
        let mine = shares.next().unwrap_or_default();
        let tasks: Vec<workers::BorrowedTask<'_>> = shares.map(|s| Box::new(move || run(s)) as workers::BorrowedTask<'_>).collect();
        let (mine, theirs) = self.workers.run_borrowed(tasks, || run(mine))?;
        mine?;
        for r in theirs {
            r?;
        }
        Ok(true)
    }

    fn top_k_rows(&mut self, x: &Vec<f32>, n: usize, rows: usize, k: usize) -> Result<Vec<RowBest>> {
        let len = rows.checked_mul(n).ok_or_else(|| rayo::Error::SizeOverflow { op: "top_k_rows", dims: vec![rows, n] })?;
        check_len("top_k_rows", x.len(), len)?;
        if rows == 0 {
            return Ok(Vec::new());
        }
        // the rows shared among the threads (a greedy step's 8 rows of SmolLM2's 49,152 logits
        // are ~1 ms of scanning), each row's scan its own
        let mut best: Vec<Option<RowBest>> = (0..rows).map(|_| None).collect();
        let parts = (self.workers.len() + 1).min(rows).max(1);
        let per = rows.div_ceil(parts);
        let scan = |xs: &[f32], out: &mut [Option<RowBest>]| {
            for (row, o) in xs.chunks_exact(n.max(1)).zip(out) {
                *o = Some(crate::sample::top_k_of(row, k));
            }
        };
        let mut shares = x[..len].chunks(per * n.max(1)).zip(best.chunks_mut(per));
        let mine = shares.next();
        let tasks: Vec<workers::BorrowedTask<'_>> = shares
            .map(|(xs, out)| {
                Box::new(move || {
                    scan(xs, out);
                    Ok(Vec::new())
                }) as workers::BorrowedTask<'_>
            })
            .collect();
        let (_, theirs) = self.workers.run_borrowed(tasks, || {
            if let Some((xs, out)) = mine {
                scan(xs, out);
            }
        })?;
        for r in theirs {
            r?;
        }
        Ok(best.into_iter().map(|b| b.unwrap_or_else(|| Err(Error::backend("cpu", "a row's top-k was not computed")))).collect())
    }

    fn copy_rows(&mut self, x: &Vec<f32>, from: usize, out: &mut Vec<f32>, to: usize, rows: usize, width: usize) -> Result<()> {
        let (src, dst) = (row_range("copy_rows", from, rows, width)?, row_range("copy_rows", to, rows, width)?);
        check_len("copy_rows", x.len(), src.end)?;
        check_len("copy_rows", out.len(), dst.end)?;
        out[dst].copy_from_slice(&x[src]);
        Ok(())
    }

    fn read(&mut self, x: &Vec<f32>, out: &mut [f32]) -> Result<()> {
        check_len("read", x.len(), out.len())?;
        out.copy_from_slice(&x[..out.len()]);
        Ok(())
    }

    fn norm_matmuls(
        &mut self,
        x: &Vec<f32>,
        norm: &Vec<f32>,
        eps: f32,
        m: usize,
        ws: &[&CpuWeight],
        tmp: &mut Vec<f32>,
        outs: &mut [&mut Vec<f32>],
    ) -> Result<()> {
        self.rms_norm(x, norm, eps, m, tmp)?;
        for (w, out) in ws.iter().zip(outs.iter()) {
            check_len("norm_matmuls", out.len(), m * w.tensor.rows)?;
        }
        products::run(&self.file, &self.workers, self.simd, self.kind(m), Products::Each(ws), tmp, m, |k, r0, r1, y| {
            products::put(outs[k], ws[k].tensor.rows, r0, r1, y)
        })
    }

    fn matmul_add(&mut self, w: &CpuWeight, x: &Vec<f32>, m: usize, _tmp: &mut Vec<f32>, acc: &mut Vec<f32>, len: usize) -> Result<()> {
        let rows = w.tensor.rows;
        check_len("matmul_add", acc.len().min(len), m * rows)?;
        let acc = &mut acc[..m * rows];
        products::run(&self.file, &self.workers, self.simd, self.kind(m), Products::Each(&[w]), x, m, |_, r0, r1, y| {
            products::add(acc, rows, r0, r1, y)
        })
    }

    fn norm_swiglu(
        &mut self,
        x: &Vec<f32>,
        norm: &Vec<f32>,
        eps: f32,
        m: usize,
        (gate, up): (&CpuWeight, &CpuWeight),
        tmp: &mut Vec<f32>,
        out: &mut Vec<f32>,
        _up_out: &mut Vec<f32>,
        len: usize,
    ) -> Result<()> {
        self.rms_norm(x, norm, eps, m, tmp)?;
        let rows = gate.tensor.rows;
        check_len("norm_swiglu", out.len().min(len), m * rows)?;
        let out = &mut out[..m * rows];
        products::run(&self.file, &self.workers, self.simd, self.kind(m), Products::SwiGlu(gate, up), tmp, m, |_, r0, r1, y| {
            products::put(out, rows, r0, r1, y)
        })
    }
}

// GELU in its tanh form, in f32 (as ggml's CUDA kernels compute it; its CPU looks the value up
// in a table of every f16 input, which rounds it to f16 on both sides), in two halves around the
// SIMD tanh: `gelu_from_tanh(x, tanh(gelu_tanh_arg(x)))`.

/// The argument of GELU's tanh: √(2/π)·x·(1 + 0.044715·x²).
#[inline(always)]
fn gelu_tanh_arg(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)
}

/// GELU from `t`, the tanh of its argument: `x·(1 + t)/2`, and 0 at and below −10, as ggml (the
/// exact value is below 1e-22 there; −inf would otherwise give NaN).
#[inline(always)]
fn gelu_from_tanh(x: f32, t: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else {
        0.5 * x * (1.0 + t)
    }
}

/// The values of rows `row..row + rows` of `width` values, or an error when that overflows.
fn row_range(op: &'static str, row: usize, rows: usize, width: usize) -> Result<std::ops::Range<usize>> {
    let at = |r: usize| r.checked_mul(width);
    match (at(row), row.checked_add(rows).and_then(at)) {
        (Some(a), Some(b)) => Ok(a..b),
        _ => Err(rayo::Error::SizeOverflow { op, dims: vec![row, rows, width] }.into()),
    }
}
