// d, dmin (f16); scales[12] (eight 6-bit scale/min pairs); qs[128]. Per 64 values, 32 bytes:
// low nibbles are the first 32 (sub-block 2c), high nibbles the next 32 (2c + 1).
const QK: u32 = 256u;
const BB: u32 = 144u;
const SUB: u32 = 32u;
// ggml's get_scale_min_k4 over the 12 bytes at b + 4.
fn k4_scale_min(b: u32, s: u32) -> vec2<f32> {
    var sc: u32;
    var mn: u32;
    if (s < 4u) {
        sc = byte_at(b + 4u + s) & 63u;
        mn = byte_at(b + 8u + s) & 63u;
    } else {
        sc = (byte_at(b + 8u + s) & 15u) | ((byte_at(b + s) >> 6u) << 4u);
        mn = (byte_at(b + 8u + s) >> 4u) | ((byte_at(b + 4u + s) >> 6u) << 4u);
    }
    return vec2<f32>(f16_at(b) * f32(sc), -f16_at(b + 2u) * f32(mn));
}
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
