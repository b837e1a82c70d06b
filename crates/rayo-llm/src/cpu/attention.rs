//! The KV cache and causal grouped-query attention on the CPU.
//!
//! Layout: per layer, keys and values each `positions × kv_width` (one row per position, the
//! key/value heads side by side), f16 or f32. Attention reads the prefix `0..=pos` once per
//! batch (converted to f32 once for an f16 cache), then per query head: scores (Q·Kᵀ),
//! a causal softmax per row, and the weighted sum of the values (P·V); GEMMs for a batch, dot
//! products for one row.

use crate::backend::KvType;
use crate::config::Config;
use crate::{Error, Result};
use half::f16;
use rayo::quant::{self, GgmlType};
use rayo::{MatMut, MatRef, Par};

/// One layer's keys or values: `used` positions of `width` values, grown as positions are
/// written (so memory follows the positions in use, not the context's size).
enum Store {
    F16(Vec<u16>),
    F32(Vec<f32>),
}

impl Store {
    fn len(&self) -> usize {
        match self {
            Store::F16(v) => v.len(),
            Store::F32(v) => v.len(),
        }
    }

    /// Grows to at least `n` values (never shrinks), an error when memory runs out.
    fn reserve(&mut self, n: usize) -> Result<()> {
        fn grow<T: Clone + Default>(v: &mut Vec<T>, n: usize) -> Result<()> {
            if v.len() < n {
                v.try_reserve(n - v.len()).map_err(|_| rayo::Error::OutOfMemory { op: "KV cache", bytes: (n * std::mem::size_of::<T>()) as u64 })?;
                v.resize(n, T::default());
            }
            Ok(())
        }
        match self {
            Store::F16(v) => grow(v, n),
            Store::F32(v) => grow(v, n),
        }
    }

    fn write(&mut self, at: usize, src: &[f32]) {
        match self {
            Store::F16(d) => d[at..at + src.len()].iter_mut().zip(src).for_each(|(d, &s)| *d = f16::from_f32(s).to_bits()),
            Store::F32(d) => d[at..at + src.len()].copy_from_slice(src),
        }
    }

    /// Values `0..n` as f32 into `out`.
    fn read(&self, n: usize, simd: rayo::Backend, out: &mut Vec<f32>) -> Result<()> {
        out.resize(n, 0.0);
        match self {
            Store::F16(d) => quant::dequantize_with(simd, GgmlType::F16, bytemuck::cast_slice(&d[..n]), out).map_err(crate::Error::from),
            Store::F32(d) => {
                out.copy_from_slice(&d[..n]);
                Ok(())
            }
        }
    }
}

/// The keys and values of every layer for up to `positions` positions.
pub struct CpuKv {
    /// Per layer: (keys, values).
    layers: Vec<(Store, Store)>,
    positions: usize,
    width: usize,
    /// The prefix in f32 (reused between calls).
    keys: Vec<f32>,
    values: Vec<f32>,
    scores: Vec<f32>,
    probs: Vec<f32>,
}

impl CpuKv {
    pub fn new(cfg: &Config, positions: usize, ty: KvType) -> Result<CpuKv> {
        let width = cfg.kv_width();
        positions
            .checked_mul(width)
            .and_then(|v| v.checked_mul(cfg.n_layer))
            .and_then(|v| v.checked_mul(8))
            .ok_or(rayo::Error::SizeOverflow { op: "KV cache", dims: vec![cfg.n_layer, positions, width] })?;
        let store = || match ty {
            KvType::F16 => Store::F16(Vec::new()),
            KvType::F32 => Store::F32(Vec::new()),
        };
        Ok(CpuKv {
            layers: (0..cfg.n_layer).map(|_| (store(), store())).collect(),
            positions,
            width,
            keys: Vec::new(),
            values: Vec::new(),
            scores: Vec::new(),
            probs: Vec::new(),
        })
    }

