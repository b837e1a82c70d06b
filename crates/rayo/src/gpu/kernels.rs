//! Recording the fixed kernels: tiled multi-stage reductions, softmax, matmul, convolve2d.

use super::encoder::{grid_1d, Encoder, Meta, Span, WG};
use crate::Result;

const REDUCE: &str = include_str!("shaders/reduce.wgsl");
const SOFTMAX: &str = include_str!("shaders/softmax.wgsl");
const MATMUL: &str = include_str!("shaders/matmul.wgsl");
const CONV2D: &str = include_str!("shaders/conv2d.wgsl");

/// Most workgroups of a reduction stage: enough to fill a large GPU, few enough that the later
/// stages are a few workgroups' work. `RAYO_WGPU_REDUCE_GROUPS` (64..=65535) overrides it.
fn reduce_groups() -> usize {
    crate::Config::get().wgpu_reduce_groups
}

/// A reduction to one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// What the first stage of a reduction reads per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// x[i]
    Plain,
    /// x[i] * y[i]
    Product,
    /// exp(x[i] - m[0])
    ExpShifted,
}

fn reduce_source(op: ReduceOp, load: Load, vec4: bool) -> String {
    let (combine, init_from_first, horiz4) = match op {
        ReduceOp::Sum => ("(A + B)", false, "return (v.x + v.y) + (v.z + v.w);"),
        ReduceOp::Max => ("max(A, B)", true, "return max(max(v.x, v.y), max(v.z, v.w));"),
        ReduceOp::Min => ("min(A, B)", true, "return min(min(v.x, v.y), min(v.z, v.w));"),
    };
    let (load_expr, extra) = match load {
        Load::Plain => ("x[IDX]", ""),
        Load::Product => ("(x[IDX] * y[IDX])", "@group(0) @binding(3) var<storage, read> y: array<T>;"),
        Load::ExpShifted => ("exp(x[IDX] - y[0])", "@group(0) @binding(3) var<storage, read> y: array<f32>;"),
    };
    // Text substitution of the template's placeholders: COMBINE(a, b), LOAD(i), INIT, EXTRA,
    // TYPE, HORIZ_BODY.
    let mut s = REDUCE.replace("EXTRA", extra);
    s = s.replace("TYPE", if vec4 { "vec4<f32>" } else { "f32" });
    s = s.replace("HORIZ_BODY", if vec4 { horiz4 } else { "return v;" });
    s = s.replace("INIT", if init_from_first { "LOAD(0u)" } else { "T(0.0)" });
    s = expand_call(&s, "LOAD", &|args| load_expr.replace("IDX", &format!("({})", args[0])));
    s = expand_call(&s, "COMBINE", &|args| combine.replace('A', &format!("({})", args[0])).replace('B', &format!("({})", args[1])));
    s
}

/// Replaces every `NAME(arg, ...)` in `src` with `f(args)` (balanced parentheses; calls nested
/// in the arguments are expanded first).
fn expand_call(src: &str, name: &str, f: &dyn Fn(&[String]) -> String) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    let pat = format!("{name}(");
    while let Some(pos) = rest.find(&pat) {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + pat.len()..];
        let (mut depth, mut args, mut cur, mut end) = (0i32, Vec::new(), String::new(), after.len());
        for (i, ch) in after.char_indices() {
            match ch {
                '(' => {
                    depth += 1;
                    cur.push(ch)
                }
                ')' if depth == 0 => {
                    args.push(cur.trim().to_string());
                    end = i + 1;
                    break;
                }
                ')' => {
                    depth -= 1;
                    cur.push(ch)
                }
                ',' if depth == 0 => args.push(std::mem::take(&mut cur).trim().to_string()),
                _ => cur.push(ch),
            }
        }
        let args: Vec<String> = args.iter().map(|a| expand_call(a, name, f)).collect();
        out.push_str(&f(&args));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Whether a first stage can read `x` (and `y` for a product) as vec4.
fn can_vec4(load: Load, x: &Span, y: Option<&Span>) -> bool {
    let ok = |s: &Span| s.len % 4 == 0 && s.offset % 16 == 0;
    ok(x) && (load != Load::Product || y.is_some_and(ok))
}

/// Workgroups of one stage over `x` (read as vec4 when it can be).
fn stage_groups(load: Load, x: &Span, y: Option<&Span>) -> usize {
    let items = if can_vec4(load, x, y) { x.len / 4 } else { x.len };
    items.div_ceil(WG as usize).clamp(1, reduce_groups())
}

async fn reduce_stage(enc: &mut Encoder, op: ReduceOp, load: Load, x: &Span, y: Option<&Span>, out: &Span, out_offset: u32) -> Result<usize> {
    let vec4 = can_vec4(load, x, y);
    let items = if vec4 { x.len / 4 } else { x.len };
    let key = format!("reduce/{op:?}/{load:?}/{}", if vec4 { "vec4" } else { "f32" });
    let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, &key, || reduce_source(op, load, vec4)).await?;
    let groups = stage_groups(load, x, y);
    let mut meta = Meta::default();
    meta.u[0] = items as u32;
    meta.u[1] = out_offset;
    match y {
        Some(y) => enc.dispatch(&kernel, &meta, &[x, out, y], (groups as u32, 1, 1))?,
        None => enc.dispatch(&kernel, &meta, &[x, out], (groups as u32, 1, 1))?,
    }
    Ok(groups)
}

