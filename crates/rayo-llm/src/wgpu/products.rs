//! The quantized products on wgpu: one to three weight matrices multiplied by the same
//! activations in one dispatch, the RMSNorm of those activations optionally folded in (each
//! workgroup finds its rows' 1/rms itself), and for the feed-forward gate and up matrices
//! `silu(gate)·up` written at once. A decoding step takes one dispatch for Q, K and V (was
//! four: the norm, three products) and one for the gate and up products (was four).
//!
//! The kernel's source is assembled per weight format: each weight's block readers
//! (`formats/*.wgsl`) and row loop (`product_row.wgsl`) are copied with their module-scope names
//! suffixed (`_a`, `_b`, `_c`), so matrices of different formats (a Q4_K_M file's Q4_K and Q6_K)
//! share a dispatch.

use super::record::Kernel;
use super::weights::{format_kernel, Part, WgpuWeight, WgslFormat};
use super::{check_len, Wgpu, WgpuBuf};
use crate::Result;
use std::collections::HashSet;
use std::sync::Arc;

/// What a product dispatch writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// `yᵢ (+)= n(x)·Wᵢᵀ` for each weight.
    Each,
    /// `y = silu(n(x)·Gᵀ)·(n(x)·Uᵀ)` (gate and up).
    Swiglu,
}

const SUFFIXES: [&str; 3] = ["_a", "_b", "_c"];

/// `src` with every identifier in `names` suffixed by `sfx` (not field accesses such as `.w`).
fn rename(src: &str, names: &HashSet<String>, sfx: &str) -> String {
    let mut out = String::with_capacity(src.len() + 256);
    let bytes = src.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let id = &src[start..i];
            out.push_str(id);
            if names.contains(id) && (start == 0 || bytes[start - 1] != b'.') {
                out.push_str(sfx);
            }
        } else if c.is_ascii_digit() {
            // a literal's suffix (1u, 2.0f) is not an identifier
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            out.push_str(&src[start..i]);
        } else {
            let ch = src[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The module-scope names a text declares (`fn NAME`, `const NAME`), and `w`.
fn declared(src: &str) -> HashSet<String> {
    let mut names: HashSet<String> = HashSet::from(["w".to_string()]);
    for line in src.lines() {
        let line = line.trim_start();
        for kw in ["fn ", "const "] {
            if let Some(rest) = line.strip_prefix(kw) {
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                names.insert(name);
            }
        }
    }
    names
}

/// One weight's part of the kernel: its format and row loop with names suffixed, its
/// weights at binding `wb`.
fn weight_text(fmt: WgslFormat, sfx: &str, wb: u32) -> String {
    let row = include_str!("shaders/product_row.wgsl").replace("@binding(WB)", &format!("@binding({wb})"));
    let text = format_kernel(fmt, &row);
    rename(&text, &declared(&text), sfx)
}

/// The output bindings and `main` for `fmts.len()` weights (bindings from `first`).
fn main_text(n: usize, out: Output, first: u32) -> String {
    let mut s = String::new();
    let head = "@compute @workgroup_size(64)\nfn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {\n    let gi = wid.x + wid.y * nwg.x;\n    let lane = li % LANES;\n    let i0 = wid.z * MT;\n    if (NORM) {\n        norm_rows(li, i0);\n    }\n";
    match out {
        Output::Swiglu => {
            s.push_str(&format!("@group(0) @binding({first}) var<storage, read_write> y_a: array<f32>;\n"));
            s.push_str(head);
            s.push_str(
                "    let r = gi * RPW + li / LANES;
    let ga = reduce(row_dot_a(r, p.rows_a, lane, i0), li, lane);
    let ua = reduce(row_dot_b(r, p.rows_a, lane, i0), li, lane);
    if (lane == 0u && r < p.rows_a) {
        for (var t = 0u; t < MT; t++) {
            if (i0 + t < p.m) {
                let v = ga[t];
                y_a[(i0 + t) * p.rows_a + r] = v / (1.0 + exp(-v)) * ua[t];
            }
        }
    }
}
",
            );
        }
        Output::Each => {
            for (i, sfx) in SUFFIXES.iter().take(n).enumerate() {
                s.push_str(&format!("@group(0) @binding({}) var<storage, read_write> y{sfx}: array<f32>;\n", first + i as u32));
            }
            s.push_str(head);
            // weight a: rows row0_a.. of its output rows of out_stride_a (a part); b, c: whole
            let conds = ["gi < p.groups_a", "gi < p.groups_a + p.groups_b", "true"];
            let g0 = ["gi", "gi - p.groups_a", "gi - p.groups_a - p.groups_b"];
            let place = ["i * p.out_stride_a + p.row0_a + r", "i * p.rows_b + r", "i * p.rows_c + r"];
            for (i, sfx) in SUFFIXES.iter().take(n).enumerate() {
                let cond = if i + 1 == n && i > 0 { "true" } else { conds[i] };
                let kw = if i == 0 { "    if" } else { " else if" };
                s.push_str(&format!(
                    "{kw} ({cond}) {{
        let r = ({g0}) * RPW + li / LANES;
        let acc = reduce(row_dot{sfx}(r, p.rows{sfx}, lane, i0), li, lane);
        if (lane == 0u && r < p.rows{sfx}) {{
            for (var t = 0u; t < MT; t++) {{
                let i = i0 + t;
                if (i < p.m) {{
                    let o = {place};
                    var v = acc[t];
                    if (p.add != 0u) {{
                        v += y{sfx}[o];
                    }}
                    y{sfx}[o] = v;
                }}
            }}
        }}
    }}",
                    g0 = g0[i],
                    place = place[i]
                ));
            }
            s.push_str("\n}\n");
        }
    }
    s
}

