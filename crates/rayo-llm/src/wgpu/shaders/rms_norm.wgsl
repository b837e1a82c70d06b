// out = x / sqrt(mean(x²) + eps) · g per row of d values; one workgroup per row.
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
    for (var off = 32u; off > 0u; off >>= 1u) {
        if (li < off) {
            red[li] += red[li + off];
        }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(red[0] / f32(p.d) + p.eps);
    for (var c = li; c < p.d; c += 64u) {
        out[base + c] = x[base + c] * scale * g[c];
    }
}
