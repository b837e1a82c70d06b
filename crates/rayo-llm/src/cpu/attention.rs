//! The KV cache and causal grouped-query attention on the CPU.
//!
//! Layout: per layer, keys and values each `positions × kv_width` (one row per position, the
//! key/value heads side by side), f16 or f32. Attention reads the prefix `0..=pos` once per
//! batch (converted to f32 once for an f16 cache), then per query head: scores by dot
//! products, softmax, and the weighted sum of the values.

use crate::backend::KvType;
use crate::config::Config;
use half::f16;
use rayo::quant::{self, GgmlType};
use rayo::{Error, Result};

enum Store {
    F16(Vec<u16>),
    F32(Vec<f32>),
}

/// The keys and values of every layer for up to `positions` positions.
pub struct CpuKv {
    store_k: Store,
    store_v: Store,
    positions: usize,
    width: usize,
    keys: Vec<f32>,
    values: Vec<f32>,
    scores: Vec<f32>,
    probs: Vec<f32>,
}

fn alloc<T: Clone + Default>(n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory { op: "KV cache", bytes: (n * std::mem::size_of::<T>()) as u64 })?;
    v.resize(n, T::default());
    Ok(v)
}

impl CpuKv {
    pub fn new(cfg: &Config, positions: usize, ty: KvType) -> Result<CpuKv> {
        let width = cfg.kv_width();
        let n = cfg.n_layer.checked_mul(positions).and_then(|v| v.checked_mul(width)).ok_or(Error::SizeOverflow { op: "KV cache", dims: vec![cfg.n_layer, positions, width] })?;
        let store = || -> Result<Store> {
            Ok(match ty {
                KvType::F16 => Store::F16(alloc(n)?),
                KvType::F32 => Store::F32(alloc(n)?),
            })
        };
        Ok(CpuKv { store_k: store()?, store_v: store()?, positions, width, keys: Vec::new(), values: Vec::new(), scores: Vec::new(), probs: Vec::new() })
    }

    /// Bytes held by the cache.
    pub fn bytes(&self) -> usize {
        let one = |s: &Store| match s {
            Store::F16(v) => v.len() * 2,
            Store::F32(v) => v.len() * 4,
        };
        one(&self.store_k) + one(&self.store_v)
    }

    fn range(&self, layer: usize, p0: usize, p1: usize) -> Result<std::ops::Range<usize>> {
        if p1 > self.positions {
            return Err(Error::Model { what: format!("position {} is past the KV cache's {} positions", p1 - 1, self.positions) });
        }
        let base = layer * self.positions * self.width;
        Ok(base + p0 * self.width..base + p1 * self.width)
    }

    /// Writes `m = k.len() / width` rows of keys and values at positions `pos0..pos0 + m`.
    pub fn store(&mut self, layer: usize, pos0: usize, k: &[f32], v: &[f32]) -> Result<()> {
        let r = self.range(layer, pos0, pos0 + k.len() / self.width)?;
        for (store, src) in [(&mut self.store_k, k), (&mut self.store_v, v)] {
            match store {
                Store::F16(d) => d[r.clone()].iter_mut().zip(src).for_each(|(d, &s)| *d = f16::from_f32(s).to_bits()),
                Store::F32(d) => d[r.clone()].copy_from_slice(src),
            }
        }
        Ok(())
    }

    /// Rows `0..n` of `layer` as f32 into `keys` and `values`.
    fn load(&mut self, layer: usize, n: usize, simd: rayo::Backend) -> Result<()> {
        let r = self.range(layer, 0, n)?;
        for (store, out) in [(&self.store_k, &mut self.keys), (&self.store_v, &mut self.values)] {
            out.resize(r.len(), 0.0);
            match store {
                Store::F16(d) => quant::dequantize_with(simd, GgmlType::F16, bytemuck_u16(&d[r.clone()]), out)?,
                Store::F32(d) => out.copy_from_slice(&d[r.clone()]),
            }
        }
        Ok(())
    }

    /// Attention of `m` query rows at positions `pos0..pos0 + m` (each over `0..=pos`) into
    /// `out` (`m × q_width`).
    pub fn attend(&mut self, simd: rayo::Backend, cfg: &Config, layer: usize, q: &[f32], pos0: usize, out: &mut [f32]) -> Result<()> {
        let (hd, qw, group) = (cfg.head_dim, cfg.q_width(), cfg.group());
        let m = q.len() / qw;
        self.load(layer, pos0 + m, simd)?;
        let f16_cache = matches!(self.store_k, Store::F16(_));
        let scale = 1.0 / (hd as f32).sqrt();
        let mut qh = vec![0f32; hd];
        for i in 0..m {
            let n = pos0 + i + 1;
            self.scores.resize(n, 0.0);
            self.probs.resize(n, 0.0);
            for h in 0..cfg.n_head {
                let g = h / group;
                qh.copy_from_slice(&q[i * qw + h * hd..][..hd]);
                if f16_cache {
                    // llama.cpp takes the query to the cache's type for the K·Q products.
                    qh.iter_mut().for_each(|v| *v = f16::from_f32(*v).to_f32());
                }
                for (j, s) in self.scores.iter_mut().enumerate() {
                    *s = rayo::slice::dot(simd, &qh, &self.keys[j * self.width + g * hd..][..hd])? * scale;
                }
                rayo::slice::softmax(simd, &self.scores, &mut self.probs)?;
                let o = &mut out[i * qw + h * hd..][..hd];
                o.fill(0.0);
                for (j, &p) in self.probs.iter().enumerate() {
                    let vr = &self.values[j * self.width + g * hd..][..hd];
                    o.iter_mut().zip(vr).for_each(|(o, v)| *o += p * v);
                }
            }
        }
        Ok(())
    }
}

/// The bytes of a `u16` slice (little-endian targets: f16 bits as GGUF stores them).
fn bytemuck_u16(v: &[u16]) -> &[u8] {
    bytemuck::cast_slice(v)
}
