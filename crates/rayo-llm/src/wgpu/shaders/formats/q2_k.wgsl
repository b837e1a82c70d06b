// scales[16] (a 4-bit scale and a 4-bit min per 16 values), qs[64], d, dmin (f16 at 80, 82).
// Value j: half h = j/128, shift 2·((j%128)/32), l = j%32: (qs[32h + l] >> shift) & 3; sub-block
// j/16 scales it by d·(scales & 15) and takes off dmin·(scales >> 4) (ggml's dequantize_row_q2_K).
const SUB: u32 = 16u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    let sc = byte_at(b + s);
    return vec2<f32>(f16_at(b + 80u) * f32(sc & 15u), -f16_at(b + 82u) * f32(sc >> 4u));
}
fn quant(b: u32, j: u32) -> f32 {
    return f32((byte_at(b + 16u + (j >> 7u) * 32u + (j & 31u)) >> (((j >> 5u) & 3u) << 1u)) & 3u);
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    let v = u32_at(b + 16u + (j >> 7u) * 32u + (j & 31u));
    let s = ((j >> 5u) & 3u) << 1u;
    return vec4<f32>(f32((v >> s) & 3u), f32((v >> (s + 8u)) & 3u), f32((v >> (s + 16u)) & 3u), f32((v >> (s + 24u)) & 3u));
}
