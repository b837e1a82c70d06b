//! Element-wise ops and their WGSL generator. A single op and a fused chain of ops are the same
//! thing here: a [`Chain`] of steps over input buffers, compiled into one kernel that reads each
//! input once and writes only the requested outputs. Parameter values (alpha, bounds, scale)
//! travel in the uniform block, so a kernel's source, and its cached pipeline, depend only on
//! the shape of the chain.

use super::encoder::{grid_1d, Encoder, Meta, Span};
use crate::{Error, Result};
use std::fmt::Write;

const FNS: &str = include_str!("shaders/elementwise_fns.wgsl");

/// Parameters one generated kernel can carry.
pub(crate) const MAX_PARAMS: usize = 16;

/// An element-wise function of one input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    Relu,
    LeakyRelu(f32),
    Elu(f32),
    Sigmoid,
    Tanh,
    Swish,
    Gelu,
    /// `clamp(x, lo, hi)`; `lo <= hi` required.
    Clip(f32, f32),
    /// `x * s`.
    Scale(f32),
}

/// An element-wise function of two inputs of equal length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
}

impl UnaryOp {
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Relu => "relu",
            UnaryOp::LeakyRelu(_) => "leaky_relu",
            UnaryOp::Elu(_) => "elu",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Swish => "swish",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Clip(..) => "clip",
            UnaryOp::Scale(_) => "scale",
        }
    }

    fn params(self) -> Vec<f32> {
        match self {
            UnaryOp::LeakyRelu(a) | UnaryOp::Elu(a) | UnaryOp::Scale(a) => vec![a],
            UnaryOp::Clip(lo, hi) => vec![lo, hi],
            _ => vec![],
        }
    }

    /// Rejects parameters the op is undefined for.
    pub(crate) fn validate(self) -> Result<()> {
        let bad = |name, value: f32, reason| Err(Error::InvalidParameter { op: self.name(), name, value: value as f64, reason });
        match self {
            UnaryOp::Clip(lo, _) if lo.is_nan() => bad("min", lo, "NaN"),
            UnaryOp::Clip(_, hi) if hi.is_nan() => bad("max", hi, "NaN"),
            UnaryOp::Clip(lo, hi) if lo > hi => bad("min", lo, "greater than max"),
            UnaryOp::LeakyRelu(a) | UnaryOp::Elu(a) if !a.is_finite() => bad("alpha", a, "not finite"),
            _ => Ok(()),
        }
    }

    /// WGSL for the op applied to `x`, parameters starting at slot `p`.
    fn wgsl(self, x: &str, p: usize) -> String {
        let pa = |k: usize| format!("prm.p[{}][{}]", k / 4, k % 4);
        match self {
            UnaryOp::Relu => format!("op_relu({x})"),
            UnaryOp::LeakyRelu(_) => format!("op_leaky_relu({x}, {})", pa(p)),
            UnaryOp::Elu(_) => format!("op_elu({x}, {})", pa(p)),
            UnaryOp::Sigmoid => format!("op_sigmoid({x})"),
            UnaryOp::Tanh => format!("op_tanh({x})"),
            UnaryOp::Swish => format!("op_swish({x})"),
            UnaryOp::Gelu => format!("op_gelu({x})"),
            UnaryOp::Clip(..) => format!("clamp({x}, T({}), T({}))", pa(p), pa(p + 1)),
            UnaryOp::Scale(_) => format!("({x} * {})", pa(p)),
        }
    }
}

impl BinaryOp {
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "vec_add",
            BinaryOp::Sub => "vec_sub",
            BinaryOp::Mul => "vec_mul",
        }
    }
    fn wgsl(self, a: &str, b: &str) -> String {
        let o = match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
        };
        format!("({a} {o} {b})")
    }
}

/// Where a step reads a value: a kernel input or an earlier step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Input(usize),
    Step(usize),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Step {
    Unary(UnaryOp, Src),
    Binary(BinaryOp, Src, Src),
}

