//! Recording the fixed kernels: tiled multi-stage reductions, softmax, matmul, convolve2d.

use super::encoder::{grid_1d, Encoder, Meta, Span, WG};
use crate::ops::{ReduceCombine, ReduceLoad, ReduceOp};
use crate::Result;

const REDUCE: &str = include_str!("shaders/reduce.wgsl");
const SOFTMAX: &str = include_str!("shaders/softmax.wgsl");
const SOFTMAX_ROWS: &str = include_str!("shaders/softmax_rows.wgsl");
const NORM_L2_FINISH: &str = include_str!("shaders/norm_l2_finish.wgsl");
const MATMUL: &str = include_str!("shaders/matmul.wgsl");
const CONV2D: &str = include_str!("shaders/conv2d.wgsl");

/// Most workgroups of a reduction stage: enough to fill a large GPU, few enough that the later
/// stages are a few workgroups' work. `RAYO_WGPU_REDUCE_GROUPS` (64..=65535) overrides it.
fn reduce_groups() -> usize {
    crate::Config::get().wgpu_reduce_groups
}

/// What the first stage of a reduction reads per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// x[i]
    Plain,
    /// |x[i]|
    Abs,
    /// x[i]²
    Square,
    /// x[i] * y[i]
    Product,
    /// exp(x[i] - m[0])
    ExpShifted,
    /// (x[i] / s[0])²: the sum of squares of `NormL2`, scaled by max |x| so that it can neither
    /// overflow nor underflow in f32.
    ScaledSquare,
}

impl Load {
    fn of(l: ReduceLoad) -> Load {
        match l {
            ReduceLoad::Plain => Load::Plain,
            ReduceLoad::Abs => Load::Abs,
            ReduceLoad::Square => Load::Square,
            ReduceLoad::Product => Load::Product,
        }
    }
}

fn reduce_source(combine: ReduceCombine, load: Load, vec4: bool) -> String {
    // COMBINE works on T (f32 or vec4), COMBINE_S on f32. Max and min go through the template's
    // NaN-propagating helpers: WGSL's max/min may drop a NaN operand on some drivers.
    let (combine_t, combine_s, init_from_first, horiz4) = match combine {
        ReduceCombine::Sum => ("(A + B)", "(A + B)", false, "return (v.x + v.y) + (v.z + v.w);"),
        ReduceCombine::Max => {
            (if vec4 { "max_v(A, B)" } else { "max_s(A, B)" }, "max_s(A, B)", true, "return max_s(max_s(v.x, v.y), max_s(v.z, v.w));")
        }
        ReduceCombine::Min => {
            (if vec4 { "min_v(A, B)" } else { "min_s(A, B)" }, "min_s(A, B)", true, "return min_s(min_s(v.x, v.y), min_s(v.z, v.w));")
        }
    };
    let (load_expr, extra) = match load {
        Load::Plain => ("x[IDX]", ""),
        Load::Abs => ("abs(x[IDX])", ""),
        Load::Square => ("(x[IDX] * x[IDX])", ""),
        Load::Product => ("(x[IDX] * y[IDX])", "@group(0) @binding(3) var<storage, read> y: array<T>;"),
        Load::ExpShifted => ("exp(x[IDX] - y[0])", "@group(0) @binding(3) var<storage, read> y: array<f32>;"),
        Load::ScaledSquare => ("((x[IDX] / y[0]) * (x[IDX] / y[0]))", "@group(0) @binding(3) var<storage, read> y: array<f32>;"),
    };
    // Text substitution of the template's placeholders: COMBINE(a, b), COMBINE_S(a, b), LOAD(i),
    // INIT, EXTRA, TYPE, HORIZ_BODY.
    let mut s = REDUCE.replace("EXTRA", extra);
    s = s.replace("TYPE", if vec4 { "vec4<f32>" } else { "f32" });
    s = s.replace("HORIZ_BODY", if vec4 { horiz4 } else { "return v;" });
    s = s.replace("INIT", if init_from_first { "LOAD(0u)" } else { "T(0.0)" });
    let subst = |f: &'static str| move |args: &[String]| f.replace('A', &format!("({})", args[0])).replace('B', &format!("({})", args[1]));
    s = expand_call(&s, "LOAD", &|args| load_expr.replace("IDX", &format!("({})", args[0])));
    s = expand_call(&s, "COMBINE_S", &subst(combine_s));
    s = expand_call(&s, "COMBINE", &subst(combine_t));
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
    let ok = |s: &Span| s.len.is_multiple_of(4) && s.offset.is_multiple_of(16);
    ok(x) && (load != Load::Product || y.is_some_and(ok))
}

/// Workgroups of one stage over `x` (read as vec4 when it can be).
fn stage_groups(load: Load, x: &Span, y: Option<&Span>) -> usize {
    let items = if can_vec4(load, x, y) { x.len / 4 } else { x.len };
    items.div_ceil(WG as usize).clamp(1, reduce_groups())
}

async fn reduce_stage(
    enc: &mut Encoder,
    combine: ReduceCombine,
    load: Load,
    x: &Span,
    y: Option<&Span>,
    out: &Span,
    out_offset: u32,
) -> Result<usize> {
    let vec4 = can_vec4(load, x, y);
    let items = if vec4 { x.len / 4 } else { x.len };
    let key = format!("reduce/{combine:?}/{load:?}/{}", if vec4 { "vec4" } else { "f32" });
    let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, &key, || reduce_source(combine, load, vec4)).await?;
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