impl Wgpu {
    /// The product kernel for weights of `fmts`, `mt` activation rows per workgroup.
    fn product_kernel(&mut self, fmts: &[WgslFormat], out: Output, norm: bool, mt: usize) -> Arc<Kernel> {
        let lanes = self.lanes;
        // the row's threads reduce by subgroup shuffles when one subgroup holds them
        let sg = lanes > 1 && self.dev.subgroup_min_size().is_some_and(|s| s as usize >= lanes);
        let key = format!("product {fmts:?} {out:?} norm={norm} mt={mt} lanes={lanes} sg={sg}");
        self.rec.kernel(&key, || {
            let (enable, reduce) = if sg {
                // a browser's compiler wants the extension enabled; naga takes the builtins
                // with the device feature alone (and rejects the directive)
                (if cfg!(target_arch = "wasm32") { "enable subgroups;\n" } else { "" }, include_str!("shaders/lanes_subgroup.wgsl"))
            } else {
                ("", include_str!("shaders/lanes_workgroup.wgsl"))
            };
            let xin = if norm { include_str!("shaders/product_x_norm.wgsl") } else { include_str!("shaders/product_x_plain.wgsl") };
            let mut s = format!(
                "{enable}const MT: u32 = {mt}u;\nconst LANES: u32 = {lanes}u;\nconst NORM: bool = {norm};\n{reduce}\n{}\n{xin}\n",
                include_str!("shaders/product_head.wgsl")
            );
            let mut b = if norm { 3 } else { 2 };
            for (f, sfx) in fmts.iter().zip(SUFFIXES) {
                s.push_str(&weight_text(*f, sfx, b));
                b += 1;
            }
            s.push_str(&main_text(fmts.len(), out, b));
            s
        })
    }

    /// Activation rows per workgroup: one when decoding, four or eight for a prompt (each group
    /// of rows decodes the weights once).
    fn rows_per_group(m: usize) -> usize {
        match m {
            1 => 1,
            2..8 => 4,
            _ => 8,
        }
    }

    /// `ys[i] (+)= n(x)·wsᵢᵀ` for `m` rows in one dispatch per part (one part each where there
    /// are several weights), `n` the RMSNorm by `norm` when given, else the identity.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn products(
        &mut self,
        ws: &[(&WgpuWeight, &Part)],
        x: &WgpuBuf,
        norm: Option<(&WgpuBuf, f32)>,
        m: usize,
        ys: &[&WgpuBuf],
        add: bool,
        out: Output,
    ) -> Result<()> {
        let cols = ws[0].0.cols;
        check_len("wgpu matmul", x.len, m * cols)?;
        if let Some((g, _)) = norm {
            check_len("wgpu norm", g.len, cols)?;
        }
        for (i, (w, _)) in ws.iter().enumerate() {
            if w.cols != cols {
                return Err(rayo::Error::LengthMismatch { op: "wgpu fused matmul", expected: cols, actual: w.cols }.into());
            }
            if out == Output::Each {
                check_len("wgpu matmul", ys[i].len, m * w.rows)?;
            }
        }
        if out == Output::Swiglu {
            check_len("wgpu norm_swiglu", ys[0].len, m * ws[0].0.rows)?;
        }
        let mt = Self::rows_per_group(m);
        let fmts: Vec<WgslFormat> = ws.iter().map(|(w, _)| w.fmt).collect();
        let k = self.product_kernel(&fmts, out, norm.is_some(), mt);
        let rpw = 64 / self.lanes;
        let rows = |i: usize| ws.get(i).map_or(0, |(_, p)| p.rows);
        let groups_a = rows(0).div_ceil(rpw);
        let groups_b = rows(1).div_ceil(rpw);
        let groups = match out {
            Output::Each => groups_a + groups_b + rows(2).div_ceil(rpw),
            Output::Swiglu => groups_a,
        };
        let lim = self.dev.limits().max_workgroups_per_dimension as usize;
        let gx = groups.min(lim);
        let gy = groups.div_ceil(gx);
        let (a, pa) = ws[0];
        let eps = norm.map_or(0.0, |(_, e)| e);
        let params = [
            cols as u32,
            m as u32,
            add as u32,
            eps.to_bits(),
            rows(0) as u32,
            rows(1) as u32,
            rows(2) as u32,
            groups_a as u32,
            groups_b as u32,
            a.rows as u32,
            pa.row0 as u32,
        ];
        let mut bufs: Vec<&rayo::gpu::wgpu::Buffer> = vec![&x.buf];
        if let Some((g, _)) = norm {
            bufs.push(&g.buf);
        }
        bufs.extend(ws.iter().map(|(_, p)| &p.buf));
        bufs.extend(ys.iter().map(|y| &y.buf));
        self.rec.dispatch(&k, &params, &bufs, (gx as u32, gy as u32, m.div_ceil(mt) as u32))
    }

    /// `y (+)= n(x)·wᵀ` for one weight, one dispatch per part.
    pub(crate) fn product(&mut self, w: &WgpuWeight, x: &WgpuBuf, norm: Option<(&WgpuBuf, f32)>, m: usize, y: &WgpuBuf, add: bool) -> Result<()> {
        for part in &w.parts {
            self.products(&[(w, part)], x, norm, m, &[y], add, Output::Each)?;
        }
        Ok(())
    }
}