/// Records a reduction of `x` (with `y`: of x·y elementwise, for dot) into `out[out_offset]`.
/// `x.len >= 1`. Stage one writes one partial per workgroup; further stages fold partials.
pub(crate) async fn encode_reduce(enc: &mut Encoder, op: ReduceOp, x: &Span, y: Option<&Span>, out: &Span, out_offset: u32) -> Result<()> {
    encode_reduce_load(enc, op, if y.is_some() { Load::Product } else { Load::Plain }, x, y, out, out_offset).await
}

async fn encode_reduce_load(enc: &mut Encoder, op: ReduceOp, load: Load, x: &Span, y: Option<&Span>, out: &Span, out_offset: u32) -> Result<()> {
    let first_groups = stage_groups(load, x, y);
    if first_groups == 1 {
        reduce_stage(enc, op, load, x, y, out, out_offset).await?;
        return Ok(());
    }
    let mut partial = enc.temp(first_groups)?;
    reduce_stage(enc, op, load, x, y, &partial, 0).await?;
    loop {
        let groups = stage_groups(Load::Plain, &partial, None);
        if groups == 1 {
            reduce_stage(enc, op, Load::Plain, &partial, None, out, out_offset).await?;
            return Ok(());
        }
        let next = enc.temp(groups)?;
        reduce_stage(enc, op, Load::Plain, &partial, None, &next, 0).await?;
        partial = next;
    }
}

/// Records softmax (or log_softmax) of `x` (len ≥ 1) into `out`.
pub(crate) async fn encode_softmax(enc: &mut Encoder, x: &Span, out: &Span, log: bool) -> Result<()> {
    let mx = enc.temp(1)?;
    let se = enc.temp(1)?;
    encode_reduce_load(enc, ReduceOp::Max, Load::Plain, x, None, &mx, 0).await?;
    encode_reduce_load(enc, ReduceOp::Sum, Load::ExpShifted, x, Some(&mx), &se, 0).await?;
    let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, "softmax", || SOFTMAX.to_string()).await?;
    let g = grid_1d(&enc.dev, x.len);
    let mut meta = Meta::default();
    meta.u[0] = x.len as u32;
    meta.u[1] = g.0 * WG;
    meta.u[2] = log as u32;
    enc.dispatch(&kernel, &meta, &[x, &mx, &se, out], g)
}

/// Output tile edge of the matmul kernel.
pub(crate) const MATMUL_TILE: usize = 128;

/// Records c (m×n) = a (m×k) · b (k×n).
pub(crate) async fn encode_matmul(enc: &mut Encoder, a: &Span, b: &Span, c: &Span, m: usize, k: usize, n: usize) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // An empty sum: zeros.
        enc.enc.clear_buffer(&c.buf, c.offset, Some(c.bytes()));
        return Ok(());
    }
    let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, "matmul", || MATMUL.to_string()).await?;
    let mut meta = Meta::default();
    meta.u[0] = m as u32;
    meta.u[1] = k as u32;
    meta.u[2] = n as u32;
    let g = (n.div_ceil(MATMUL_TILE) as u32, m.div_ceil(MATMUL_TILE) as u32, 1);
    enc.dispatch(&kernel, &meta, &[a, b, c], g)
}

/// Records the valid 2-D convolution of an h×w image with a kh×kw kernel.
pub(crate) async fn encode_conv2d(enc: &mut Encoder, image: &Span, kern: &Span, out: &Span, dims: [usize; 4]) -> Result<()> {
    let [h, w, kh, kw] = dims;
    let (oh, ow) = (h - kh + 1, w - kw + 1);
    let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, "conv2d", || CONV2D.to_string()).await?;
    let mut meta = Meta::default();
    meta.u[..6].copy_from_slice(&[h as u32, w as u32, kh as u32, kw as u32, oh as u32, ow as u32]);
    let g = (ow.div_ceil(16) as u32, oh.div_ceil(16) as u32, 1);
    enc.dispatch(&kernel, &meta, &[image, kern, out], g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_template_expands() {
        let v = reduce_source(ReduceOp::Sum, Load::Product, true);
        assert!(v.contains("alias T = vec4<f32>;") && v.contains("return (v.x + v.y) + (v.z + v.w);"), "{v}");
        let s = reduce_source(ReduceOp::Max, Load::Product, false);
        assert!(!s.contains("LOAD") && !s.contains("COMBINE") && !s.contains("INIT") && !s.contains("EXTRA"));
        assert!(s.contains("var a0: T = (x[(0u)] * y[(0u)]);"), "{s}");
        assert!(s.contains("a0 = max((a0), ((x[(i)] * y[(i)])));"), "{s}");
        assert!(s.contains("a3 = max((a3), ((x[(i + 3u * stride)] * y[(i + 3u * stride)])));"), "{s}");
    }
}
