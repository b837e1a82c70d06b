// Attention scores in f16 math (shader-f16, an f16 cache read as f16, an even head size): the
// query as f16 pairs, each pair's two products and their sum in f16, the pairs summed in f32.
// Each pair's sum is within 2⁻¹⁰·(|q₀k₀| + |q₁k₁|) of the exact one.
var<workgroup> qh: array<vec2<f16>, 128>;
fn prepare_q(t: u32, hd: u32) {
    for (var d2 = t; d2 < hd / 2u; d2 += 64u) {
        qh[d2] = vec2<f16>(vec2<f32>(qs[2u * d2], qs[2u * d2 + 1u]));
    }
}
fn score(kb: u32, hd: u32) -> f32 {
    var s = 0.0;
    let k2 = kb >> 1u;
    for (var d2 = 0u; d2 < hd / 2u; d2++) {
        s += f32(dot(qh[d2], kc[k2 + d2]));
    }
    return s;
}