/// Steps over `n_inputs` input buffers; `outputs` are the steps whose values are written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Chain {
    pub n_inputs: usize,
    pub steps: Vec<Step>,
    pub outputs: Vec<usize>,
}

impl Chain {
    pub fn unary(op: UnaryOp) -> Chain {
        Chain { n_inputs: 1, steps: vec![Step::Unary(op, Src::Input(0))], outputs: vec![0] }
    }
    pub fn binary(op: BinaryOp) -> Chain {
        Chain { n_inputs: 2, steps: vec![Step::Binary(op, Src::Input(0), Src::Input(1))], outputs: vec![0] }
    }

    pub fn params(&self) -> Vec<f32> {
        self.steps
            .iter()
            .flat_map(|s| match s {
                Step::Unary(op, _) => op.params(),
                Step::Binary(..) => vec![],
            })
            .collect()
    }

    /// What the generated source depends on (op kinds and wiring, not parameter values): the
    /// pipeline-cache key, so the source is generated only once per shape of chain.
    pub fn signature(&self, vec4: bool, per_thread: u32) -> String {
        let mut s = format!("ew{}x{per_thread}:{}:", if vec4 { 4 } else { 1 }, self.n_inputs);
        for st in &self.steps {
            let _ = match *st {
                Step::Unary(op, a) => write!(s, "{}({a:?});", op.name()),
                Step::Binary(op, a, b) => write!(s, "{}({a:?},{b:?});", op.name()),
            };
        }
        let _ = write!(s, "out{:?}", self.outputs);
        s
    }

    /// The generated WGSL kernel; `vec4`: each item is 4 consecutive elements; each invocation
    /// handles `per_thread` items, `prm.total` apart (all loads first, then all stores).
    pub fn wgsl(&self, vec4: bool, per_thread: u32) -> String {
        let mut s = String::with_capacity(FNS.len() + 1024);
        s.push_str(if vec4 { "alias T = vec4<f32>;\n" } else { "alias T = f32;\n" });
        s.push_str(
            "struct Meta { n: u32, stride: u32, total: u32, u3: u32, u4: u32, u5: u32, u6: u32, u7: u32, \
             p: array<vec4<f32>, 4>, }\n@group(0) @binding(0) var<uniform> prm: Meta;\n",
        );
        for i in 0..self.n_inputs {
            let _ = writeln!(s, "@group(0) @binding({}) var<storage, read> in{i}: array<T>;", i + 1);
        }
        for (o, _) in self.outputs.iter().enumerate() {
            let _ = writeln!(s, "@group(0) @binding({}) var<storage, read_write> out{o}: array<T>;", self.n_inputs + o + 1);
        }
        s.push_str(FNS);
        s.push_str(
            "\n@compute @workgroup_size(256)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n    \
             let i0 = gid.x + gid.y * prm.stride;\n",
        );
        let name = |src: Src, u: u32| match src {
            Src::Input(i) => format!("x{i}_{u}"),
            Src::Step(j) => format!("t{j}_{u}"),
        };
        for u in 0..per_thread {
            let _ = writeln!(s, "    let i_{u} = i0 + {u}u * prm.total;\n    let ok_{u} = i_{u} < prm.n;");
            for i in 0..self.n_inputs {
                let _ = writeln!(s, "    var x{i}_{u}: T = T(0.0);\n    if (ok_{u}) {{ x{i}_{u} = in{i}[i_{u}]; }}");
            }
        }
        for u in 0..per_thread {
            let mut p = 0;
            for (j, st) in self.steps.iter().enumerate() {
                let e = match *st {
                    Step::Unary(op, a) => {
                        let e = op.wgsl(&name(a, u), p);
                        p += op.params().len();
                        e
                    }
                    Step::Binary(op, a, b) => op.wgsl(&name(a, u), &name(b, u)),
                };
                let _ = writeln!(s, "    let t{j}_{u} = {e};");
            }
        }
        for u in 0..per_thread {
            for (o, &j) in self.outputs.iter().enumerate() {
                let _ = writeln!(s, "    if (ok_{u}) {{ out{o}[i_{u}] = t{j}_{u}; }}");
            }
        }
        s.push_str("}\n");
        s
    }
}

