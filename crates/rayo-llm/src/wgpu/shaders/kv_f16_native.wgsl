enable f16;
// A KV cache of f16 values read and written as `f16` (the adapter has shader-f16): the same
// bytes as kv_f16.wgsl's packed pairs, without the unpacking.
@group(0) @binding(3) var<storage, read_write> kc: array<vec2<f16>>;
@group(0) @binding(4) var<storage, read_write> vc: array<vec2<f16>>;
fn k_get(i: u32) -> f32 {
    return f32(kc[i >> 1u][i & 1u]);
}
fn v_get(i: u32) -> f32 {
    return f32(vc[i >> 1u][i & 1u]);
}
fn k_put2(pair: u32, a: f32, b: f32) {
    kc[pair] = vec2<f16>(vec2<f32>(a, b));
}
fn v_put2(pair: u32, a: f32, b: f32) {
    vc[pair] = vec2<f16>(vec2<f32>(a, b));
}
const KV_F16: bool = true;
