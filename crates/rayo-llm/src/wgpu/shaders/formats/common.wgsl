// Reading GGUF blocks in place: the weights are bound as `w: array<u32>` (the file's bytes,
// little-endian, padded to 4); blocks start at any even byte offset.
fn byte_at(o: u32) -> u32 {
    return (w[o >> 2u] >> ((o & 3u) << 3u)) & 0xffu;
}
// Two bytes at an even offset.
fn u16_at(o: u32) -> u32 {
    return (w[o >> 2u] >> ((o & 2u) << 3u)) & 0xffffu;
}
fn f16_at(o: u32) -> f32 {
    return unpack2x16float(u16_at(o)).x;
}
fn i8_of(v: u32) -> f32 {
    return f32(i32(v << 24u) >> 24u);
}
// Four bytes at any offset (two words combined when it is not a multiple of 4).
fn u32_at(o: u32) -> u32 {
    let sh = (o & 3u) << 3u;
    let lo = w[o >> 2u];
    if (sh == 0u) {
        return lo;
    }
    return (lo >> sh) | (w[(o >> 2u) + 1u] << (32u - sh));
}
// The 4-bit fields at bit sh of each byte of v.
fn nib4(v: u32, sh: u32) -> vec4<f32> {
    return vec4<f32>(f32((v >> sh) & 15u), f32((v >> (sh + 8u)) & 15u), f32((v >> (sh + 16u)) & 15u), f32((v >> (sh + 24u)) & 15u));
}
// Bit k of each byte of v.
fn bit4(v: u32, k: u32) -> vec4<f32> {
    return vec4<f32>(f32((v >> k) & 1u), f32((v >> (k + 8u)) & 1u), f32((v >> (k + 16u)) & 1u), f32((v >> (k + 24u)) & 1u));
}

// Q4_K/Q5_K: (d·scale, −dmin·min) of sub-block s, from the f16 d, dmin and the 12 packed bytes
// of six-bit scales and mins at b + 4 (ggml's get_scale_min_k4).
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
