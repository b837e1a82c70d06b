// out = x / sqrt(mean(x²) + eps) · g per row of d values; one workgroup per row. The 64 partial
// sums are added in order by every thread, as the products' folded norm does (product_head.wgsl).
struct P {
    d: u32,
    eps: f32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let base = wid.x * p.d;
    var ss = 0.0;
    for (var c = li; c < p.d; c += 64u) {
        let v = x[base + c];
        ss += v * v;
    }
    red[li] = ss;
    workgroupBarrier();
    var s = 0.0;
    for (var j = 0u; j < 64u; j++) {
        s += red[j];
    }
    let scale = 1.0 / sqrt(s / f32(p.d) + p.eps);
    for (var c = li; c < p.d; c += 64u) {
        out[base + c] = x[base + c] * scale * g[c];
    }
}
