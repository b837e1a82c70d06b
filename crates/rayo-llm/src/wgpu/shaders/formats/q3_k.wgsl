// hmask[32], qs[64], scales[12] (sixteen 6-bit scales), d (f16 at 108). Value j: half h = j/128,
// k = (j%128)/32, l = j%32: the low two bits (qs[32 + 32h + l] >> 2k) & 3, minus 4 unless bit
// 4h + k of hmask[l] is set; sub-block s = j/16 scales it by d·(scale_s − 32), scale_s = the
// low four bits of byte s%8 (nibble s/8) and bits 2(s/4).. of byte 8 + s%4 above them
// (ggml's dequantize_row_q3_K).
const SUB: u32 = 16u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    let lo = (byte_at(b + 96u + (s & 7u)) >> ((s >> 3u) << 2u)) & 15u;
    let hi = (byte_at(b + 104u + (s & 3u)) >> ((s >> 2u) << 1u)) & 3u;
    return vec2<f32>(f16_at(b + 108u) * (f32(lo | (hi << 4u)) - 32.0), 0.0);
}
fn quant(b: u32, j: u32) -> f32 {
    let k = (j >> 5u) & 3u;
    let l = j & 31u;
    let q = (byte_at(b + 32u + (j >> 7u) * 32u + l) >> (k << 1u)) & 3u;
    let h = (byte_at(b + l) >> (((j >> 7u) << 2u) + k)) & 1u;
    return f32(q) - 4.0 + 4.0 * f32(h);
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    let k = (j >> 5u) & 3u;
    let l = j & 31u;
    let v = u32_at(b + 32u + (j >> 7u) * 32u + l);
    let s = k << 1u;
    let q = vec4<f32>(f32((v >> s) & 3u), f32((v >> (s + 8u)) & 3u), f32((v >> (s + 16u)) & 3u), f32((v >> (s + 24u)) & 3u));
    return q - 4.0 + 4.0 * bit4(u32_at(b + l), ((j >> 7u) << 2u) + k);
}
