//! Row softmax and log_softmax, online: one pass over the row keeps a running (max, sum of
//! exponentials) per thread, merged across the block; a second pass writes the outputs.
//! One block of 256 threads per row; the row length is a parameter, so one kernel per
//! (log, chunk width) serves every shape.

use super::common::*;
use super::rowloop::Row;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// Parameters: `x` (u64), `out` (u64), `cols` (u32); rows = grid size. The value holds the row
/// length it will be launched with; the generated code depends only on `log` and on whether the
/// rows are a multiple of 4 floats (16-byte chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SoftmaxKernel {
    cols: u32,
    log: bool,
}

/// Merges two (max, sum) pairs: the sums rescaled to the larger max.
fn merge(k: &mut PtxKernel, a: &[Reg], b: &[Reg]) -> Vec<Reg> {
    let m = k.bin(BinOp::Max, F, a[0], b[0]);
    let da = k.sub(F, a[0], m);
    let db = k.sub(F, b[0], m);
    let ea = exp(k, da);
    let eb = exp(k, db);
    let s = k.mul(F, a[1], ea);
    let s = k.fma(F, b[1], eb, s);
    vec![m, s]
}

impl SoftmaxKernel {
    pub const THREADS: u32 = 256;

    pub fn new(cols: u32, log: bool) -> SoftmaxKernel {
        SoftmaxKernel { cols, log }
    }

    pub fn cols(&self) -> u32 {
        self.cols
    }
    pub fn log(&self) -> bool {
        self.log
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

impl Kernel for SoftmaxKernel {
    fn name(&self) -> String {
        format!("{}_v{}", if self.log { "log_softmax" } else { "softmax" }, self.width())
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        k.add_param("x", PtxType::U64);
        k.add_param("out", PtxType::U64);
        k.add_param("cols", PtxType::U32);
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let sm_m = k.shared_array("sm_max", F, Self::THREADS / 32, 4);
        let sm_s = k.shared_array("sm_sum", F, Self::THREADS / 32, 4);
        let x = k.ld_param_ptr("x");
        let out = k.ld_param_ptr("out");
        let cols = k.ld_param("cols");
        let row = Row::new(&mut k, cols, self.width(), Self::THREADS);
        let xb = row.base(&mut k, x);
        let ob = row.base(&mut k, out);
        // -FLT_MAX rather than -inf: merging two empty threads must not compute -inf - -inf.
        let m = k.mov(F, f32::MIN);
        let s = k.mov(F, 0.0f32);
        row.for_each(&mut k, |k, _j, off| {
            let v = row.load(k, xb, off);
            let mut cm = v[0];
            for &e in &v[1..] {
                cm = k.bin(BinOp::Max, F, cm, e);
            }
            let mn = k.bin(BinOp::Max, F, m, cm);
            let d = k.sub(F, m, mn);
            let scale = exp(k, d);
            k.bin_to(BinOp::Mul, s, s, scale);
            for &e in &v {
                let d = k.sub(F, e, mn);
                let t = exp(k, d);
                k.bin_to(BinOp::Add, s, s, t);
            }
            k.mov_to(m, mn);
        });
        let r = row.block_merge(&mut k, vec![m, s], &[sm_m, sm_s], &merge);
        let (m, s) = (r[0], r[1]);
        if self.log {
            let ls = ln(&mut k, s);
            let lse = k.add(F, m, ls);
            row.for_each(&mut k, |k, _j, off| {
                let v = row.load(k, xb, off);
                let o: Vec<Reg> = v.iter().map(|&e| k.sub(F, e, lse)).collect();
                row.store(k, ob, off, &o);
            });
        } else {
            let inv = k.un(UnOp::Rcp, F, s);
            row.for_each(&mut k, |k, _j, off| {
                let v = row.load(k, xb, off);
                let o: Vec<Reg> = v
                    .iter()
                    .map(|&e| {
                        let d = k.sub(F, e, m);
                        let t = exp(k, d);
                        k.mul(F, t, inv)
                    })
                    .collect();
                row.store(k, ob, off, &o);
            });
        }
        k.ret();
        k
    }
}
