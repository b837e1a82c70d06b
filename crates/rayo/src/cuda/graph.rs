//! CUDA graphs for chains of small launches: the graph owns its buffers, records a list of ops,
//! captures them once, and replays the whole chain with one driver call.
//!
//! ```no_run
//! use rayo::cuda::{CudaDevice, Expr};
//! let dev = CudaDevice::new()?;
//! let mut g = dev.graph();
//! let x = g.buffer(dev.upload(&[1.0; 1024])?)?;
//! let y = g.buffer(dev.zeros(1024)?)?;
//! for _ in 0..10 {
//!     g.elementwise(&Expr::input(0).scale(0.5).add(Expr::input(0)), &[x], y)?;
//!     g.elementwise(&Expr::input(0).sigmoid(), &[y], x)?;
//! }
//! let mut graph = g.build()?;      // runs the chain once, then captures it
//! graph.write(x, &[2.0; 1024])?;
//! graph.replay()?;                 // 20 launches, one call
//! let out = graph.download(x)?;
//! # Ok::<(), rayo::Error>(())
//! ```

use super::buffer::DeviceBuffer;
use super::device::CudaDevice;
use super::ffi::drv;
use super::Expr;
use crate::error::{Error, Result};
use rayo_ptx::kernels::GemmKernel;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT_GRAPH: AtomicU32 = AtomicU32::new(1);

/// A buffer owned by a graph (or by the builder of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufId {
    graph: u32,
    index: usize,
}

#[derive(Debug, Clone)]
enum Step {
    Elementwise { expr: Expr, ins: Vec<BufId>, out: BufId },
    Softmax { x: BufId, rows: usize, cols: usize, log: bool, out: BufId },
    RmsNorm { x: BufId, gamma: BufId, rows: usize, cols: usize, eps: f32, out: BufId },
    LayerNorm { x: BufId, gamma: BufId, beta: BufId, rows: usize, cols: usize, eps: f32, out: BufId },
    Gemm { kernel: GemmKernel, a: BufId, b: BufId, c: BufId },
}

impl Step {
    fn output(&self) -> BufId {
        match self {
            Step::Elementwise { out, .. } | Step::Softmax { out, .. } | Step::RmsNorm { out, .. } | Step::LayerNorm { out, .. } => *out,
            Step::Gemm { c, .. } => *c,
        }
    }
    fn inputs(&self) -> Vec<BufId> {
        match self {
            Step::Elementwise { ins, .. } => ins.clone(),
            Step::Softmax { x, .. } => vec![*x],
            Step::RmsNorm { x, gamma, .. } => vec![*x, *gamma],
            Step::LayerNorm { x, gamma, beta, .. } => vec![*x, *gamma, *beta],
            Step::Gemm { a, b, .. } => vec![*a, *b],
        }
    }
}

/// Records ops on owned buffers; [`GraphBuilder::build`] turns them into a [`CudaGraph`].
pub struct GraphBuilder<'d> {
    dev: &'d CudaDevice,
    id: u32,
    bufs: Vec<Option<DeviceBuffer>>,
    steps: Vec<Step>,
}

/// A captured chain of launches and the buffers it runs on.
pub struct CudaGraph<'d> {
    dev: &'d CudaDevice,
    id: u32,
    bufs: Vec<Option<DeviceBuffer>>,
    steps: usize,
    graph: cudarc::driver::CudaGraph,
}

const OP: &str = "cuda graph";

/// The index of `b` in a graph with id `graph` and `len` buffers; an id of another graph is
/// [`Error::ForeignBuffer`] with both graph ids.
fn check_id(graph: u32, len: usize, b: BufId) -> Result<usize> {
    if b.graph != graph {
        return Err(Error::ForeignBuffer { op: OP, owner: b.graph as u64, user: graph as u64 });
    }
    if b.index >= len {
        return Err(Error::IndexOutOfBounds { index: b.index, len });
    }
    Ok(b.index)
}

/// Runs one step on the graph's buffers (the output is taken out while the inputs are borrowed).
fn run(dev: &CudaDevice, bufs: &mut [Option<DeviceBuffer>], step: &Step) -> Result<()> {
    let oi = step.output().index;
    let mut out = bufs[oi].take().ok_or(Error::InvalidArgument { op: OP, name: "buffer", value: oi.into(), reason: "missing" })?;
    let result = (|| {
        let ins: Vec<&DeviceBuffer> = step
            .inputs()
            .iter()
            .map(|b| {
                bufs[b.index].as_ref().ok_or(Error::InvalidArgument {
                    op: OP,
                    name: "buffer",
                    value: b.index.into(),
                    reason: "an op reads the buffer it writes",
                })
            })
            .collect::<Result<_>>()?;
        match step {
            Step::Elementwise { expr, .. } => dev.elementwise(expr, &ins, &mut out),
            Step::Softmax { rows, cols, log: false, .. } => dev.softmax_rows(ins[0], *rows, *cols, &mut out),
            Step::Softmax { rows, cols, log: true, .. } => dev.log_softmax_rows(ins[0], *rows, *cols, &mut out),
            Step::RmsNorm { rows, cols, eps, .. } => dev.rmsnorm(ins[0], ins[1], *rows, *cols, *eps, &mut out),
            Step::LayerNorm { rows, cols, eps, .. } => dev.layernorm(ins[0], ins[1], ins[2], *rows, *cols, *eps, &mut out),
            Step::Gemm { kernel, .. } => dev.gemm_with(*kernel, ins[0], ins[1], &mut out),
        }
    })();
    bufs[oi] = Some(out);
    result
}

