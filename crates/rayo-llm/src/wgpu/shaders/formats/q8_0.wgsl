// d (f16); qs[32] (i8); value q·d.
const QK: u32 = 32u;
const BB: u32 = 34u;
const SUB: u32 = 32u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return vec2<f32>(f16_at(b), 0.0);
}
fn quant(b: u32, j: u32) -> f32 {
    return i8_of(byte_at(b + 2u + j));
}
