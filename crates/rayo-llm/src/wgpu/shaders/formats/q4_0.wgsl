// d (f16); qs[16]: low nibbles are values 0..15, high nibbles 16..31; value (q - 8)·d.
const SUB: u32 = 32u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return vec2<f32>(f16_at(b), 0.0);
}
fn quant(b: u32, j: u32) -> f32 {
    return f32((byte_at(b + 2u + (j & 15u)) >> ((j >> 4u) << 2u)) & 15u) - 8.0;
}
// Values j..j+3 (j a multiple of 4).
fn quant4(b: u32, j: u32) -> vec4<f32> {
    return nib4(u32_at(b + 2u + (j & 15u)), (j >> 4u) << 2u) - 8.0;
}
