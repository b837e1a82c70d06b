//! [`GpuCommandBatch`]: record uploads and ops, then `execute` encodes everything into one
//! command buffer and submits once. Runs of consecutive element-wise ops are fused into one
//! generated kernel that writes only the values needed later; intermediates come from the pool;
//! only what `read` asks for is copied back.

use super::buffer::{check_reduce_args, check_softmax_shape, softmax_name};
use super::device::GpuDevice;
use super::elementwise::{encode_chain, BinaryOp, Chain, Src, Step, UnaryOp, MAX_PARAMS};
use super::encoder::{Encoder, Span};
use super::kernels::{encode_matmul, encode_reduce, encode_softmax};
use super::pool::Pooled;
use super::readback::submit_and_read;
use crate::ops::ReduceOp;
use crate::{Error, Result};
use std::collections::HashMap;

/// A value recorded in a [`GpuCommandBatch`]. It names the batch that issued it: using it with
/// any other batch is [`Error::ForeignBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId {
    batch: u64,
    index: usize,
}

impl BufferId {
    /// The [`GpuCommandBatch::id`] of the batch that issued this id.
    pub fn batch(&self) -> u64 {
        self.batch
    }
}

#[derive(Clone, Debug)]
enum Kind {
    Upload(Vec<f32>),
    Unary(UnaryOp, usize),
    Binary(BinaryOp, usize, usize),
    Reduce(ReduceOp, usize, Option<usize>),
    /// x, rows, cols, log
    Softmax(usize, usize, usize, bool),
    Matmul(usize, usize, [usize; 3]),
}

impl Kind {
    fn is_elementwise(&self) -> bool {
        matches!(self, Kind::Unary(..) | Kind::Binary(..))
    }
    fn operands(&self) -> Vec<usize> {
        match *self {
            Kind::Upload(_) => vec![],
            Kind::Unary(_, a) | Kind::Reduce(_, a, None) | Kind::Softmax(a, ..) => vec![a],
            Kind::Binary(_, a, b) | Kind::Reduce(_, a, Some(b)) | Kind::Matmul(a, b, _) => vec![a, b],
        }
    }
}

/// A fused group: the chain over its external inputs, and which node each step is.
#[derive(Clone, Debug)]
struct Group {
    inputs: Vec<usize>,
    nodes: Vec<usize>,
    chain: Chain,
    len: usize,
}

/// What `execute` did (for tests and tuning).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Element-wise kernels dispatched (a fused run counts once).
    pub elementwise_kernels: usize,
    /// Element-wise ops recorded.
    pub elementwise_ops: usize,
    /// Command buffers submitted by the last `execute`.
    pub submits: usize,
}

/// Queue work, run it with one submit, read what you need. See the module docs.
///
/// Recording methods return a [`BufferId`] at once and never fail: the first recording error
/// (a length mismatch, an id from another batch, ...) is kept and returned by
/// [`Self::execute`] (and by [`Self::read`] of any value, since nothing has run).
pub struct GpuCommandBatch {
    id: u64,
    device: GpuDevice,
    nodes: Vec<(Kind, usize)>,
    error: Option<Error>,
    fuse: bool,
    values: HashMap<usize, Pooled>,
    /// Fused-away nodes: (group, step index), recomputed on `read`.
    fused_away: HashMap<usize, (usize, usize)>,
    groups: Vec<Group>,
    executed: bool,
    stats: BatchStats,
}

impl GpuCommandBatch {
    pub fn new(device: GpuDevice) -> GpuCommandBatch {
        GpuCommandBatch {
            id: super::next_owner_id(),
            device,
            nodes: Vec::new(),
            error: None,
            fuse: true,
            values: HashMap::new(),
            fused_away: HashMap::new(),
            groups: Vec::new(),
            executed: false,
            stats: BatchStats::default(),
        }
    }

    /// Turns fusion of element-wise runs on (the default) or off (one kernel per op).
    pub fn set_fusion(&mut self, on: bool) {
        self.fuse = on;
    }

    pub fn stats(&self) -> BatchStats {
        self.stats
    }

