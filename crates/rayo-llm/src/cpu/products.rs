//! A layer's quantized products on the CPU's threads, as one job: the weight rows of every
//! matrix that multiplies the same activations (Q, K and V; gate and up) are cut into chunks
//! that the threads take in turn from a shared counter, so a thread that is late (woken late,
//! interrupted) leaves more chunks to the others instead of holding everyone at the end. The
//! activations are quantized once for the whole job ([`PreparedActs`]), not once per matrix
//! and thread.

use super::weight::CpuWeight;
use super::workers::{Task, Workers};
use crate::{Error, Result};
use rayo::gguf::GgufFile;
use rayo::ops::{BinaryOp, UnaryOp};
use rayo::quant::{self, Activations, PreparedActs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Below this many weight bytes × activation rows a job stays on the calling thread.
const PAR_BYTES: usize = 1 << 16;

/// Chunks per thread a job is cut into (at least 16 weight rows each): enough to even out a
/// late thread, few enough that taking a chunk costs nothing.
const CHUNKS_PER_THREAD: usize = 4;

/// What a job multiplies.
pub enum Products<'a> {
    /// Each matrix by the activations: its own output.
    Each(&'a [&'a CpuWeight]),
    /// `silu(x·gateᵀ) · (x·upᵀ)`: one output (the two matrices have the same shape).
    SwiGlu(&'a CpuWeight, &'a CpuWeight),
}

/// Weight rows `r0..r1` of matrix `w` (for [`Products::SwiGlu`], of both matrices).
struct Chunk {
    w: usize,
    r0: usize,
    r1: usize,
}

struct Job {
    file: Arc<GgufFile>,
    simd: rayo::Backend,
    weights: Vec<CpuWeight>,
    /// The activations of each weight (shared where two pair with the same format).
    acts: Vec<Arc<PreparedActs>>,
    swiglu: bool,
    chunks: Vec<Chunk>,
    next: AtomicUsize,
    /// Each chunk's `m × (r1 − r0)` result.
    done: Vec<OnceLock<Result<Vec<f32>>>>,
}

impl Job {
    /// Takes chunks until none is left.
    fn work(&self) {
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(chunk) = self.chunks.get(c) else { return };
            let _ = self.done[c].set(self.chunk(chunk));
        }
    }

    fn chunk(&self, c: &Chunk) -> Result<Vec<f32>> {
        let product = |w: usize| -> Result<Vec<f32>> {
            let acts = &self.acts[w];
            let mut y = vec![0f32; acts.rows() * (c.r1 - c.r0)];
            quant::matmul_rows(self.simd, &self.weights[w].matrix(&self.file)?, acts, c.r0, c.r1, &mut y)?;
            Ok(y)
        };
        let mut y = product(c.w)?;
        if !self.swiglu {
            return Ok(y);
        }
        let up = product(1)?;
        let mut silu = vec![0f32; y.len()];
        rayo::slice::unary(self.simd, UnaryOp::Swish, &y, &mut silu)?;
        rayo::slice::binary(self.simd, BinaryOp::Mul, &silu, &up, &mut y)?;
        Ok(y)
    }
}