/// Records `op` over `x` (and `y` for [`ReduceOp::Dot`]) into `out[out_offset]`, `x.len >= 1`.
/// Stage one writes one partial per workgroup; further stages fold partials. `NormL2` is
/// `s·√(Σ (x/s)²)` with `s = max |x|` (NaN, ±inf and 0 pass through): no spurious overflow above
/// 1.8e19 nor underflow below 1e-19, as on the CPU.
pub(crate) async fn encode_reduce(enc: &mut Encoder, op: ReduceOp, x: &Span, y: Option<&Span>, out: &Span, out_offset: u32) -> Result<()> {
    if op == ReduceOp::NormL2 {
        let s = enc.temp(1)?;
        encode_reduce_load(enc, ReduceCombine::Max, Load::Abs, x, None, &s, 0).await?;
        encode_reduce_load(enc, ReduceCombine::Sum, Load::ScaledSquare, x, Some(&s), out, out_offset).await?;
        let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, "norm_l2_finish", || NORM_L2_FINISH.to_string()).await?;
        let mut meta = Meta::default();
        meta.u[0] = out_offset;
        return enc.dispatch(&kernel, &meta, &[out, &s], (1, 1, 1));
    }
    encode_reduce_load(enc, op.combine(), Load::of(op.load()), x, y, out, out_offset).await
}

/// Records Σ (x/s[0])² into `out[0]` (one chunk of a chunked host `NormL2`).
pub(crate) async fn encode_scaled_squares(enc: &mut Encoder, x: &Span, s: &Span, out: &Span) -> Result<()> {
    encode_reduce_load(enc, ReduceCombine::Sum, Load::ScaledSquare, x, Some(s), out, 0).await
}

async fn encode_reduce_load(
    enc: &mut Encoder,
    combine: ReduceCombine,
    load: Load,
    x: &Span,
    y: Option<&Span>,
    out: &Span,
    out_offset: u32,
) -> Result<()> {
    let first_groups = stage_groups(load, x, y);
    if first_groups == 1 {
        reduce_stage(enc, combine, load, x, y, out, out_offset).await?;
        return Ok(());
    }
    let mut partial = enc.temp(first_groups)?;
    reduce_stage(enc, combine, load, x, y, &partial, 0).await?;
    loop {
        let groups = stage_groups(Load::Plain, &partial, None);
        if groups == 1 {
            reduce_stage(enc, combine, Load::Plain, &partial, None, out, out_offset).await?;
            return Ok(());
        }
        let next = enc.temp(groups)?;
        reduce_stage(enc, combine, Load::Plain, &partial, None, &next, 0).await?;
        partial = next;
    }
}

/// Rows up to this length (and every multi-row input) take the one-workgroup-per-row kernel;
/// one longer row takes the multi-stage reductions that spread it over the whole GPU.
const SOFTMAX_ROW_KERNEL_MAX_COLS: usize = 4096;

/// Records softmax (or log_softmax) of each row of a row-major `rows × cols` `x` into `out`
/// (`rows, cols >= 1`). A row holding a NaN, or whose maximum is infinite, becomes all NaN.
pub(crate) async fn encode_softmax(enc: &mut Encoder, x: &Span, out: &Span, rows: usize, cols: usize, log: bool) -> Result<()> {
    let mut meta = Meta::default();
    meta.p[0] = f32::NAN; // what a row with a NaN or an infinite maximum becomes
    if rows > 1 || cols <= SOFTMAX_ROW_KERNEL_MAX_COLS {
        let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, "softmax_rows", || SOFTMAX_ROWS.to_string()).await?;
        let lim = enc.dev.inner.limits.max_workgroups_per_dimension.max(1) as usize;
        let gx = rows.min(lim);
        meta.u[0] = rows as u32;
        meta.u[1] = cols as u32;
        meta.u[2] = log as u32;
        return enc.dispatch(&kernel, &meta, &[x, out], (gx as u32, rows.div_ceil(gx) as u32, 1));
    }
    let mx = enc.temp(1)?;
    let se = enc.temp(1)?;
    encode_reduce_load(enc, ReduceCombine::Max, Load::Plain, x, None, &mx, 0).await?;
    encode_reduce_load(enc, ReduceCombine::Sum, Load::ExpShifted, x, Some(&mx), &se, 0).await?;
    let kernel = enc.dev.inner.pipelines.get(&enc.dev.inner.device, "softmax", || SOFTMAX.to_string()).await?;
    let g = grid_1d(&enc.dev, x.len);
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
        let v = reduce_source(ReduceCombine::Sum, Load::Product, true);
        assert!(v.contains("alias T = vec4<f32>;") && v.contains("return (v.x + v.y) + (v.z + v.w);"), "{v}");
        let s = reduce_source(ReduceCombine::Max, Load::Product, false);
        assert!(!s.contains("LOAD") && !s.contains("COMBINE") && !s.contains("INIT") && !s.contains("EXTRA"));
        assert!(s.contains("var a0: T = (x[(0u)] * y[(0u)]);"), "{s}");
        assert!(s.contains("a0 = max_s((a0), ((x[(i)] * y[(i)])));"), "{s}");
        assert!(s.contains("a3 = max_s((a3), ((x[(i + 3u * stride)] * y[(i + 3u * stride)])));"), "{s}");
        // vec4 accumulators fold with the vector helper, the workgroup tree with the scalar one.
        let v = reduce_source(ReduceCombine::Min, Load::Abs, true);
        assert!(v.contains("a0 = min_v((a0), (abs(x[(i)])));") && v.contains("sdata[lid.x] = min_s("), "{v}");
        let q = reduce_source(ReduceCombine::Sum, Load::Square, false);
        assert!(q.contains("a0 = ((a0) + ((x[(i)] * x[(i)])));"), "{q}");
    }
}
