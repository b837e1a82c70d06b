// d, dmin (f16); scales[12] (eight 6-bit scale/min pairs); qs[128]. Per 64 values, 32 bytes:
// low nibbles are the first 32 (sub-block 2c), high nibbles the next 32 (2c + 1).
const SUB: u32 = 32u;
// (scale, min) of sub-block s: `k4_scale_min` (common.wgsl).
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return k4_scale_min(b, s);
}
fn quant(b: u32, j: u32) -> f32 {
    let c = j >> 6u;
    let l = j & 31u;
    return f32((byte_at(b + 16u + c * 32u + l) >> (((j >> 5u) & 1u) << 2u)) & 15u);
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    return nib4(u32_at(b + 16u + (j >> 6u) * 32u + (j & 31u)), ((j >> 5u) & 1u) << 2u);
}