/// Runs `products` of the `m` rows of `x` (the first `one_token` of them one-token rows:
/// [`PreparedActs::with_single_rows`]) on the calling thread and `workers`, then hands each
/// chunk's result to `place(output, r0, r1, values)` (`values`: `m × (r1 − r0)`, columns
/// `r0..r1` of output `output`), in order.
#[allow(clippy::too_many_arguments)]
pub fn run(
    file: &Arc<GgufFile>,
    workers: &Workers,
    simd: rayo::Backend,
    (act, one_token): (Activations, usize),
    products: Products<'_>,
    x: &[f32],
    m: usize,
    mut place: impl FnMut(usize, usize, usize, &[f32]),
) -> Result<()> {
    let (weights, swiglu): (Vec<CpuWeight>, bool) = match products {
        Products::Each(ws) => (ws.iter().map(|&w| w.clone()).collect(), false),
        Products::SwiGlu(gate, up) => {
            let (g, u) = (&gate.tensor, &up.tensor);
            if (g.rows, g.cols) != (u.rows, u.cols) {
                return Err(Error::backend("cpu", format!("{} is {}×{} but {} is {}×{}", g.name, g.rows, g.cols, u.name, u.rows, u.cols)));
            }
            (vec![gate.clone(), up.clone()], true)
        }
    };
    let Some(cols) = weights.first().map(|w| w.tensor.cols) else { return Ok(()) };
    if x.len() < m * cols {
        return Err(rayo::Error::LengthMismatch { op: "llm product", expected: m * cols, actual: x.len() }.into());
    }
    let x = &x[..m * cols];
    let mut acts: Vec<Arc<PreparedActs>> = Vec::with_capacity(weights.len());
    let one_token = one_token.min(m);
    for CpuWeight { tensor: w, .. } in &weights {
        let shared = acts.iter().find(|a| a.serves(w.ty) && a.cols() == w.cols).cloned();
        acts.push(match shared {
            Some(a) => a,
            None => Arc::new(PreparedActs::new(simd, act, w.ty, x, w.cols)?.with_single_rows(one_token)?),
        });
    }
    for (a, w) in acts.iter().zip(&weights) {
        a.prepare_for(w.tensor.ty);
        if act == Activations::Quantized {
            w.repack(file, simd)?;
        }
    }
    // Chunks of whole 16-row blocks, never across two matrices (a SwiGLU pair's rows go
    // together: its chunks cover the gate's rows).
    let listed = if swiglu { &weights[..1] } else { &weights[..] };
    let bytes: usize = weights.iter().map(|w| w.tensor.range.len()).sum::<usize>().saturating_mul(m);
    let threads = if bytes < PAR_BYTES { 1 } else { workers.len() + 1 };
    let total: usize = listed.iter().map(|w| w.tensor.rows).sum();
    let step = total.div_ceil(threads * CHUNKS_PER_THREAD).next_multiple_of(16).max(16);
    let chunks: Vec<Chunk> = listed
        .iter()
        .enumerate()
        .flat_map(|(w, wr)| (0..wr.tensor.rows).step_by(step).map(move |r0| Chunk { w, r0, r1: (r0 + step).min(wr.tensor.rows) }))
        .collect();
    let job = Arc::new(Job {
        file: Arc::clone(file),
        simd,
        weights,
        acts,
        swiglu,
        done: chunks.iter().map(|_| OnceLock::new()).collect(),
        chunks,
        next: AtomicUsize::new(0),
    });
    let helpers = (threads - 1).min(job.chunks.len().saturating_sub(1));
    let tasks: Vec<Task> = (0..helpers)
        .map(|_| {
            let job = Arc::clone(&job);
            Box::new(move || {
                job.work();
                Ok(Vec::new())
            }) as Task
        })
        .collect();
    let ((), theirs) = workers.run(tasks, || job.work())?;
    for r in theirs {
        r?;
    }
    for (c, done) in job.chunks.iter().zip(&job.done) {
        let y = done.get().ok_or_else(|| Error::backend("cpu", "a product chunk was not computed"))?;
        place(c.w, c.r0, c.r1, y.as_ref().map_err(Clone::clone)?);
    }
    Ok(())
}

/// Columns `r0..r1` of an `m × width` output from a chunk's `m × (r1 − r0)` values.
pub fn put(out: &mut [f32], width: usize, r0: usize, r1: usize, y: &[f32]) {
    let n = r1 - r0;
    for (o, v) in out.chunks_exact_mut(width).zip(y.chunks_exact(n)) {
        o[r0..r1].copy_from_slice(v);
    }
}

/// The same, added to what the output holds.
pub fn add(out: &mut [f32], width: usize, r0: usize, r1: usize, y: &[f32]) {
    let n = r1 - r0;
    for (o, v) in out.chunks_exact_mut(width).zip(y.chunks_exact(n)) {
        o[r0..r1].iter_mut().zip(v).for_each(|(o, v)| *o += v);
    }
}
