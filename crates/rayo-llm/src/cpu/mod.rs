//! The CPU backend: weights used in place from the file's memory map, quantized products
//! from [`rayo::quant`] threaded over weight rows, element-wise ops from [`rayo::slice`].

mod attention;
pub(crate) mod rope;
mod workers;

use crate::backend::{Backend, KvType};
use crate::config::Config;
use crate::weights::WeightRef;
pub use attention::CpuKv;
use rayo::gguf::GgufFile;
use rayo::ops::{BinaryOp, UnaryOp};
use rayo::quant::QuantMatrix;
use rayo::quant::{self, Activations};
use rayo::{Error, Par, Result};
use std::sync::Arc;
use workers::{Task, Workers};

/// Below this many weight bytes × activation rows a product stays on the calling thread.
const PAR_BYTES: usize = 1 << 16;

/// The CPU backend of one model file.
pub struct Cpu {
    file: Arc<GgufFile>,
    workers: Workers,
    act: Activations,
    simd: rayo::Backend,
    scratch: Vec<f32>,
}

impl Cpu {
    /// A backend for the weights of `file` on `threads` threads (0 = all cores), activations
    /// quantized to 8 bits as llama.cpp does ([`Activations::Quantized`]).
    pub fn new(file: Arc<GgufFile>, threads: usize) -> Cpu {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        Cpu { file, workers: Workers::new(threads - 1), act: Activations::Quantized, simd: rayo::Backend::selected(), scratch: Vec::new() }
    }

    /// The same with the given kind of activations for the quantized products.
    pub fn with_activations(mut self, act: Activations) -> Cpu {
        self.act = act;
        self
    }

    /// The threads the products use.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }
}

/// `y = x·Wᵀ` for weight rows `r0..r1` of `w` (`y`: `m × (r1 − r0)`), on the calling thread.
fn product_part(simd: rayo::Backend, act: Activations, w: &QuantMatrix<'_>, r0: usize, r1: usize, x: &[f32], y: &mut [f32]) -> Result<()> {
    let row = w.bytes().len() / w.rows();
    let part = QuantMatrix::new(w.ty(), r1 - r0, w.cols(), &w.bytes()[r0 * row..r1 * row])?;
    quant::matmul_with(simd, act, &part, x, y, Par::Seq)
}

fn check_len(op: &'static str, have: usize, need: usize) -> Result<()> {
    if have < need {
        return Err(Error::LengthMismatch { op, expected: need, actual: have });
    }
    Ok(())
}

impl Backend for Cpu {
    type Weight = WeightRef;
    type Vector = Vec<f32>;
    type Buf = Vec<f32>;
    type Kv = CpuKv;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn weight(&mut self, file: &GgufFile, w: &WeightRef) -> Result<WeightRef> {
        if !std::ptr::eq(file.as_bytes(), self.file.as_bytes()) {
            return Err(Error::Model { what: format!("tensor {} comes from another file than this backend's", w.name) });
        }
        w.matrix(file)?;
        Ok(w.clone())
    }

    fn vector(&mut self, v: &[f32]) -> Result<Vec<f32>> {
        Ok(v.to_vec())
    }

    fn buffer(&mut self, len: usize) -> Result<Vec<f32>> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory { op: "llm buffer", bytes: len as u64 * 4 })?;
        v.resize(len, 0.0);
        Ok(v)
    }

    fn kv_cache(&mut self, cfg: &Config, positions: usize, ty: KvType) -> Result<CpuKv> {
        CpuKv::new(cfg, positions, ty)
    }

    fn embed(&mut self, table: &WeightRef, tokens: &[u32], x: &mut Vec<f32>) -> Result<()> {
        let w = table.matrix(&self.file)?;
        check_len("embed", x.len(), tokens.len() * w.cols())?;
        for (&t, row) in tokens.iter().zip(x.chunks_exact_mut(w.cols())) {
            if t as usize >= w.rows() {
                return Err(Error::Model { what: format!("token id {t} is past the vocabulary of {} tokens", w.rows()) });
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

    fn matmul(&mut self, w: &WeightRef, x: &Vec<f32>, m: usize, out: &mut Vec<f32>) -> Result<()> {
        let q = w.matrix(&self.file)?;
        let (rows, cols) = (q.rows(), q.cols());
        check_len("matmul", x.len(), m * cols)?;
        check_len("matmul", out.len(), m * rows)?;
        let (x, out) = (&x[..m * cols], &mut out[..m * rows]);
        let parts = (self.workers.len() + 1).min(rows).min((q.bytes().len() * m / PAR_BYTES).max(1));
        if parts == 1 {
            return product_part(self.simd, self.act, &q, 0, rows, x, out);
        }
        // Weight rows split evenly; part 0 on this thread, the others on the workers, each
        // with its own copy of the activations' quantization (a few µs).
        let bound = |k: usize| rows * k / parts;
        let xs: Arc<[f32]> = x.into();
        let tasks: Vec<Task> = (1..parts)
            .map(|k| {
                let (file, wr, xs, simd, act) = (Arc::clone(&self.file), w.clone(), Arc::clone(&xs), self.simd, self.act);
                let (r0, r1) = (bound(k), bound(k + 1));
                Box::new(move || {
                    let q = wr.matrix(&file)?;
                    let mut y = vec![0f32; m * (r1 - r0)];
                    product_part(simd, act, &q, r0, r1, &xs, &mut y)?;
                    Ok(y)
                }) as Task
            })
            .collect();
        let (simd, act, r1) = (self.simd, self.act, bound(1));
        let mut y0 = vec![0f32; if m == 1 { 0 } else { m * r1 }];
        let (mine, theirs) = self.workers.run(tasks, || {
            if m == 1 {
                product_part(simd, act, &q, 0, r1, x, &mut out[..r1])
            } else {
                product_part(simd, act, &q, 0, r1, x, &mut y0)
            }
        });
        mine?;
        // Each part's `m × width` block into its columns of `out`.
        let mut place = |r0: usize, y: &[f32]| {
            let width = y.len() / m;
            for (i, row) in y.chunks_exact(width).enumerate() {
                out[i * rows + r0..][..width].copy_from_slice(row);
            }
        };
        if m > 1 {
            place(0, &y0);
        }
        for (k, y) in theirs.into_iter().enumerate() {
            place(bound(k + 1), &y?);
        }
        Ok(())
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
        rayo::slice::binary(self.simd, BinaryOp::Mul, &self.scratch[..len], &up[..len], &mut gate[..len])
    }

    fn rope(&mut self, cfg: &Config, q: &mut Vec<f32>, k: &mut Vec<f32>, m: usize, pos0: usize) -> Result<()> {
        check_len("rope", q.len(), m * cfg.q_width())?;
        check_len("rope", k.len(), m * cfg.kv_width())?;
        rope::rope(cfg, &mut q[..m * cfg.q_width()], &mut k[..m * cfg.kv_width()], pos0);
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
        kv.attend(self.simd, cfg, layer, &q[..m * cfg.q_width()], pos0, &mut out[..m * cfg.q_width()])
    }

    fn copy_row(&mut self, x: &Vec<f32>, row: usize, width: usize, out: &mut Vec<f32>) -> Result<()> {
        check_len("copy_row", x.len(), (row + 1) * width)?;
        check_len("copy_row", out.len(), width)?;
        out[..width].copy_from_slice(&x[row * width..][..width]);
        Ok(())
    }

    fn read(&mut self, x: &Vec<f32>, out: &mut [f32]) -> Result<()> {
        check_len("read", x.len(), out.len())?;
        out.copy_from_slice(&x[..out.len()]);
        Ok(())
    }
}