    /// This batch's process-unique number, carried by every [`BufferId`] it issues.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The node of `id`, or [`Error::ForeignBuffer`] when another batch issued it.
    fn node(&self, op: &'static str, id: BufferId) -> Result<usize> {
        if id.batch != self.id {
            return Err(Error::ForeignBuffer { op, user: self.id, owner: id.batch });
        }
        match self.nodes.get(id.index) {
            Some(_) => Ok(id.index),
            None => Err(Error::IndexOutOfBounds { index: id.index, len: self.nodes.len() }),
        }
    }

    /// The length of a recorded value; [`Error::ForeignBuffer`] for an id of another batch.
    pub fn len_of(&self, id: BufferId) -> Result<usize> {
        self.node("GpuCommandBatch::len_of", id).map(|i| self.nodes[i].1)
    }

    fn fail(&mut self, e: Error) {
        self.error.get_or_insert(e);
    }

    /// The node index and length of an operand. A foreign id is recorded as the batch's error
    /// (the node then refers to node 0, which is never run: `execute` returns the error).
    fn operand(&mut self, op: &'static str, id: BufferId) -> (usize, usize) {
        match self.node(op, id) {
            Ok(i) => (i, self.nodes[i].1),
            Err(e) => {
                self.fail(e);
                (0, 0)
            }
        }
    }

    fn push(&mut self, kind: Kind, len: usize) -> BufferId {
        self.executed = false;
        self.nodes.push((kind, len));
        BufferId { batch: self.id, index: self.nodes.len() - 1 }
    }

    /// Records an upload of `data`.
    pub fn upload(&mut self, data: &[f32]) -> BufferId {
        let len = data.len();
        let bytes = (len as u64).saturating_mul(4);
        if bytes > self.device.binding_bytes {
            self.fail(Error::BufferTooLarge { op: "GpuCommandBatch::upload", bytes, limit: self.device.binding_bytes });
        }
        self.push(Kind::Upload(data.to_vec()), len)
    }

    /// Records `op(x)`.
    pub fn unary(&mut self, op: UnaryOp, x: BufferId) -> BufferId {
        if let Err(e) = op.validate() {
            self.fail(e);
        }
        let (x, len) = self.operand(op.name(), x);
        self.push(Kind::Unary(op, x), len)
    }

    /// Records `a op b`.
    pub fn binary(&mut self, op: BinaryOp, a: BufferId, b: BufferId) -> BufferId {
        if let Err(e) = op.validate() {
            self.fail(e);
        }
        let ((a, la), (b, lb)) = (self.operand(op.name(), a), self.operand(op.name(), b));
        if la != lb {
            self.fail(Error::LengthMismatch { op: op.name(), expected: la, actual: lb });
        }
        self.push(Kind::Binary(op, a, b), la)
    }

