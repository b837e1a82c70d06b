// d, m (f16); qs[16] as Q4_0; value q·d + m.
const SUB: u32 = 32u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return vec2<f32>(f16_at(b), f16_at(b + 2u));
}
fn quant(b: u32, j: u32) -> f32 {
    return f32((byte_at(b + 4u + (j & 15u)) >> ((j >> 4u) << 2u)) & 15u);
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    return nib4(u32_at(b + 4u + (j & 15u)), (j >> 4u) << 2u);
}