/// Items per invocation of element-wise kernels (`RAYO_WGPU_EW_ITEMS`: 1, 2 or 4; default 2,
/// measured best on an H100 by 3–5% at 100M floats: docs/perf/wgpu-h100.md).
fn per_thread() -> u32 {
    crate::Config::get().wgpu_ew_items
}

/// Records `chain` over `inputs` (each `n` long) writing `outputs` (each `n` long).
pub(crate) async fn encode_chain(enc: &mut Encoder, chain: &Chain, inputs: &[&Span], outputs: &[&Span], n: usize) -> Result<()> {
    debug_assert_eq!(inputs.len(), chain.n_inputs);
    debug_assert_eq!(outputs.len(), chain.outputs.len());
    if n == 0 {
        return Ok(());
    }
    let params = chain.params();
    debug_assert!(params.len() <= MAX_PARAMS);
    // 16-byte accesses when every binding holds whole vec4s (all spans start at offset 0).
    let vec4 = n % 4 == 0 && inputs.iter().chain(outputs).all(|s| s.offset % 16 == 0);
    let items = if vec4 { n / 4 } else { n };
    let per = per_thread();
    let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, &chain.signature(vec4, per), || chain.wgsl(vec4, per)).await?;
    let g = grid_1d(&enc.dev, items.div_ceil(per as usize));
    let mut meta = Meta::default();
    meta.u[0] = items as u32;
    meta.u[1] = g.0 * super::encoder::WG;
    meta.u[2] = g.0 * g.1 * super::encoder::WG;
    meta.p[..params.len()].copy_from_slice(&params);
    let spans: Vec<&Span> = inputs.iter().chain(outputs.iter()).copied().collect();
    enc.dispatch(&kernel, &meta, &spans, g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_kernel_names_every_binding_and_param_slot() {
        let c = Chain {
            n_inputs: 2,
            steps: vec![
                Step::Unary(UnaryOp::Relu, Src::Input(0)),
                Step::Unary(UnaryOp::Clip(-1.0, 1.0), Src::Step(0)),
                Step::Binary(BinaryOp::Add, Src::Step(1), Src::Input(1)),
                Step::Unary(UnaryOp::Scale(2.0), Src::Step(2)),
            ],
            outputs: vec![1, 3],
        };
        let w = c.wgsl(false, 1);
        assert!(c.wgsl(true, 1).contains("alias T = vec4<f32>;"));
        assert_ne!(c.signature(true, 1), c.signature(false, 1));
        let w2 = c.wgsl(false, 2);
        assert!(w2.contains("if (ok_1) { out1[i_1] = t3_1; }") && w2.contains("let t2_1 = (t1_1 + x1_1);"), "{w2}");
        let mut c2 = c.clone();
        c2.steps[1] = Step::Unary(UnaryOp::Clip(-5.0, 5.0), Src::Step(0));
        assert_eq!(c.signature(false, 1), c2.signature(false, 1), "parameter values do not change the kernel");
        assert!(w.contains("@binding(4) var<storage, read_write> out1"));
        assert!(w.contains("clamp(t0_0, T(prm.p[0][0]), T(prm.p[0][1]))"), "{w}");
        assert!(w.contains("(t2_0 * prm.p[0][2])"));
        assert_eq!(c.params(), vec![-1.0, 1.0, 2.0]);
        assert!(w.contains("if (ok_0) { out0[i_0] = t1_0; }") && w.contains("if (ok_0) { out1[i_0] = t3_0; }"), "{w}");
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(UnaryOp::Clip(1.0, 0.0).validate().is_err());
        assert!(UnaryOp::Clip(f32::NAN, 0.0).validate().is_err());
        assert!(UnaryOp::Elu(f32::INFINITY).validate().is_err());
        assert!(UnaryOp::Clip(0.0, 0.0).validate().is_ok());
    }
}
