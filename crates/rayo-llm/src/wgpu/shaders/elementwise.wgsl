// op 0: a += b; op 1: a = silu(a)·b; op 2: a[i] += b[i % width] (a bias per row);
// op 3: a = gelu(a)·b (GELU's tanh form).
struct P {
    n: u32,
    op: u32,
    width: u32,
    stride: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.stride;
    if (i >= p.n) {
        return;
    }
    if (p.op == 0u) {
        a[i] += b[i];
    } else if (p.op == 1u) {
        let v = a[i];
        a[i] = v / (1.0 + exp(-v)) * b[i];
    } else if (p.op == 2u) {
        a[i] += b[i % p.width];
    } else {
        let v = a[i];
        // 0 at and below -10, as the CPU engine; v itself from 10 on (the factor is 1 in f32
        // there, and a shader's tanh of a large argument may be NaN)
        var g = 0.0;
        if (v >= 10.0) {
            g = v;
        } else if (v > -10.0) {
            g = 0.5 * v * (1.0 + tanh(0.7978846 * v * (1.0 + 0.044715 * v * v)));
        }
        a[i] = g * b[i];
    }
}
