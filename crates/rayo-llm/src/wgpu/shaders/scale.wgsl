// x[i] *= s for i < n.
struct P {
    n: u32,
    s: f32,
    stride: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.stride;
    if (i < p.n) {
        x[i] *= p.s;
    }
}
