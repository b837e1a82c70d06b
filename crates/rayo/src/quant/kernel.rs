//! Dequantization written once over [`Simd`]: a block is unpacked to small integers and
//! per-group coefficients ([`Unpack`]), then each group is `d·q` (`± m`) a vector at a time —
//! the same f32 operations as the scalar definition ([`BlockCodec::dequantize`]), so every ISA
//! gives the same bits.

use super::codec::{MinKind, Unpack};
use crate::cpu::simd::Simd;

/// Dequantizes `blocks` into `out` (`blocks.len() · VALUES` values).
#[inline(always)]
pub(crate) fn dequantize_blocks<S: Simd, B: Unpack>(s: S, blocks: &[B], out: &mut [f32]) {
    let mut q = [0i8; 256];
    let mut d = [0f32; 16];
    let mut m = [0f32; 16];
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(B::VALUES)) {
        b.unpack(&mut q, &mut d, &mut m);
        for (g, (o, q)) in o.chunks_exact_mut(B::GROUP).zip(q.chunks_exact(B::GROUP)).enumerate() {
            let dv = s.splat(d[g]);
            let mv = s.splat(m[g]);
            for (o, q) in o.chunks_exact_mut(S::LANES).zip(q.chunks_exact(S::LANES)) {
                let v = s.mul(dv, s.load_i8(q));
                let v = match B::MIN {
                    MinKind::None => v,
                    MinKind::Add => s.add(v, mv),
                    MinKind::Sub => s.sub(v, mv),
                };
                s.store(o, v);
            }
        }
    }
}
