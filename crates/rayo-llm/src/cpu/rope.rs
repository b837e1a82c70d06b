//! Rotary position embedding on the CPU, computed as ggml computes it (so that the angles
//! agree to the bit): θᵢ = pos · scaleⁱ with `scale = base^(−2/n_rot)` built by repeated f32
//! multiplication (times the position scale, where the model scales positions), `cosf`/`sinf`
//! of each.

use crate::config::{Config, RopeStyle};

/// Rotates `q` (`m` rows of `n_head` heads) and `k` (`m` rows of `n_head_kv` heads) of
/// `layer` for the positions `pos0..pos0 + m`.
pub fn rope(cfg: &Config, layer: usize, q: &mut [f32], k: &mut [f32], pos0: usize) {
    let mut cs = vec![(0f32, 0f32); cfg.n_rot / 2];
    for (i, (qr, kr)) in q.chunks_exact_mut(cfg.q_width()).zip(k.chunks_exact_mut(cfg.kv_width())).enumerate() {
        angles(cfg, layer, pos0 + i, &mut cs);
        for head in qr.chunks_exact_mut(cfg.head_dim).chain(kr.chunks_exact_mut(cfg.head_dim)) {
            rotate(cfg.arch.rope, &mut head[..cfg.n_rot], &cs);
        }
    }
}

/// `(cos θᵢ, sin θᵢ)` of each pair at `pos` on `layer`.
fn angles(cfg: &Config, layer: usize, pos: usize, cs: &mut [(f32, f32)]) {
    let (base, pos_scale) = cfg.rope_of(layer);
    let scale = base.powf(-2.0 / cfg.n_rot as f32);
    let mut theta = pos as f32;
    for (i, c) in cs.iter_mut().enumerate() {
        // as ggml's rope: θ / factor, then times the position scale
        let t = cfg.rope_freqs.as_ref().map_or(theta, |f| theta / f[i]);
        let t = if pos_scale == 1.0 { t } else { pos_scale * t };
        // (times LongRoPE's attention factor; × 1 changes no bit)
        *c = (t.cos() * cfg.rope_attn_factor, t.sin() * cfg.rope_attn_factor);
        theta *= scale;
    }
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
/// The angles of positions `0..positions` as a GPU backend's table: `(cos, sin)` of each pair,
/// position-major, the same bits as [`rope`] uses on `layer`.
pub fn table(cfg: &Config, layer: usize, positions: usize) -> Vec<f32> {
    let mut cs = vec![(0f32, 0f32); cfg.n_rot / 2];
    let mut out = Vec::with_capacity(positions * cfg.n_rot);
    for pos in 0..positions {
        angles(cfg, layer, pos, &mut cs);
        out.extend(cs.iter().flat_map(|&(c, s)| [c, s]));
    }
    out
}

fn rotate(style: RopeStyle, x: &mut [f32], cs: &[(f32, f32)]) {
    let half = cs.len();
    for (j, &(c, s)) in cs.iter().enumerate() {
        let (a, b) = match style {
            RopeStyle::Adjacent => (2 * j, 2 * j + 1),
            RopeStyle::HalfSplit => (j, j + half),
        };
        let (x0, x1) = (x[a], x[b]);
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(style: RopeStyle) -> Config {
        Config {
            arch: crate::arch::with_rope(style),
            n_layer: 1,
            n_embd: 8,
            n_ff: 8,
            n_head: 2,
            n_head_kv: 1,
            head_dim: 4,
            n_rot: 4,
            rope_base: 10000.0,
            eps: 1e-5,
            context_length: 16,
            vocab_size: 4,
            rope_scale: 1.0,
            sliding_window: None,
            rope_freqs: None,
            long_rope: None,
            rope_attn_factor: 1.0,
            shard: crate::shard::Shard::ALONE,
        }
    }

    /// Against the definition in f64: pair (a, b) of every head turns by pos·base^(−2j/n_rot).
    #[test]
    fn rotates_pairs_by_the_position_angle() {
        for style in [RopeStyle::Adjacent, RopeStyle::HalfSplit] {
            let c = cfg(style);
            let q0: Vec<f32> = (0..8).map(|i| i as f32 * 0.37 - 1.0).collect();
            let k0: Vec<f32> = (0..4).map(|i| i as f32 * -0.21 + 0.5).collect();
            let (mut q, mut k) = (q0.clone(), k0.clone());
            rope(&c, 0, &mut q, &mut k, 5);
            for (orig, got) in q0.chunks(4).chain(k0.chunks(4)).zip(q.chunks(4).chain(k.chunks(4))) {
                for j in 0..2 {
                    let (a, b) = if style == RopeStyle::Adjacent { (2 * j, 2 * j + 1) } else { (j, j + 2) };
                    let th = 5.0 * 10000f64.powf(-2.0 * j as f64 / 4.0);
                    let (x0, x1) = (orig[a] as f64, orig[b] as f64);
                    assert!((got[a] as f64 - (x0 * th.cos() - x1 * th.sin())).abs() < 1e-5, "{style:?} {j}");
                    assert!((got[b] as f64 - (x0 * th.sin() + x1 * th.cos())).abs() < 1e-5, "{style:?} {j}");
                }
            }
        }
    }
}
