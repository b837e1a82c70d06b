//! `rayo bench --backend cuda`: device-resident kernels timed with CUDA events (median of several
//! samples, each many launches), host round trips timed with the host clock, and the PTX
//! generation rate. Rows use the same table/JSON as the CPU rows.

use super::row::Row;
use super::timer::Plan;
use rayo::cuda::{CudaDevice, DeviceBuffer, Expr, GemmKernel, Kernel, ReduceOp};
use rayo::ops::{BinaryOp, UnaryOp};
use std::time::Instant;

/// Rows that are not ops of the registry.
const EXTRA: &[&str] = &[
    "gemm", "gemm_blocked8", "gemm_blocked16", "gemm_split8", "gemm_split16", "gemm_tf32", "gemm_tf32_bk8", "gemm_tiled", "gemm_naive", "fused",
    "softmax", "log_softmax", "layernorm", "rmsnorm", "roundtrip_add", "roundtrip_matmul", "graph_chain", "transfer", "ptxgen", "wgmma_bf16",
    "wgmma_f16", "wgmma_bf16_n128", "wgmma_tf32", "wgmma_bf16_c2", "wgmma_f16_c2", "wgmma_tf32_c2", "wgmma_bf16_h", "wgmma_f16_h", "wgmma_bf16_t",
    "wgmma_f16_t", "wgmma_bf16_t_c2", "wgmma_f16_t_c2", "flash_bf16", "flash_bf16_causal", "flash_f16", "flash_bf16_hd64",
];

/// Every op `rayo bench --backend cuda` knows: the registry's element-wise ops (one fused kernel
/// each) and reductions, and the extra rows.
pub fn ops() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = BinaryOp::all().into_iter().map(BinaryOp::name).collect();
    v.extend(UnaryOp::all().into_iter().map(UnaryOp::name));
    v.extend(ReduceOp::ALL.into_iter().map(ReduceOp::name));
    v.extend(EXTRA);
    v
}

/// The fused expression a registry op (or `fused`, sigmoid(x·y + x)·z) runs as.
fn expr_for(op: &str) -> Option<Expr> {
    if op == "fused" {
        return Some(Expr::input(0).mul(Expr::input(1)).add(Expr::input(0)).sigmoid().mul(Expr::input(2)));
    }
    if let Some(u) = UnaryOp::from_name(op) {
        return Some(Expr::input(0).apply(u));
    }
    BinaryOp::from_name(op).map(|b| Expr::input(0).combine(b, Expr::input(1)))
}

pub const DEFAULT_OPS: &[&str] = &["gemm", "add", "sum", "dot", "softmax", "layernorm", "roundtrip_add", "ptxgen"];
const COLS: usize = 4096;

fn err(e: rayo::Error) -> String {
    format!("cuda: {e}")
}

