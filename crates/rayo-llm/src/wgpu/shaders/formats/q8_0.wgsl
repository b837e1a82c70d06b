// d (f16); qs[32] (i8); value q·d.
const SUB: u32 = 32u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return vec2<f32>(f16_at(b), 0.0);
}
fn quant(b: u32, j: u32) -> f32 {
    return i8_of(byte_at(b + 2u + j));
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    let v = u32_at(b + 2u + j);
    return vec4<f32>(i8_of(v & 255u), i8_of((v >> 8u) & 255u), i8_of((v >> 16u) & 255u), i8_of(v >> 24u));
}
