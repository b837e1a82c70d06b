// Attention scores in f32: q (in qs) · the key at kb, over hd values.
fn prepare_q(t: u32, hd: u32) {}
fn score(kb: u32, hd: u32) -> f32 {
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) {
        dot += qs[d] * k_get(kb + d);
    }
    return dot;
}