    pub fn relu(&mut self, x: BufferId) -> BufferId {
        self.unary(UnaryOp::Relu, x)
    }
    pub fn leaky_relu(&mut self, x: BufferId, alpha: f32) -> BufferId {
        self.unary(UnaryOp::LeakyRelu(alpha), x)
    }
    pub fn elu(&mut self, x: BufferId, alpha: f32) -> BufferId {
        self.unary(UnaryOp::Elu(alpha), x)
    }
    pub fn sigmoid(&mut self, x: BufferId) -> BufferId {
        self.unary(UnaryOp::Sigmoid, x)
    }
    pub fn tanh(&mut self, x: BufferId) -> BufferId {
        self.unary(UnaryOp::Tanh, x)
    }
    pub fn swish(&mut self, x: BufferId) -> BufferId {
        self.unary(UnaryOp::Swish, x)
    }
    pub fn gelu(&mut self, x: BufferId) -> BufferId {
        self.unary(UnaryOp::Gelu, x)
    }
    pub fn clip(&mut self, x: BufferId, lo: f32, hi: f32) -> BufferId {
        self.unary(UnaryOp::Clip(lo, hi), x)
    }
    pub fn scale(&mut self, x: BufferId, s: f32) -> BufferId {
        self.unary(UnaryOp::Scale(s), x)
    }
    pub fn add(&mut self, a: BufferId, b: BufferId) -> BufferId {
        self.binary(BinaryOp::Add, a, b)
    }
    pub fn sub(&mut self, a: BufferId, b: BufferId) -> BufferId {
        self.binary(BinaryOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: BufferId, b: BufferId) -> BufferId {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// Records `op` over `x` (and `y`, for [`ReduceOp::Dot`] only) as a one-element value.
    /// Empty `x`: 0, or [`Error::EmptyInput`] for `Max`/`Min` (at `execute`).
    pub fn reduce(&mut self, op: ReduceOp, x: BufferId, y: Option<BufferId>) -> BufferId {
        let (xi, lx) = self.operand(op.name(), x);
        let y = y.map(|y| self.operand(op.name(), y));
        if let Err(e) = check_reduce_args(op, lx, y.map(|y| y.1)) {
            self.fail(e);
        }
        self.push(Kind::Reduce(op, xi, y.map(|y| y.0)), 1)
    }
    /// Σ x, as a one-element value.
    pub fn sum(&mut self, x: BufferId) -> BufferId {
        self.reduce(ReduceOp::Sum, x, None)
    }
    /// max x (NaN if any is NaN).
    pub fn max(&mut self, x: BufferId) -> BufferId {
        self.reduce(ReduceOp::Max, x, None)
    }
    /// min x (NaN if any is NaN).
    pub fn min(&mut self, x: BufferId) -> BufferId {
        self.reduce(ReduceOp::Min, x, None)
    }
    /// a · b, as a one-element value.
    pub fn dot(&mut self, a: BufferId, b: BufferId) -> BufferId {
        self.reduce(ReduceOp::Dot, a, Some(b))
    }
    /// Σ |x|.
    pub fn norm_l1(&mut self, x: BufferId) -> BufferId {
        self.reduce(ReduceOp::NormL1, x, None)
    }
    /// √(Σ x²).
    pub fn norm_l2(&mut self, x: BufferId) -> BufferId {
        self.reduce(ReduceOp::NormL2, x, None)
    }
    /// max |x| (NaN if any is NaN).
    pub fn norm_inf(&mut self, x: BufferId) -> BufferId {
        self.reduce(ReduceOp::NormInf, x, None)
    }
    fn softmax_node(&mut self, x: BufferId, rows: Option<(usize, usize)>, log: bool) -> BufferId {
        let op = softmax_name(log);
        let (xi, len) = self.operand(op, x);
        let (rows, cols) = rows.unwrap_or((1, len));
        if let Err(e) = check_softmax_shape(op, len, len, rows, cols) {
            self.fail(e);
        }
        self.push(Kind::Softmax(xi, rows, cols, log), len)
    }
    /// Softmax over the whole value.
    pub fn softmax(&mut self, x: BufferId) -> BufferId {
        self.softmax_node(x, None, false)
    }
    /// log_softmax over the whole value.
    pub fn log_softmax(&mut self, x: BufferId) -> BufferId {
        self.softmax_node(x, None, true)
    }
    /// Softmax of each row of a row-major `rows × cols` value.
    pub fn softmax_rows(&mut self, x: BufferId, rows: usize, cols: usize) -> BufferId {
        self.softmax_node(x, Some((rows, cols)), false)
    }
    /// log_softmax of each row of a row-major `rows × cols` value.
    pub fn log_softmax_rows(&mut self, x: BufferId, rows: usize, cols: usize) -> BufferId {
        self.softmax_node(x, Some((rows, cols)), true)
    }
    /// `a (m×k) · b (k×n)`.
    pub fn matmul(&mut self, a: BufferId, b: BufferId, m: usize, k: usize, n: usize) -> BufferId {
        let ((a, la), (b, lb)) = (self.operand("matmul", a), self.operand("matmul", b));
        let out = m.saturating_mul(n);
        if let Err(e) = super::buffer::check_matmul(la, lb, out, m, k, n) {
            self.fail(e);
        }
        let bytes = (out as u64).saturating_mul(4);
        if bytes > self.device.binding_bytes {
            self.fail(Error::BufferTooLarge { op: "matmul", bytes, limit: self.device.binding_bytes });
        }
        self.push(Kind::Matmul(a, b, [m, k, n]), if out == usize::MAX { 0 } else { out })
    }

    /// Splits the nodes into fused element-wise groups (consecutive, equal length, within the
    /// binding and parameter limits).
    fn plan(&self) -> Vec<Group> {
        let max_bind = (self.device.inner.limits.max_storage_buffers_per_stage as usize).clamp(3, 16);
        let mut users: Vec<Vec<usize>> = vec![vec![]; self.nodes.len()];
        for (i, (k, _)) in self.nodes.iter().enumerate() {
            for o in k.operands() {
                users[o].push(i);
            }
        }
        let mut groups: Vec<Group> = Vec::new();
        let mut cur: Option<Group> = None;
        for (i, (kind, len)) in self.nodes.iter().enumerate() {
            if !kind.is_elementwise() {
                groups.extend(cur.take());
                continue;
            }
            let start_new = match &cur {
                None => true,
                Some(g) => !self.fuse || g.len != *len || !self.fits(g, i, max_bind, &users),
            };
            if start_new {
                groups.extend(cur.take());
                cur = Some(Group { inputs: vec![], nodes: vec![], chain: Chain { n_inputs: 0, steps: vec![], outputs: vec![] }, len: *len });
            }
            let g = cur.as_mut().expect("group present");
            self.add_to_group(g, i);
        }
        groups.extend(cur);
        for g in &mut groups {
            g.chain.outputs = self.outputs_of(g, &users);
        }
        groups
    }

    fn add_to_group(&self, g: &mut Group, i: usize) {
        let src = |id: usize, g: &mut Group| -> Src {
            if let Some(j) = g.nodes.iter().position(|&n| n == id) {
                return Src::Step(j);
            }
            if let Some(k) = g.inputs.iter().position(|&n| n == id) {
                return Src::Input(k);
            }
            g.inputs.push(id);
            g.chain.n_inputs += 1;
            Src::Input(g.inputs.len() - 1)
        };
        let step = match self.nodes[i].0 {
            Kind::Unary(op, a) => Step::Unary(op, src(a, g)),
            Kind::Binary(op, a, b) => {
                let sa = src(a, g);
                Step::Binary(op, sa, src(b, g))
            }
            _ => unreachable!("only element-wise nodes join a group"),
        };
        g.nodes.push(i);
        g.chain.steps.push(step);
    }

    /// Would node `i` still fit in `g` (bindings: inputs + worst-case outputs; parameters)?
    fn fits(&self, g: &Group, i: usize, max_bind: usize, users: &[Vec<usize>]) -> bool {
        let mut trial = g.clone();
        self.add_to_group(&mut trial, i);
        let outs = self.outputs_of(&trial, users).len();
        trial.inputs.len() + outs <= max_bind && trial.chain.params().len() <= MAX_PARAMS
    }

    /// Steps whose value is needed outside the group (a later node uses it), and the last step.
    fn outputs_of(&self, g: &Group, users: &[Vec<usize>]) -> Vec<usize> {
        let last = *g.nodes.last().expect("groups are non-empty");
        g.nodes.iter().enumerate().filter(|&(_, &n)| n == last || users[n].iter().any(|u| !g.nodes.contains(u))).map(|(j, _)| j).collect()
    }

    fn span(&self, id: usize) -> Span {
        Span::whole(self.values[&id].buffer(), self.nodes[id].1)
    }

    /// Encodes every recorded node into one command buffer and submits it once.
    pub async fn execute(&mut self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.values.clear();
        self.fused_away.clear();
        self.groups = self.plan();
        let group_of_last: HashMap<usize, usize> = self.groups.iter().enumerate().map(|(gi, g)| (*g.nodes.last().expect("non-empty"), gi)).collect();
        let dev = self.device.clone();
        let mut enc = Encoder::new(&dev)?;
        let mut stats = BatchStats::default();
        for i in 0..self.nodes.len() {
            let (kind, len) = self.nodes[i].clone();
            match kind {
                Kind::Upload(data) => {
                    let p = dev.upload_pooled(&data)?;
                    self.values.insert(i, p);
                }
                Kind::Unary(..) | Kind::Binary(..) => {
                    stats.elementwise_ops += 1;
                    // A group is encoded when its last node is reached (all inputs exist).
                    let Some(&gi) = group_of_last.get(&i) else { continue };
                    let g = self.groups[gi].clone();
                    let mut outs = Vec::new();
                    for &j in &g.chain.outputs {
                        outs.push((g.nodes[j], dev.storage(g.len)?));
                    }
                    for (j, &n) in g.nodes.iter().enumerate() {
                        if !g.chain.outputs.contains(&j) {
                            self.fused_away.insert(n, (gi, j));
                        }
                    }
                    let ins: Vec<Span> = g.inputs.iter().map(|&n| self.span(n)).collect();
                    let out_spans: Vec<Span> = outs.iter().map(|(_, p)| Span::whole(p.buffer(), g.len)).collect();
                    let ir: Vec<&Span> = ins.iter().collect();
                    let or: Vec<&Span> = out_spans.iter().collect();
                    encode_chain(&mut enc, &g.chain, &ir, &or, g.len).await?;
                    stats.elementwise_kernels += 1;
                    for (n, p) in outs {
                        self.values.insert(n, p);
                    }
                }
                Kind::Reduce(op, a, b) => {
                    let p = dev.storage(1)?;
                    let out = Span::whole(p.buffer(), 1);
                    if self.nodes[a].1 == 0 {
                        enc.enc.clear_buffer(p.buffer(), 0, Some(4));
                    } else {
                        let ys = b.map(|b| self.span(b));
                        encode_reduce(&mut enc, op, &self.span(a), ys.as_ref(), &out, 0).await?;
                    }
                    self.values.insert(i, p);
                }
                Kind::Softmax(a, rows, cols, log) => {
                    let p = dev.storage(len)?;
                    encode_softmax(&mut enc, &self.span(a), &Span::whole(p.buffer(), len), rows, cols, log).await?;
                    self.values.insert(i, p);
                }
                Kind::Matmul(a, b, [m, k, n]) => {
                    let p = dev.storage(len)?;
                    encode_matmul(&mut enc, &self.span(a), &self.span(b), &Span::whole(p.buffer(), len), m, k, n).await?;
                    self.values.insert(i, p);
                }
            }
        }
        enc.submit()?;
        stats.submits = 1;
        self.stats = stats;
        self.executed = true;
        Ok(())
    }

    /// Copies a value back to the host. A value fused away inside a kernel is recomputed from
    /// its group's inputs (one more small submit).
    pub async fn read(&self, id: BufferId) -> Result<Vec<f32>> {
        let node = self.node("GpuCommandBatch::read", id)?;
        let len = self.nodes[node].1;
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if !self.executed {
            return Err(Error::InvalidArgument {
                op: "GpuCommandBatch::read",
                name: "id",
                value: node.into(),
                reason: "execute() has not run since this value was recorded",
            });
        }
        let mut out = vec![0.0; len];
        let mut enc = Encoder::new(&self.device)?;
        if let Some(p) = self.values.get(&node) {
            submit_and_read(enc, &Span::whole(p.buffer(), len), &mut out).await?;
            return Ok(out);
        }
        let &(gi, j) = self.fused_away.get(&node).ok_or(Error::IndexOutOfBounds { index: node, len: self.nodes.len() })?;
        let g = &self.groups[gi];
        let mut chain = g.chain.clone();
        chain.steps.truncate(j + 1);
        chain.outputs = vec![j];
        let ins: Vec<Span> = g.inputs.iter().map(|&n| self.span(n)).collect();
        // Inputs no longer used by the truncated chain must not be bound: keep the used ones.
        let used: Vec<usize> = (0..ins.len())
            .filter(|&k| {
                chain.steps.iter().any(|s| {
                    matches!(s, Step::Unary(_, Src::Input(x)) if *x == k)
                        || matches!(s, Step::Binary(_, a, b) if *a == Src::Input(k) || *b == Src::Input(k))
                })
            })
            .collect();
        let remap: HashMap<usize, usize> = used.iter().enumerate().map(|(new, &old)| (old, new)).collect();
        let fix = |s: Src| match s {
            Src::Input(k) => Src::Input(remap[&k]),
            other => other,
        };
        for s in &mut chain.steps {
            *s = match *s {
                Step::Unary(op, a) => Step::Unary(op, fix(a)),
                Step::Binary(op, a, b) => Step::Binary(op, fix(a), fix(b)),
            };
        }
        chain.n_inputs = used.len();
        let ir: Vec<&Span> = used.iter().map(|&k| &ins[k]).collect();
        let o = enc.temp(len)?;
        encode_chain(&mut enc, &chain, &ir, &[&o], len).await?;
        submit_and_read(enc, &o, &mut out).await?;
        Ok(out)
    }

    /// Native: [`Self::execute`] blocking.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn execute_blocking(&mut self) -> Result<()> {
        pollster::block_on(self.execute())
    }

    /// Native: [`Self::read`] blocking.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_blocking(&self, id: BufferId) -> Result<Vec<f32>> {
        pollster::block_on(self.read(id))
    }
}
