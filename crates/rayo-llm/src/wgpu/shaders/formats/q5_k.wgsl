// As Q4_K, with qh[32] at b + 16 (the fifth bit of value j of 64-value chunk c is bit
// 2c + (j/32 & 1) of qh[j % 32]) and qs[128] at b + 48.
const SUB: u32 = 32u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return k4_scale_min(b, s);
}
fn quant(b: u32, j: u32) -> f32 {
    let c = j >> 6u;
    let l = j & 31u;
    let hi = (j >> 5u) & 1u;
    let lo = (byte_at(b + 48u + c * 32u + l) >> (hi << 2u)) & 15u;
    let h = (byte_at(b + 16u + l) >> (2u * c + hi)) & 1u;
    return f32(lo | (h << 4u));
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    let c = j >> 6u;
    let l = j & 31u;
    let hi = (j >> 5u) & 1u;
    return nib4(u32_at(b + 48u + c * 32u + l), hi << 2u) + 16.0 * bit4(u32_at(b + 16u + l), 2u * c + hi);
}
