// d, m (f16); qh; qs[16] as Q5_0; value q·d + m.
const SUB: u32 = 32u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return vec2<f32>(f16_at(b), f16_at(b + 2u));
}
fn quant(b: u32, j: u32) -> f32 {
    let qh = u16_at(b + 4u + ((j >> 4u) << 1u)) >> (j & 15u);
    let lo = (byte_at(b + 8u + (j & 15u)) >> ((j >> 4u) << 2u)) & 15u;
    return f32(lo | ((qh & 1u) << 4u));
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    let hi = (u32_at(b + 4u) >> j) & 15u;
    let h = vec4<f32>(f32(hi & 1u), f32((hi >> 1u) & 1u), f32((hi >> 2u) & 1u), f32(hi >> 3u));
    return nib4(u32_at(b + 8u + (j & 15u)), (j >> 4u) << 2u) + 16.0 * h;
}
