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