    /// Bytes held by the cache now.
    pub fn bytes(&self) -> usize {
        let one = |s: &Store| match s {
            Store::F16(v) => v.len() * 2,
            Store::F32(v) => v.len() * 4,
        };
        self.layers.iter().map(|(k, v)| one(k) + one(v)).sum()
    }

    /// Writes `m = k.len() / width` rows of keys and values at positions `pos0..pos0 + m`.
    pub fn store(&mut self, layer: usize, pos0: usize, k: &[f32], v: &[f32]) -> Result<()> {
        let end = pos0 + k.len() / self.width;
        if end > self.positions {
            return Err(Error::backend("cpu", format!("position {} is past the KV cache's {} positions", end - 1, self.positions)));
        }
        let (ks, vs) = &mut self.layers[layer];
        for (s, src) in [(ks, k), (vs, v)] {
            s.reserve(end * self.width)?;
            s.write(pos0 * self.width, src);
        }
        Ok(())
    }

    /// Attention of `m` query rows at positions `pos0..pos0 + m` (each over `0..=pos`, or the
    /// last [`Config::window`] positions of it) into `out` (`m × q_width`), on the calling
    /// thread.
    pub fn attend(&mut self, simd: rayo::Backend, cfg: &Config, layer: usize, q: &[f32], pos0: usize, out: &mut [f32]) -> Result<()> {
        let m = q.len() / cfg.q_width();
        let (keys, values) = (std::mem::take(&mut self.keys), std::mem::take(&mut self.values));
        let (keys, values) = self.prefix(simd, layer, pos0 + m, keys, values)?;
        let window = cfg.window(layer);
        let r = if m == 1 {
            self.attend_one(simd, cfg, window, &keys, &values, q, pos0, out)
        } else {
            Heads { cfg: cfg.clone(), width: self.width, f16: self.is_f16(), pos0, m, window }.attend(simd, q, &keys, &values, 0..cfg.n_head, out)
        };
        (self.keys, self.values) = (keys, values);
        r
    }

    /// Whether the cache holds f16.
    pub fn is_f16(&self) -> bool {
        matches!(self.layers.first(), Some((Store::F16(_), _)))
    }

    /// The keys and values of positions `0..n` of `layer` in f32, into `keys` and `values`
    /// (converted once per batch for an f16 cache). Errors: positions not stored yet.
    pub fn prefix(&self, simd: rayo::Backend, layer: usize, n: usize, mut keys: Vec<f32>, mut values: Vec<f32>) -> Result<(Vec<f32>, Vec<f32>)> {
        let (ks, vs) = &self.layers[layer];
        if ks.len() < n * self.width {
            return Err(Error::backend("cpu", format!("attention over {n} positions of layer {layer} before their keys were stored")));
        }
        ks.read(n * self.width, simd, &mut keys)?;
        vs.read(n * self.width, simd, &mut values)?;
        Ok((keys, values))
    }

    /// Values per cached position (the key/value heads side by side).
    pub fn width(&self) -> usize {
        self.width
    }

    /// One query row (decoding): per head, dot products with each key it sees, softmax, the
    /// weighted sum of the values.
    #[allow(clippy::too_many_arguments)]
    fn attend_one(
        &mut self,
        simd: rayo::Backend,
        cfg: &Config,
        window: Option<usize>,
        keys: &[f32],
        values: &[f32],
        q: &[f32],
        pos0: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let (hd, group) = (cfg.head_dim, cfg.group());
        // As llama.cpp's one-row kernel: the query is taken to the cache's f16 for Q·K.
        let round_q = self.is_f16();
        let scale = 1.0 / (hd as f32).sqrt();
        // the positions seen: `lo..=pos0`
        let lo = window.map_or(0, |w| (pos0 + 1).saturating_sub(w));
        let (keys, values) = (&keys[lo * self.width..], &values[lo * self.width..]);
        let n = pos0 + 1 - lo;
        self.scores.resize(n, 0.0);
        self.probs.resize(n, 0.0);
        let mut qh = vec![0f32; hd];
        for h in 0..cfg.n_head {
            let g = h / group;
            qh.copy_from_slice(&q[h * hd..][..hd]);
            if round_q {
                qh.iter_mut().for_each(|v| *v = f16::from_f32(*v).to_f32());
            }
            // each score the bits of `slice::dot` with the key, in one call for all positions
            rayo::slice::dot_rows(simd, &qh, &keys[g * hd..], self.width, &mut self.scores)?;
            self.scores.iter_mut().for_each(|s| *s *= scale);
            rayo::slice::softmax(simd, &self.scores, &mut self.probs)?;
            let o = &mut out[h * hd..][..hd];
            o.fill(0.0);
            for (j, &p) in self.probs.iter().enumerate() {
                let vr = &values[j * self.width + g * hd..][..hd];
                o.iter_mut().zip(vr).for_each(|(o, v)| *o += p * v);
            }
        }
        Ok(())
    }
}

