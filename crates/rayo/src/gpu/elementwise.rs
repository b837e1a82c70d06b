//! Element-wise ops and their WGSL generator. A single op and a fused chain of ops are the same
//! thing here: a [`Chain`] of steps over input buffers, compiled into one kernel that reads each
//! input once and writes only the requested outputs. Parameter values (alpha, bounds, scale)
//! travel in the uniform block, so a kernel's source, and its cached pipeline, depend only on
//! the shape of the chain.

use super::encoder::{grid_1d, Encoder, Meta, Span};
use crate::Result;
use std::fmt::Write;

/// Parameters one generated kernel can carry.
pub(crate) const MAX_PARAMS: usize = 16;

pub use crate::ops::{BinaryOp, UnaryOp};

/// The parameters of an op that the kernel reads from the uniform block.
fn op_params(names: &[&str], p: [f32; 2]) -> Vec<f32> {
    p[..names.len()].to_vec()
}

/// WGSL for `op` applied to `args`, its parameters starting at slot `p`.
fn call(name: &str, args: &[&str], n_params: usize, p: usize) -> String {
    let pa = |k: usize| format!("prm.p[{}][{}]", k / 4, k % 4);
    let a = if n_params > 0 { pa(p) } else { "0.0".to_string() };
    let b = if n_params > 1 { pa(p + 1) } else { "0.0".to_string() };
    format!("op_{name}({}, {a}, {b})", args.join(", "))
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
                Step::Unary(op, _) => op_params(op.param_names(), op.params()),
                Step::Binary(op, ..) => op_params(op.param_names(), op.params()),
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
        let lib = crate::ops::wgsl_library();
        let mut s = String::with_capacity(lib.len() + 1024);
        s.push_str(if vec4 {
            "alias T = vec4<f32>;\nalias U = vec4<u32>;\nalias I = vec4<i32>;\nalias B = vec4<bool>;\n"
        } else {
            "alias T = f32;\nalias U = u32;\nalias I = i32;\nalias B = bool;\n"
        });
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
        s.push_str(&lib);
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
                        let n = op.param_names().len();
                        let e = call(op.name(), &[&name(a, u)], n, p);
                        p += n;
                        e
                    }
                    Step::Binary(op, a, b) => {
                        let n = op.param_names().len();
                        let e = call(op.name(), &[&name(a, u), &name(b, u)], n, p);
                        p += n;
                        e
                    }
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
        assert!(w2.contains("if (ok_1) { out1[i_1] = t3_1; }") && w2.contains("let t2_1 = op_add(t1_1, x1_1, 0.0, 0.0);"), "{w2}");
        let mut c2 = c.clone();
        c2.steps[1] = Step::Unary(UnaryOp::Clip(-5.0, 5.0), Src::Step(0));
        assert_eq!(c.signature(false, 1), c2.signature(false, 1), "parameter values do not change the kernel");
        assert!(w.contains("@binding(4) var<storage, read_write> out1"));
        assert!(w.contains("let t1_0 = op_clip(t0_0, prm.p[0][0], prm.p[0][1]);"), "{w}");
        assert!(w.contains("let t3_0 = op_scale(t2_0, prm.p[0][2], 0.0);"), "{w}");
        assert_eq!(c.params(), vec![-1.0, 1.0, 2.0]);
        assert!(w.contains("if (ok_0) { out0[i_0] = t1_0; }") && w.contains("if (ok_0) { out1[i_0] = t3_0; }"), "{w}");
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(UnaryOp::Clip(1.0, 0.0).validate().is_err());
        assert!(UnaryOp::Clip(f32::NAN, 0.0).validate().is_err());
        assert!(UnaryOp::Elu(f32::INFINITY).validate().is_ok(), "IEEE products, as on the CPU");
        assert!(UnaryOp::Clip(0.0, 0.0).validate().is_ok());
    }
}
