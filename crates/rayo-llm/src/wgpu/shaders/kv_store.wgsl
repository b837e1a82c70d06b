// Writes m rows of keys and values (width values each) at positions pos0.. of one layer's
// cache; one thread per pair of values. The cache's type (kv_f16 / kv_f32) comes before.
struct P {
    m: u32,
    width: u32,
    pos0: u32,
    stride: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let g = gid.x + gid.y * p.stride;
    if (g >= p.m * p.width / 2u) {
        return;
    }
    let pair = p.pos0 * p.width / 2u + g;
    k_put2(pair, k[2u * g], k[2u * g + 1u]);
    v_put2(pair, v[2u * g], v[2u * g + 1u]);
}
