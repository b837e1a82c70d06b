// A KV cache of f32 values.
@group(0) @binding(3) var<storage, read_write> kc: array<f32>;
@group(0) @binding(4) var<storage, read_write> vc: array<f32>;
fn k_get(i: u32) -> f32 {
    return kc[i];
}
fn v_get(i: u32) -> f32 {
    return vc[i];
}
fn k_put2(pair: u32, a: f32, b: f32) {
    kc[2u * pair] = a;
    kc[2u * pair + 1u] = b;
}
fn v_put2(pair: u32, a: f32, b: f32) {
    vc[2u * pair] = a;
    vc[2u * pair + 1u] = b;
}
const KV_F16: bool = false;