impl CudaDevice {
    /// Starts recording a graph.
    pub fn graph(&self) -> GraphBuilder<'_> {
        GraphBuilder { dev: self, id: NEXT_GRAPH.fetch_add(1, Ordering::Relaxed), bufs: vec![], steps: vec![] }
    }
}

impl<'d> GraphBuilder<'d> {
    /// Moves a buffer into the graph; a buffer of another device is [`Error::ForeignBuffer`].
    pub fn buffer(&mut self, b: DeviceBuffer) -> Result<BufId> {
        self.dev.owns(OP, &[&b])?;
        self.bufs.push(Some(b));
        Ok(BufId { graph: self.id, index: self.bufs.len() - 1 })
    }

    fn push(&mut self, step: Step) -> Result<&mut Self> {
        let out = check_id(self.id, self.bufs.len(), step.output())?;
        for b in step.inputs() {
            if check_id(self.id, self.bufs.len(), b)? == out {
                return Err(Error::InvalidArgument { op: OP, name: "buffer", value: out.into(), reason: "an op reads the buffer it writes" });
            }
        }
        self.steps.push(step);
        Ok(self)
    }

    pub fn elementwise(&mut self, expr: &Expr, ins: &[BufId], out: BufId) -> Result<&mut Self> {
        self.push(Step::Elementwise { expr: expr.clone(), ins: ins.to_vec(), out })
    }
    /// Softmax of each row (see [`CudaDevice::softmax_rows`]).
    pub fn softmax_rows(&mut self, x: BufId, rows: usize, cols: usize, out: BufId) -> Result<&mut Self> {
        self.push(Step::Softmax { x, rows, cols, log: false, out })
    }
    /// Log-softmax of each row (see [`CudaDevice::log_softmax_rows`]).
    pub fn log_softmax_rows(&mut self, x: BufId, rows: usize, cols: usize, out: BufId) -> Result<&mut Self> {
        self.push(Step::Softmax { x, rows, cols, log: true, out })
    }
    pub fn rmsnorm(&mut self, x: BufId, gamma: BufId, rows: usize, cols: usize, eps: f32, out: BufId) -> Result<&mut Self> {
        self.push(Step::RmsNorm { x, gamma, rows, cols, eps, out })
    }
    #[allow(clippy::too_many_arguments)]
    pub fn layernorm(&mut self, x: BufId, gamma: BufId, beta: BufId, rows: usize, cols: usize, eps: f32, out: BufId) -> Result<&mut Self> {
        self.push(Step::LayerNorm { x, gamma, beta, rows, cols, eps, out })
    }
    /// `c = a · b` (`m×k` times `k×n`) with the kernel [`CudaDevice::gemm`] would pick.
    pub fn gemm(&mut self, a: BufId, b: BufId, c: BufId, m: usize, k: usize, n: usize) -> Result<&mut Self> {
        let dim = |d: usize| {
            u32::try_from(d).map_err(|_| Error::BufferTooLarge { op: OP, bytes: (d as u64).saturating_mul(4), limit: u32::MAX as u64 * 4 })
        };
        let kernel = GemmKernel::for_device(dim(m)?, dim(k)?, dim(n)?, self.dev.info().multiprocessors);
        self.push(Step::Gemm { kernel, a, b, c })
    }

    /// Runs the chain once (loading every kernel and checking every size), then captures it.
    /// While it captures, the device's stream records instead of running: work queued on the
    /// same device from another thread meanwhile fails with a driver error (build graphs on a
    /// device value of their own when other threads use one).
    pub fn build(mut self) -> Result<CudaGraph<'d>> {
        let dev = self.dev;
        if self.steps.is_empty() {
            return Err(Error::EmptyInput { op: OP });
        }
        for s in &self.steps {
            run(dev, &mut self.bufs, s)?;
        }
        dev.synchronize()?;
        dev.begin_capture()?;
        let recorded = self.steps.iter().try_for_each(|s| run(dev, &mut self.bufs, s));
        let ended = dev.end_capture();
        recorded?;
        Ok(CudaGraph { dev, id: self.id, bufs: self.bufs, steps: self.steps.len(), graph: ended?.graph })
    }
}

impl CudaGraph<'_> {
    /// Queues the whole chain (one driver call). Work is asynchronous: read results with
    /// [`CudaGraph::download`], which waits.
    pub fn replay(&self) -> Result<()> {
        self.graph.launch().map_err(drv)
    }

    /// Number of recorded ops.
    pub fn len(&self) -> usize {
        self.steps
    }

    pub fn is_empty(&self) -> bool {
        self.steps == 0
    }

    /// Overwrites one of the graph's buffers (same length).
    pub fn write(&mut self, b: BufId, data: &[f32]) -> Result<()> {
        let i = check_id(self.id, self.bufs.len(), b)?;
        match self.bufs[i].as_mut() {
            Some(buf) => self.dev.write(buf, data),
            None => Err(Error::InvalidArgument { op: OP, name: "buffer", value: i.into(), reason: "missing" }),
        }
    }

    /// Copies one of the graph's buffers to the host (waits for queued replays).
    pub fn download(&self, b: BufId) -> Result<Vec<f32>> {
        let i = check_id(self.id, self.bufs.len(), b)?;
        match self.bufs[i].as_ref() {
            Some(buf) => self.dev.download(buf),
            None => Err(Error::InvalidArgument { op: OP, name: "buffer", value: i.into(), reason: "missing" }),
        }
    }
}
