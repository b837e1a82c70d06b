// ql[128], qh[64], scales[16] (i8), d (f16). Value j: half h = j/128, quarter q = (j%128)/32,
// l = j%32: low 4 bits from ql[64h + l + 32(q&1)] (low nibble for q < 2), 2 high bits from
// qh[32h + l] >> 2q; (v - 32)·d·scales[j/16].
const SUB: u32 = 16u;
fn scale_min(b: u32, s: u32) -> vec2<f32> {
    return vec2<f32>(f16_at(b + 208u) * i8_of(byte_at(b + 192u + s)), 0.0);
}
fn quant(b: u32, j: u32) -> f32 {
    let h = j >> 7u;
    let q = (j >> 5u) & 3u;
    let l = j & 31u;
    let lo = (byte_at(b + h * 64u + l + (q & 1u) * 32u) >> ((q >> 1u) << 2u)) & 15u;
    let hb = (byte_at(b + 128u + h * 32u + l) >> (2u * q)) & 3u;
    return f32(lo | (hb << 4u)) - 32.0;
}
fn quant4(b: u32, j: u32) -> vec4<f32> {
    let h = j >> 7u;
    let q = (j >> 5u) & 3u;
    let l = j & 31u;
    let lo = nib4(u32_at(b + h * 64u + l + (q & 1u) * 32u), (q >> 1u) << 2u);
    let hb = u32_at(b + 128u + h * 32u + l);
    let s = 2u * q;
    let hv = vec4<f32>(f32((hb >> s) & 3u), f32((hb >> (s + 8u)) & 3u), f32((hb >> (s + 16u)) & 3u), f32((hb >> (s + 24u)) & 3u));
    return lo + 16.0 * hv - 32.0;
}
