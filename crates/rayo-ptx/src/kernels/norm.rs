//! LayerNorm (Welford/Chan mean and variance in one pass, merged across the block) and RMSNorm
//! (mean of squares), one block per row; the row length and epsilon are parameters, so one
//! kernel per (kind, chunk width) serves every shape and epsilon.

use super::common::*;
use super::rowloop::Row;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NormKind {
    /// `(x - mean) / sqrt(var + eps) * gamma + beta`
    LayerNorm,
    /// `x / sqrt(mean(x²) + eps) * gamma`
    RmsNorm,
}

/// Parameters: `x`, `gamma`, `beta` (LayerNorm only), `out` (all u64), `cols` (u32), `eps`
/// (f32); rows = grid size. The value holds the row length and epsilon it will be launched with;
/// the generated code depends only on the kind, the chunk width and whether it adds its result
/// to `out` ([`NormKernel::residual`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormKernel {
    kind: NormKind,
    cols: u32,
    eps: f32,
    residual: bool,
}

/// Chan's merge of two (count, mean, M2) triples.
fn welford_merge(k: &mut PtxKernel, a: &[Reg], b: &[Reg]) -> Vec<Reg> {
    let n = k.add(F, a[0], b[0]);
    let n1 = k.bin(BinOp::Max, F, n, 1.0f32);
    let r = k.un(UnOp::Rcp, F, n1);
    let delta = k.sub(F, b[1], a[1]);
    let wb = k.mul(F, b[0], r);
    let mean = k.fma(F, delta, wb, a[1]);
    let m2 = k.add(F, a[2], b[2]);
    let dd = k.mul(F, delta, delta);
    let nab = k.mul(F, a[0], wb);
    let m2 = k.fma(F, dd, nab, m2);
    vec![n, mean, m2]
}

fn sum_merge(k: &mut PtxKernel, a: &[Reg], b: &[Reg]) -> Vec<Reg> {
    vec![k.add(F, a[0], b[0])]
}

impl NormKernel {
    pub const THREADS: u32 = 256;

    pub fn new(kind: NormKind, cols: u32, eps: f32) -> NormKernel {
        NormKernel { kind, cols, eps, residual: false }
    }

    /// The variant that adds the norm to `out` (`out += norm(x)`, rounded as a norm and then
    /// an add): a norm after a sublayer and the residual connection in one launch.
    pub fn residual(self) -> NormKernel {
        NormKernel { residual: true, ..self }
    }

    pub fn kind(&self) -> NormKind {
        self.kind
    }
    pub fn cols(&self) -> u32 {
        self.cols
    }
    pub fn eps(&self) -> f32 {
        self.eps
    }
    /// Floats per chunk the kernel reads: 4 when `cols % 4 == 0`, else 1.
    pub fn width(&self) -> u32 {
        if self.cols.is_multiple_of(4) {
            4
        } else {
            1
        }
    }

    pub fn launch(&self, rows: u32) -> LaunchConfig {
        LaunchConfig { grid: (rows.max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for NormKernel {
    fn name(&self) -> String {
        let kind = match self.kind {
            NormKind::LayerNorm => "layernorm",
            NormKind::RmsNorm => "rmsnorm",
        };
        let add = if self.residual { "_add" } else { "" };
        format!("{kind}{add}_v{}", self.width())
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let ln = self.kind == NormKind::LayerNorm;
        let mut k = PtxKernel::new(&self.name());
        k.add_param("x", PtxType::U64);
        k.add_param("gamma", PtxType::U64);
        if ln {
            k.add_param("beta", PtxType::U64);
        }
        k.add_param("out", PtxType::U64);
        k.add_param("cols", PtxType::U32);
        k.add_param("eps", PtxType::F32);
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let warps = Self::THREADS / 32;
        let x = k.ld_param_ptr("x");
        let gamma = k.ld_param_ptr("gamma");
        let beta = if ln { Some(k.ld_param_ptr("beta")) } else { None };
        let out = k.ld_param_ptr("out");
        let cols = k.ld_param("cols");
        let eps = k.ld_param("eps");
        // 1/cols, correctly rounded (rcp.rn): the same f32 the host would compute
        let colsf = k.cvt(F, U, cols);
        let inv_cols = k.un(UnOp::Rcp, F, colsf);
        let row = Row::new(&mut k, cols, self.width(), Self::THREADS);
        let xb = row.base(&mut k, x);
        let ob = row.base(&mut k, out);
        let w = row.width as f32;
        let (mean, rstd) = if ln {
            let smem: Vec<Name> = ["sm_n", "sm_mean", "sm_m2"].iter().map(|s| k.shared_array(s, F, warps, 4)).collect();
            let n = k.mov(F, 0.0f32);
            let mean = k.mov(F, 0.0f32);
            let m2 = k.mov(F, 0.0f32);
            row.for_each(&mut k, |k, _j, off| {
                let v = row.load(k, xb, off);
                // statistics of this chunk, then Chan's merge into the running triple
                let mut sum = v[0];
                for &e in &v[1..] {
                    sum = k.add(F, sum, e);
                }
                let cmean = k.mul(F, sum, 1.0 / w);
                let mut cm2 = k.mov(F, 0.0f32);
                for &e in &v {
                    let d = k.sub(F, e, cmean);
                    cm2 = k.fma(F, d, d, cm2);
                }
                let cn = k.mov(F, w);
                let r = welford_merge(k, &[n, mean, m2], &[cn, cmean, cm2]);
                k.mov_to(n, r[0]);
                k.mov_to(mean, r[1]);
                k.mov_to(m2, r[2]);
            });
            let r = row.block_merge(&mut k, vec![n, mean, m2], &smem, &welford_merge);
            let var = k.mul(F, r[2], inv_cols);
            let ve = k.add(F, var, eps);
            (Some(r[1]), k.un(UnOp::Rsqrt, F, ve))
        } else {
            let smem = vec![k.shared_array("sm_sq", F, warps, 4)];
            let ss = k.mov(F, 0.0f32);
            row.for_each(&mut k, |k, _j, off| {
                let v = row.load(k, xb, off);
                for &e in &v {
                    k.fma_to(ss, e, e, ss);
                }
            });
            let r = row.block_merge(&mut k, vec![ss], &smem, &sum_merge);
            let ms = k.mul(F, r[0], inv_cols);
            let me = k.add(F, ms, eps);
            (None, k.un(UnOp::Rsqrt, F, me))
        };
        row.for_each(&mut k, |k, _j, off| {
            let v = row.load(k, xb, off);
            let g = row.load(k, gamma, off);
            let b = beta.map(|b| row.load(k, b, off));
            let o: Vec<Reg> = (0..v.len())
                .map(|i| {
                    let c = match mean {
                        Some(m) => k.sub(F, v[i], m),
                        None => v[i],
                    };
                    let t = k.mul(F, c, rstd);
                    match &b {
                        Some(b) => k.fma(F, t, g[i], b[i]),
                        None => k.mul(F, t, g[i]),
                    }
                })
                .collect();
            let o = match self.residual {
                true => {
                    let acc = row.load(k, ob, off);
                    acc.iter().zip(&o).map(|(&a, &v)| k.add(F, a, v)).collect()
                }
                false => o,
            };
            row.store(k, ob, off, &o);
        });
        k.ret();
        k
    }
}
