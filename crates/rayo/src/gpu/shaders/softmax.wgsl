// Last pass of softmax / log_softmax: the max and the sum of exp(x - max) are already reduced
// into one-element buffers. prm.u2 == 1 selects log_softmax. A NaN or infinite maximum (the
// max reduction propagates NaN) makes every output NaN (prm.p[0].x holds a NaN), as the CPU.

struct Meta {
    n: u32,
    stride: u32,
    log: u32,
    u3: u32, u4: u32, u5: u32, u6: u32, u7: u32,
    p: array<vec4<f32>, 4>,
}

@group(0) @binding(0) var<uniform> prm: Meta;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> mx: array<f32>;
@group(0) @binding(3) var<storage, read> se: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

// NaN or ±inf.
fn nonfinite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u; }

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * prm.stride;
    if (i >= prm.n) { return; }
    let m = mx[0];
    let d = x[i] - m;
    var v: f32;
    if (prm.log == 1u) {
        v = d - log(se[0]);
    } else {
        v = exp(d) / se[0];
    }
    out[i] = select(v, prm.p[0].x, nonfinite(m));
}