/// A batch's causal attention, head by head, so that threads can take ranges of heads.
pub struct Heads {
    pub cfg: Config,
    /// Values per cached position.
    pub width: usize,
    /// The cache holds f16 (a batch under 64 rows then takes its queries to f16).
    pub f16: bool,
    pub pos0: usize,
    pub m: usize,
    /// A local layer's window ([`Config::window`]), else `None`.
    pub window: Option<usize>,
}

impl Heads {
    /// Heads `heads` of the `m` query rows `q` (`m × q_width`) over `keys` and `values`
    /// (positions `0..pos0 + m`) into `out` (`m × heads.len() · head_dim`): per head,
    /// scores = Q·Kᵀ and out = P·V as two small GEMMs over the prefix (row i sees positions
    /// `0..=pos0 + i`, or the last `window` of them; the rest of its row is masked).
    pub fn attend(&self, simd: rayo::Backend, q: &[f32], keys: &[f32], values: &[f32], heads: std::ops::Range<usize>, out: &mut [f32]) -> Result<()> {
        let (cfg, m, pos0) = (&self.cfg, self.m, self.pos0);
        let (hd, qw, group) = (cfg.head_dim, cfg.q_width(), cfg.group());
        let ow = heads.len() * hd;
        let n = pos0 + m;
        // As llama.cpp's CPU flash attention: a batch under 64 rows (its one-row kernel) takes
        // the query to the cache's f16 for the K·Q products; a larger one (its tiled kernel)
        // keeps it in f32.
        let rounded: Vec<f32>;
        let q = if self.f16 && m < 64 {
            rounded = q.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
            &rounded[..]
        } else {
            q
        };
        let scale = 1.0 / (hd as f32).sqrt();
        let (mut scores, mut probs) = (vec![0f32; m * n], vec![0f32; m * n]);
        for (k, h) in heads.enumerate() {
            let g = h / group;
            let qv = MatRef::new(&q[h * hd..], m, hd, qw, 1)?;
            let kv = MatRef::new(&keys[g * hd..], n, hd, self.width, 1)?.t();
            rayo::gemm_par(simd, Par::Seq, scale, qv, kv, 0.0, MatMut::new(&mut scores, m, n, n, 1)?)?;
            for (i, (s, p)) in scores.chunks_exact(n).zip(probs.chunks_exact_mut(n)).enumerate() {
                let seen = pos0 + i + 1;
                let lo = self.window.map_or(0, |w| seen.saturating_sub(w));
                rayo::slice::softmax(simd, &s[lo..seen], &mut p[lo..seen])?;
                p[..lo].fill(0.0);
                p[seen..].fill(0.0);
            }
            let pv = MatRef::new(&probs, m, n, n, 1)?;
            let vv = MatRef::new(&values[g * hd..], n, hd, self.width, 1)?;
            rayo::gemm_par(simd, Par::Seq, 1.0, pv, vv, 0.0, MatMut::new(&mut out[k * hd..], m, hd, ow, 1)?)?;
        }
        Ok(())
    }
}