/// Median device milliseconds of one call of `f`.
fn device_ms(dev: &CudaDevice, plan: Plan, mut f: impl FnMut() -> rayo::Result<()>) -> Result<f64, String> {
    f().map_err(err)?; // load the module, warm caches
    let one = dev.time_ms(1, &mut f).map_err(err)?.max(1e-4);
    let target_ms = plan.sample.as_secs_f64() * 1e3 / 4.0;
    let reps = ((target_ms / one) as usize).clamp(1, 10_000);
    let mut v = Vec::with_capacity(plan.samples);
    for _ in 0..plan.samples_after(std::time::Duration::from_secs_f64(one / 1e3)) {
        v.push(dev.time_ms(reps, &mut f).map_err(err)?);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok(v[v.len() / 2])
}

fn row(op: &str, n: usize, mkn: Option<(usize, usize, usize)>, ms: f64, bytes: Option<f64>, flops: Option<f64>, note: &str) -> Row {
    let ns = ms * 1e6;
    Row {
        op: op.to_string(),
        n,
        mkn,
        backend: "cuda".into(),
        threads: 1,
        ns,
        gbps: bytes.map(|b| b / ns),
        gflops: flops.map(|f| f / ns),
        note: Some(note.to_string()),
    }
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The CUDA device of a benchmark run.
pub struct Cuda {
    dev: &'static CudaDevice,
}

impl Cuda {
    /// The shared device, or why there is none.
    pub fn open() -> Result<Cuda, String> {
        CudaDevice::global().map(|dev| Cuda { dev }).map_err(|e| e.to_string())
    }

    pub fn heading(&self) -> String {
        format!("cuda: {}", self.dev.info())
    }

    /// The CUDA op measuring what `op` names on the other backends (`matmul` is `gemm`).
    pub fn op_for(op: &str) -> Option<&'static str> {
        let op = if op == "matmul" { "gemm" } else { op };
        ops().into_iter().find(|o| *o == op)
    }

    /// Sizes when none are given; `--quick` keeps every op to a fraction of a second.
    pub fn default_sizes(&self, op: &str, quick: bool) -> Vec<usize> {
        match (quick, op) {
            (false, o) if o.starts_with("gemm") => vec![1024, 2048, 4096],
            (false, o) if o.starts_with("wgmma") => vec![4096, 8192],
            (true, o) if o.starts_with("wgmma") => vec![2048],
            (false, o) if o.starts_with("flash") => vec![4096],
            (true, o) if o.starts_with("flash") => vec![1024],
            (true, o) if o.starts_with("gemm") => vec![1024],
            (false, "softmax" | "log_softmax" | "layernorm" | "rmsnorm") => vec![32768 * COLS],
            (true, "softmax" | "log_softmax" | "layernorm" | "rmsnorm") => vec![1024 * COLS],
            (_, "roundtrip_add" | "graph_chain") => vec![1000],
            (false, "roundtrip_matmul") => vec![64, 128, 256, 512, 1024],
            (true, "roundtrip_matmul") => vec![256, 1024],
            (_, "ptxgen") => vec![1],
            (false, "transfer") => vec![64 << 20],
            (true, "transfer") => vec![16 << 20],
            (false, _) => vec![100_000_000],
            (true, _) => vec![10_000_000],
        }
    }

    /// The rows of one CUDA op at one size.
    pub fn rows(&self, op: &str, n: usize, plan: Plan) -> Result<Vec<Row>, String> {
        run_one(self.dev, op, n, plan)
    }
}

fn run_one(dev: &CudaDevice, op: &str, n: usize, plan: Plan) -> Result<Vec<Row>, String> {
    let up = |n: usize, seed: u64| dev.upload(&random(n, seed)).map_err(err);
    let mut rows = vec![];
    match op {
        o if o.starts_with("gemm") => {
            let d = n as u32;
            let g = match o {
                "gemm" => GemmKernel::for_device(d, d, d, dev.info().multiprocessors),
                "gemm_split8" => GemmKernel::blocked_split(d, d, d, 8, 2).ok_or("gemm_split8 needs n % 128 == 0")?,
                "gemm_split16" => GemmKernel::blocked_split(d, d, d, 16, 2).ok_or("gemm_split16 needs n % 128 == 0")?,
                "gemm_blocked8" => GemmKernel::blocked_bk(d, d, d, 8).ok_or("gemm_blocked8 needs n % 128 == 0")?,
                "gemm_blocked16" => GemmKernel::blocked_bk(d, d, d, 16).ok_or("gemm_blocked16 needs n % 128 == 0")?,
                "gemm_tiled" => GemmKernel::tiled(d, d, d, 32),
                "gemm_tf32" => GemmKernel::tensor_core(d, d, d),
                "gemm_tf32_bk8" => GemmKernel::tensor_core_bk(d, d, d, 8).ok_or("gemm_tf32_bk8 needs n % 128 == 0")?,
                _ => GemmKernel::naive(d, d, d),
            };
            let (a, b) = (up(n * n, 1)?, up(n * n, 2)?);
            let mut c = dev.zeros(n * n).map_err(err)?;
            let ms = device_ms(dev, plan, || dev.gemm_with(g, &a, &b, &mut c))?;
            let note = format!("resident {}", g.name().split('_').nth(1).unwrap_or(""));
            rows.push(row(op, n, Some((n, n, n)), ms, None, Some(g.flops()), &note));
        }
        o if o.starts_with("wgmma") => {
            // Hopper's tensor cores: C = A·Bᵀ, n×n 2-byte operands, f32 C
            use rayo::cuda::WgmmaType;
            let ty = if o.contains("bf16") {
                WgmmaType::BF16
            } else if o.contains("tf32") {
                WgmmaType::TF32
            } else {
                WgmmaType::F16
            };
            let bn = if o.ends_with("n128") { 128 } else { 256 };
            let bits = |seed: u64| -> Vec<u8> {
                random(n * n, seed)
                    .iter()
                    .flat_map(|&v| match ty {
                        WgmmaType::BF16 => half::bf16::from_f32(v).to_bits().to_le_bytes().to_vec(),
                        WgmmaType::F16 => half::f16::from_f32(v).to_bits().to_le_bytes().to_vec(),
                        WgmmaType::TF32 => v.to_le_bytes().to_vec(),
                    })
                    .collect()
            };
            let (a, b) = (dev.upload_bytes(&bits(1)).map_err(err)?, dev.upload_bytes(&bits(2)).map_err(err)?);
            let mut c = dev.zeros(n * n).map_err(err)?;
            let kern = rayo::cuda::WgmmaGemmKernel::new(ty, bn).ok_or("no such tile width")?;
            // `_t`: tiles of 256 × 128 (cuBLAS's shape)
            let kern = if (o.ends_with("_t") || o.contains("_t_")) && ty != WgmmaType::TF32 { rayo::cuda::WgmmaGemmKernel::tall(ty) } else { kern };
            // `_c2`: clusters of two blocks sharing B's slices by TMA multicast
            let kern = if o.ends_with("_c2") { kern.clustered() } else { kern };
            // `_h`: C in the operands' type, as cuBLAS writes it
            let ms = match kern.narrow_c().filter(|_| o.ends_with("_h")) {
                Some(narrow) => {
                    let mut ch = dev.zero_bytes(2 * n * n).map_err(err)?;
                    device_ms(dev, plan, || dev.gemm_wgmma_narrow(narrow, &a, &b, (n, n, n), &mut ch))?
                }
                None => device_ms(dev, plan, || dev.gemm_wgmma_with(kern, &a, &b, (n, n, n), &mut c))?,
            };
            let flops = 2.0 * (n as f64).powi(3);
            rows.push(row(
                op,
                n,
                Some((n, n, n)),
                ms,
                None,
                Some(flops),
                &format!("resident {}x{} cluster {}", kern.bm(), kern.bn(), kern.cluster()),
            ));
        }
        o if o.starts_with("flash") => {
            // Hopper's flash attention: batch 4, 32 heads of n positions, head dim 128 (64)
            use rayo::cuda::{FlashShape, WgmmaType};
            let ty = if o.contains("bf16") { WgmmaType::BF16 } else { WgmmaType::F16 };
            let head_dim = if o.ends_with("hd64") { 64 } else { 128 };
            let causal = o.contains("causal");
            let shape = FlashShape { batch: 4, heads: 32, kv_heads: 32, n, head_dim };
            let len = shape.q_len().ok_or("shape overflows")?;
            let bits: Vec<u8> = random(len, 3)
                .iter()
                .flat_map(|&v| if ty == WgmmaType::BF16 { half::bf16::from_f32(v).to_bits() } else { half::f16::from_f32(v).to_bits() }.to_le_bytes())
                .collect();
            let (q, k, v) = (dev.upload_bytes(&bits).map_err(err)?, dev.upload_bytes(&bits).map_err(err)?, dev.upload_bytes(&bits).map_err(err)?);
            let mut out = dev.zero_bytes(2 * len).map_err(err)?;
            let scale = 1.0 / (head_dim as f32).sqrt();
            let ms = device_ms(dev, plan, || dev.attention_wgmma(ty, &q, &k, &v, shape, causal, scale, &mut out))?;
            let kern = rayo::cuda::WgmmaAttentionKernel::new(ty, head_dim as u32, causal).ok_or("no such kernel")?;
            let flops = kern.flops(4, 32, n as u32);
            rows.push(row(op, n, None, ms, None, Some(flops), &format!("resident 4x32x{n}x{head_dim}")));
        }
        o if expr_for(o).is_some() => {
            let e = expr_for(o).ok_or("no expression")?;
            let ins: Vec<DeviceBuffer> = (0..e.arity()).map(|i| up(n, 10 + i as u64)).collect::<Result<_, _>>()?;
            let refs: Vec<&DeviceBuffer> = ins.iter().collect();
            let mut out = dev.zeros(n).map_err(err)?;
            let ms = device_ms(dev, plan, || dev.elementwise(&e, &refs, &mut out))?;
            let bytes = (e.arity() + 1) as f64 * 4.0 * n as f64;
            rows.push(row(op, n, None, ms, Some(bytes), None, "resident"));
        }
        o if ReduceOp::from_name(o).is_some() => {
            let rop = ReduceOp::from_name(o).ok_or("no reduction")?;
            let x = up(n, 20)?;
            let y = if rop == ReduceOp::Dot { Some(up(n, 21)?) } else { None };
            let ms = device_ms(dev, plan, || dev.reduce_device(rop, &x, y.as_ref()).map(|_| ()))?;
            let bytes = if y.is_some() { 8.0 } else { 4.0 } * n as f64;
            rows.push(row(op, n, None, ms, Some(bytes), None, "resident"));
        }
        "softmax" | "log_softmax" | "layernorm" | "rmsnorm" => {
            let r = (n / COLS).max(1);
            let x = up(r * COLS, 30)?;
            let g = up(COLS, 31)?;
            let b = up(COLS, 32)?;
            let mut out = dev.zeros(r * COLS).map_err(err)?;
            let ms = device_ms(dev, plan, || match op {
                "softmax" => dev.softmax_rows(&x, r, COLS, &mut out),
                "log_softmax" => dev.log_softmax_rows(&x, r, COLS, &mut out),
                "layernorm" => dev.layernorm(&x, &g, &b, r, COLS, 1e-5, &mut out),
                _ => dev.rmsnorm(&x, &g, r, COLS, 1e-5, &mut out),
            })?;
            rows.push(row(op, r * COLS, Some((r, COLS, 0)), ms, Some(8.0 * (r * COLS) as f64), None, "resident"));
        }
        "roundtrip_add" => {
            let (xs, ys) = (random(n, 40), random(n, 41));
            let mut host = vec![0.0f32; n];
            let e = Expr::input(0).add(Expr::input(1));
            let mut once = || -> rayo::Result<()> {
                let x = dev.upload(&xs)?;
                let y = dev.upload(&ys)?;
                let mut o = dev.zeros(n)?;
                dev.elementwise(&e, &[&x, &y], &mut o)?;
                dev.download_into(&o, &mut host)
            };
            once().map_err(err)?;
            let mut v = vec![];
            for _ in 0..plan.samples.max(5) * 40 {
                let t = Instant::now();
                once().map_err(err)?;
                v.push(t.elapsed().as_secs_f64() * 1e3);
            }
            v.sort_by(|a, b| a.total_cmp(b));
            rows.push(row(op, n, None, v[v.len() / 2], Some(12.0 * n as f64), None, "roundtrip upload+add+download"));
        }
        "roundtrip_matmul" => {
            // What Matrix::matmul pays when it offloads an n×n product: upload, GEMM, download.
            let (a, b) = (random(n * n, 60), random(n * n, 61));
            let mut host = vec![0.0f32; n * n];
            let mut once = || -> rayo::Result<()> {
                let (da, db) = (dev.upload(&a)?, dev.upload(&b)?);
                let mut dc = dev.zeros(n * n)?;
                dev.gemm(&da, &db, &mut dc, n, n, n)?;
                dev.download_into(&dc, &mut host)
            };
            once().map_err(err)?;
            let mut v = vec![];
            for _ in 0..plan.samples.max(5) * 8 {
                let t = Instant::now();
                once().map_err(err)?;
                v.push(t.elapsed().as_secs_f64() * 1e3);
            }
            v.sort_by(|a, b| a.total_cmp(b));
            let flops = 2.0 * (n as f64).powi(3);
            rows.push(row(op, n, Some((n, n, n)), v[v.len() / 2], None, Some(flops), "roundtrip upload+gemm+download"));
        }
        "graph_chain" => {
            // 20 dependent element-wise launches on n floats: eager launches vs one graph replay
            let half = Expr::input(0).scale(0.5).add(Expr::input(0));
            let sig = Expr::input(0).sigmoid();
            let (x, mut y) = (up(n, 50)?, dev.zeros(n).map_err(err)?);
            let mut x2 = up(n, 51)?;
            let ms = device_ms(dev, plan, || {
                for _ in 0..10 {
                    dev.elementwise(&half, &[&x2], &mut y)?;
                    dev.elementwise(&sig, &[&y], &mut x2)?;
                }
                Ok(())
            })?;
            rows.push(row(op, n, None, ms, None, None, "eager 20 launches"));
            let mut g = dev.graph();
            let gx = g.buffer(x).map_err(err)?;
            let gy = g.buffer(y).map_err(err)?;
            for _ in 0..10 {
                g.elementwise(&half, &[gx], gy).map_err(err)?;
                g.elementwise(&sig, &[gy], gx).map_err(err)?;
            }
            let graph = g.build().map_err(err)?;
            let ms = device_ms(dev, plan, || graph.replay())?;
            rows.push(row(op, n, None, ms, None, None, "graph replay 20 launches"));
        }
        "transfer" => {
            // host -> device and back: from a Vec (pageable) and from pinned buffers
            let data = random(n, 60);
            let mut d = dev.zeros(n).map_err(err)?;
            let mut host = vec![0.0f32; n];
            let host_ms = |f: &mut dyn FnMut() -> rayo::Result<()>| -> Result<f64, String> {
                f().map_err(err)?;
                let mut v: Vec<f64> = (0..plan.samples.max(5))
                    .map(|_| {
                        let t = Instant::now();
                        f().map(|()| t.elapsed().as_secs_f64() * 1e3)
                    })
                    .collect::<rayo::Result<_>>()
                    .map_err(err)?;
                v.sort_by(|a, b| a.total_cmp(b));
                Ok(v[v.len() / 2])
            };
            let bytes = Some(4.0 * n as f64);
            let ms = host_ms(&mut || dev.write(&mut d, &data).and_then(|()| dev.synchronize()))?;
            rows.push(row(op, n, None, ms, bytes, None, "h2d pageable"));
            let ms = host_ms(&mut || dev.download_into(&d, &mut host))?;
            rows.push(row(op, n, None, ms, bytes, None, "d2h pageable"));
            let mut p = dev.alloc_pinned(n).map_err(err)?;
            p.as_mut_slice().map_err(err)?.copy_from_slice(&data);
            let ms = host_ms(&mut || dev.write_pinned(&mut d, &p).and_then(|()| dev.synchronize()))?;
            rows.push(row(op, n, None, ms, bytes, None, "h2d pinned"));
            let ms = host_ms(&mut || dev.download_pinned(&d, &mut p))?;
            rows.push(row(op, n, None, ms, bytes, None, "d2h pinned"));
        }
        "ptxgen" => {
            let t = Instant::now();
            let mut k = 0usize;
            let mut bytes = 0usize;
            while t.elapsed().as_millis() < 300 {
                bytes += GemmKernel::tiled(1024, 1024, 1024 + (k % 7) as u32, 32).emit_ptx().len();
                k += 1;
            }
            let per = t.elapsed().as_secs_f64() * 1e3 / k as f64;
            let mut r = row(op, k, None, per, Some(bytes as f64 / k as f64), None, "tiled GEMM PTX text, CPU");
            r.gbps = None;
            r.backend = "cpu".into();
            rows.push(r);
        }
        _ => return Err(format!("unknown cuda op {op}")),
    }
    Ok(rows)
}
