// A KV cache of f16 values, two to a u32 (pack2x16float: core WGSL, no shader-f16 needed).
@group(0) @binding(3) var<storage, read_write> kc: array<u32>;
@group(0) @binding(4) var<storage, read_write> vc: array<u32>;
fn k_get(i: u32) -> f32 {
    return unpack2x16float(kc[i >> 1u])[i & 1u];
}
fn v_get(i: u32) -> f32 {
    return unpack2x16float(vc[i >> 1u])[i & 1u];
}
fn k_put2(pair: u32, a: f32, b: f32) {
    kc[pair] = pack2x16float(vec2<f32>(a, b));
}
fn v_put2(pair: u32, a: f32, b: f32) {
    vc[pair] = pack2x16float(vec2<f32>(a, b));
}
const KV_F16: bool = true;
