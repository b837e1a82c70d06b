//! The LLM's CUDA ops (`rayo_llm::cuda::ops`: the token embedding, RoPE, a layer's KV store
//! and attention, a decoding step's one-launch RoPE + attention, sampling's argmax and top-k, a
//! pass's inputs on the device) against f64 or the CPU on awkward shapes, outputs poisoned with
//! NaN. `RAYO_REQUIRE_CUDA=1` turns "no device" into a failure; without it each test prints one
//! `SKIP cuda: <test> (no device)` line.
#![cfg(feature = "cuda")]

use rayo::cuda::{CudaDevice, DeviceBuffer};
use rayo::Error;
use rayo_llm::cuda::ops::{argmax, top_k, AttentionShape, DecodeScratch, LayerCache, Rope, RopePairs, StepInputs};

fn device(test: &str) -> Option<&'static CudaDevice> {
    match CudaDevice::global() {
        Ok(d) => {
            println!("cuda device: {}", d.info());
            Some(d)
        }
        Err(e) => {
            let required = std::env::var("RAYO_REQUIRE_CUDA").map(|v| v == "1").unwrap_or(false);
            assert!(!required, "RAYO_REQUIRE_CUDA=1 but no CUDA device: {e}");
            println!("SKIP cuda: {test} (no device)");
            None
        }
    }
}

/// xorshift: reproducible inputs without a dependency; a fresh seed per call site.
struct Rng(u64);
impl Rng {
    fn f(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (hi - lo) * ((self.0 >> 40) as f32 / (1u64 << 24) as f32)
    }
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f(lo, hi)).collect()
    }
}

/// RoPE's `(cos, sin)` table: position × pair, θ = p · 10000^(−2i/hd).
fn rope_table(positions: usize, hd: usize) -> Vec<f32> {
    (0..positions)
        .flat_map(|p| {
            (0..hd / 2).flat_map(move |i| {
                let t = p as f64 * 10000f64.powf(-2.0 * i as f64 / hd as f64);
                [t.cos() as f32, t.sin() as f32]
            })
        })
        .collect()
}

fn poisoned(dev: &CudaDevice, n: usize) -> DeviceBuffer {
    dev.upload(&vec![f32::NAN; n]).unwrap()
}

fn close(what: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        let tol = rel * w.abs() + abs;
        assert!(err <= tol, "{what}: element {i}: got {g}, want {w} (err {err:e} > tol {tol:e})");
        worst = worst.max(err / (w.abs() + abs));
    }
    println!("ok {what}: worst scaled error {worst:.2e}");
}

/// The token embedding dequantizes rows of a table in every kernel format exactly as the CPU
/// does, writes nothing past its rows, and refuses ids past the table.
#[test]
fn embed_rows_match_the_cpu_for_every_format() {
    use rayo::cuda::QFormat;
    use rayo::quant::{self, GgmlType};
    let Some(dev) = device("embed_rows_match_the_cpu_for_every_format") else { return };
    let mut rng = Rng(0x5eed_e3b0);
    let table = quant::formats::FORMATS.iter().filter(|f| f.kernels.ptx);
    let formats: Vec<QFormat> = table.map(|f| QFormat::of_id(f.id).expect("the table's PTX column")).collect();
    assert_eq!(formats.len(), QFormat::ALL.len());
    for fmt in formats {
        let ty = GgmlType::from_id(fmt.id()).expect("a QFormat is a GGUF type");
        let shapes: &[(usize, usize, usize)] = if fmt.block_values() == 256 {
            &[(1, 256, 1), (67, 768, 1), (13, 512, 3)]
        } else {
            &[(1, 32, 1), (67, 96, 1), (13, 576, 3), (130, 1536, 2)]
        };
        for &(rows, cols, m) in shapes {
            let wf = rng.vec(rows * cols, -1.0, 1.0);
            let bytes = quant::quantize_to_vec(ty, &wf).unwrap();
            let mut wd = vec![0f32; rows * cols];
            quant::dequantize(ty, &bytes, &mut wd).unwrap();
            let w = dev.upload_bytes(&bytes).unwrap();
            let ids: Vec<u32> = (0..m as u32).map(|i| (i * 7 + 3) % rows as u32).collect();
            let mut inputs = StepInputs::new(dev, m, m, rows).unwrap();
            inputs.write(dev, &ids, 0).unwrap();
            let mut e = poisoned(dev, m * cols + 1);
            inputs.step(dev).unwrap().embed(fmt, &w, (rows, cols), &mut e).unwrap();
            let got = dev.download(&e).unwrap();
            for (r, &id) in ids.iter().enumerate() {
                let want = &wd[id as usize * cols..][..cols];
                assert_eq!(&got[r * cols..][..cols], want, "embed {fmt:?} {rows}x{cols} row {r} (token {id})");
            }
            assert!(got[m * cols].is_nan(), "embed {fmt:?} wrote past its rows");
            // ids the inputs took (below their vocabulary) but past this table's rows
            let mut wide = StepInputs::new(dev, 1, 1, rows + 1).unwrap();
            wide.write(dev, &[rows as u32], 0).unwrap();
            let r = wide.step(dev).unwrap().embed(fmt, &w, (rows, cols), &mut e);
            assert!(matches!(r, Err(Error::InvalidArgument { name: "token", .. })), "{r:?}");
        }
    }
}

/// A decoding step's RoPE, KV store and attention (split over the positions) in one launch
/// agree with the rotation-and-store launch followed by the attention launch, and store the same
/// cache row bit for bit (an attention at the next position reads it).
#[test]
fn fused_rope_attention_step_agrees_with_the_two_launches() {
    let Some(dev) = device("fused_rope_attention_step_agrees_with_the_two_launches") else { return };
    let mut rng = Rng(0x5eed_a77e);
    for (hd, pairs, f16, positions, pos0, window) in [
        (64, RopePairs::Adjacent, true, 64, 37, None),
        (64, RopePairs::Adjacent, false, 64, 0, None),
        (32, RopePairs::Adjacent, true, 64, 5, None),
        (128, RopePairs::HalfSplit, true, 64, 37, None),
        (64, RopePairs::HalfSplit, false, 64, 62, None),
        (64, RopePairs::Adjacent, true, 1024, 700, None),
        // Gemma 3's heads, and sliding windows (one of a single position)
        (256, RopePairs::HalfSplit, true, 64, 37, None),
        (256, RopePairs::HalfSplit, false, 1024, 700, Some(100)),
        (64, RopePairs::Adjacent, true, 1024, 700, Some(33)),
        (128, RopePairs::HalfSplit, true, 64, 37, Some(1)),
    ] {
        let (n_head, n_head_kv) = (6, 2);
        let shape = AttentionShape { n_head, n_head_kv, head_dim: hd, positions, f16, window };
        let width = n_head_kv * hd;
        let bytes = positions * width * if f16 { 2 } else { 4 };
        let table = rope_table(positions, hd);
        let table = dev.upload(&table).unwrap();
        let mut inputs = StepInputs::new(dev, positions, positions, 1).unwrap();
        let (mut kc, mut vc) =
            ([dev.zero_bytes(bytes).unwrap(), dev.zero_bytes(bytes).unwrap()], [dev.zero_bytes(bytes).unwrap(), dev.zero_bytes(bytes).unwrap()]);
        // earlier positions
        if pos0 > 0 {
            let (kp, vp) = (dev.upload(&rng.vec(pos0 * width, -2.0, 2.0)).unwrap(), dev.upload(&rng.vec(pos0 * width, -2.0, 2.0)).unwrap());
            inputs.write(dev, &vec![0; pos0], 0).unwrap();
            for c in 0..2 {
                let [k0, k1] = &mut kc;
                let [v0, v1] = &mut vc;
                let (kcache, vcache) = if c == 0 { (k0, v0) } else { (k1, v1) };
                LayerCache { shape, k: kcache, v: vcache }.store(&inputs.step_at(dev, 0, pos0).unwrap(), &kp, &vp).unwrap();
            }
        }
        // the step at pos0
        let (qh, kh, vh) = (rng.vec(n_head * hd, -2.0, 2.0), rng.vec(width, -2.0, 2.0), rng.vec(width, -2.0, 2.0));
        let v = dev.upload(&vh).unwrap();
        inputs.write(dev, &[0], pos0).unwrap();
        let scale = 1.0 / (hd as f32).sqrt();
        let (mut q1, mut k1) = (dev.upload(&qh).unwrap(), dev.upload(&kh).unwrap());
        let (mut out_a, mut out_b) = (poisoned(dev, n_head * hd), poisoned(dev, n_head * hd));
        let [ka, kb] = &mut kc;
        let [va, vb] = &mut vc;
        let rope = Rope { pairs, table: &table, n_rot: hd };
        let st = inputs.step_at(dev, pos0, 1).unwrap();
        let mut a_cache = LayerCache { shape, k: ka, v: va };
        a_cache.rope_store(&st, &rope, &mut q1, &mut k1, &v).unwrap();
        // the rotation itself against f64
        let rotated = dev.download(&q1).unwrap();
        let half = hd / 2;
        for h in 0..n_head {
            for i in 0..half {
                let (a, b) = match pairs {
                    RopePairs::Adjacent => (2 * i, 2 * i + 1),
                    RopePairs::HalfSplit => (i, i + half),
                };
                let t = pos0 as f64 * 10000f64.powf(-2.0 * i as f64 / hd as f64);
                let (x, y) = (qh[h * hd + a] as f64, qh[h * hd + b] as f64);
                for (j, w) in [(a, x * t.cos() - y * t.sin()), (b, x * t.sin() + y * t.cos())] {
                    let g = rotated[h * hd + j] as f64;
                    assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "head_dim {hd} {pairs:?}: head {h} value {j}: {g} vs {w}");
                }
            }
        }
        a_cache.attend(&st, &q1, (scale, f16), &mut out_a).unwrap();
        let (q2, k2) = (dev.upload(&qh).unwrap(), dev.upload(&kh).unwrap());
        let mut scratch = DecodeScratch::new(dev, n_head, hd).unwrap();
        LayerCache { shape, k: kb, v: vb }.decode(&st, &rope, (&q2, &k2, &v), (scale, f16), &mut scratch, &mut out_b).unwrap();
        let what = format!("head_dim {hd} {pairs:?} f16 {f16} window {window:?}");
        let (a, b) = (dev.download(&out_a).unwrap(), dev.download(&out_b).unwrap());
        assert!(a.iter().all(|x| x.is_finite()), "{what}");
        // (split over the positions: the same terms summed in another order)
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-5 + 1e-5 * x.abs(), "{what}: {x} vs {y}");
        }
        // the next position reads the row each path stored at pos0
        let (kn, vn) = (dev.upload(&rng.vec(width, -2.0, 2.0)).unwrap(), dev.upload(&rng.vec(width, -2.0, 2.0)).unwrap());
        let qn = dev.upload(&rng.vec(n_head * hd, -2.0, 2.0)).unwrap();
        inputs.write(dev, &[0], pos0 + 1).unwrap();
        let mut outs = Vec::new();
        for (kcache, vcache) in [(&mut *ka, &mut *va), (&mut *kb, &mut *vb)] {
            let st = inputs.step_at(dev, pos0 + 1, 1).unwrap();
            let mut cache = LayerCache { shape, k: kcache, v: vcache };
            cache.store(&st, &kn, &vn).unwrap();
            let mut o = poisoned(dev, n_head * hd);
            cache.attend(&st, &qn, (scale, f16), &mut o).unwrap();
            outs.push(dev.download(&o).unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }
        assert_eq!(outs[0], outs[1], "{what}: the stored row");
        // a rotation of part of the head is refused (the fused kernel rotates all of it)
        let st = inputs.step_at(dev, pos0 + 1, 1).unwrap();
        let part = Rope { n_rot: hd - 2, ..rope };
        let e = LayerCache { shape, k: kb, v: vb }.decode(&st, &part, (&q2, &k2, &v), (scale, f16), &mut scratch, &mut out_b);
        assert!(matches!(e, Err(Error::InvalidArgument { name: "n_rot", .. })), "{e:?}");
    }
}

/// The decoding step with the QK-norm in its launch (`decode_qk_normed`) equals the norms on
/// the host (f64, rounded to f32) followed by the plain step, within the norm's rounding:
/// heads of 64, 128 and 256 (Gemma 3's, with a window).
#[test]
fn decode_with_qk_norm_equals_the_norms_then_the_step() {
    let Some(dev) = device("decode_with_qk_norm_equals_the_norms_then_the_step") else { return };
    let mut rng = Rng(0x9c0f_4e11);
    let eps = 1e-6f32;
    for (hd, pairs, positions, pos0, window) in
        [(64, RopePairs::Adjacent, 64, 20, None), (128, RopePairs::HalfSplit, 256, 200, None), (256, RopePairs::HalfSplit, 1024, 700, Some(512))]
    {
        let (n_head, n_head_kv) = (4, 1);
        let shape = AttentionShape { n_head, n_head_kv, head_dim: hd, positions, f16: true, window };
        let width = n_head_kv * hd;
        let table = dev.upload(&rope_table(positions, hd)).unwrap();
        let rope = Rope { pairs, table: &table, n_rot: hd };
        let mut inputs = StepInputs::new(dev, positions, positions, 1).unwrap();
        let mut caches: Vec<_> = (0..4).map(|_| dev.zero_bytes(positions * width * 2).unwrap()).collect();
        let (kp, vp) = (dev.upload(&rng.vec(pos0 * width, -2.0, 2.0)).unwrap(), dev.upload(&rng.vec(pos0 * width, -2.0, 2.0)).unwrap());
        inputs.write(dev, &vec![0; pos0], 0).unwrap();
        let [ka, va, kb, vb] = &mut caches[..] else { unreachable!() };
        for (kc, vc) in [(&mut *ka, &mut *va), (&mut *kb, &mut *vb)] {
            LayerCache { shape, k: kc, v: vc }.store(&inputs.step_at(dev, 0, pos0).unwrap(), &kp, &vp).unwrap();
        }
        let (qh, kh, vh) = (rng.vec(n_head * hd, -3.0, 3.0), rng.vec(width, -3.0, 3.0), rng.vec(width, -2.0, 2.0));
        let (wq, wk) = (rng.vec(hd, 0.5, 1.5), rng.vec(hd, 0.5, 1.5));
        let norm = |x: &[f32], w: &[f32]| -> Vec<f32> {
            x.chunks(hd)
                .flat_map(|h| {
                    let r = 1.0 / (h.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / hd as f64 + eps as f64).sqrt();
                    h.iter().zip(w).map(move |(&v, &g)| (v as f64 * r * g as f64) as f32)
                })
                .collect()
        };
        inputs.write(dev, &[0], pos0).unwrap();
        let st = inputs.step_at(dev, pos0, 1).unwrap();
        let scale = 1.0 / (hd as f32).sqrt();
        let v = dev.upload(&vh).unwrap();
        let (mut sa, mut sb) = (DecodeScratch::new(dev, n_head, hd).unwrap(), DecodeScratch::new(dev, n_head, hd).unwrap());
        let (mut out_a, mut out_b) = (poisoned(dev, n_head * hd), poisoned(dev, n_head * hd));
        let (qn, kn) = (dev.upload(&norm(&qh, &wq)).unwrap(), dev.upload(&norm(&kh, &wk)).unwrap());
        LayerCache { shape, k: ka, v: va }.decode(&st, &rope, (&qn, &kn, &v), (scale, false), &mut sa, &mut out_a).unwrap();
        let (q, k, wqd, wkd) = (dev.upload(&qh).unwrap(), dev.upload(&kh).unwrap(), dev.upload(&wq).unwrap(), dev.upload(&wk).unwrap());
        let mut b = LayerCache { shape, k: kb, v: vb };
        b.decode_qk_normed(&st, &rope, (&wqd, &wkd, eps), (&q, &k, &v), (scale, false), &mut sb, &mut out_b).unwrap();
        let (a, got) = (dev.download(&out_a).unwrap(), dev.download(&out_b).unwrap());
        let what = format!("head_dim {hd} {pairs:?} window {window:?}");
        assert!(got.iter().all(|x| x.is_finite()), "{what}");
        for (x, y) in a.iter().zip(&got) {
            assert!((x - y).abs() <= 1e-4 + 1e-4 * x.abs(), "{what}: {x} vs {y}");
        }
        // weights shorter than a head are refused before any launch
        let short = dev.upload(&wq[..hd - 1]).unwrap();
        assert!(b.decode_qk_normed(&st, &rope, (&short, &wkd, eps), (&q, &k, &v), (scale, false), &mut sb, &mut out_b).is_err(), "{what}");
        println!("ok {what}: QK-norm in the decoding launch");
    }
}

/// The decoding step of several sequences in one launch (`decode_rows`: each row its own slot
/// of a cache of slots, at its own position) gives each row the bits of the one-row kernel on
/// that slot, stores the same cache rows, and touches no other slot; a prompt's rows stored
/// and attended in slot 2 through the segment of a pass of several sequences read what they
/// wrote there.
#[test]
fn decoding_rows_of_many_sequences_equal_one_row_launches() {
    let Some(dev) = device("decoding_rows_of_many_sequences_equal_one_row_launches") else { return };
    let mut rng = Rng(0xba7c_4ed5);
    for (hd, pairs, f16, window) in [
        (64, RopePairs::Adjacent, true, None),
        (128, RopePairs::HalfSplit, true, None),
        (64, RopePairs::HalfSplit, false, None),
        (256, RopePairs::HalfSplit, true, Some(30)),
    ] {
        let (n_head, n_head_kv, positions, slots) = (6, 2, 96, 5);
        let shape = AttentionShape { n_head, n_head_kv, head_dim: hd, positions, f16, window };
        let width = n_head_kv * hd;
        let esz = if f16 { 2 } else { 4 };
        let pool = slots * positions * width * esz;
        let table = rope_table(positions, hd);
        let table = dev.upload(&table).unwrap();
        let rope = Rope { pairs, table: &table, n_rot: hd };
        let scale = 1.0 / (hd as f32).sqrt();
        let mut inputs = StepInputs::with_slots(dev, slots * positions, positions, slots, 1).unwrap();
        // rows in slots 3, 0, 4 and 1 at positions 40, 0, 95 (the last) and 7; the earlier
        // positions of each filled in one pass of four segments
        let rows = [(3usize, 40usize), (0, 0), (4, 95), (1, 7)];
        let (mut ka, mut va) = (dev.zero_bytes(pool).unwrap(), dev.zero_bytes(pool).unwrap());
        let (mut kb, mut vb) = (dev.zero_bytes(pool).unwrap(), dev.zero_bytes(pool).unwrap());
        let earlier: usize = rows.iter().map(|r| r.1).sum();
        let segs: Vec<_> = rows.iter().filter(|r| r.1 > 0).map(|&(slot, pos)| (slot, 0, pos)).collect();
        inputs.write_segments(dev, &vec![0; earlier], &segs).unwrap();
        for &(slot, _, n) in &segs {
            let (kp, vp) = (dev.upload(&rng.vec(n * width, -2.0, 2.0)).unwrap(), dev.upload(&rng.vec(n * width, -2.0, 2.0)).unwrap());
            let st = inputs.segment(dev, slot, 0, n).unwrap();
            LayerCache { shape, k: &mut ka, v: &mut va }.store(&st, &kp, &vp).unwrap();
            LayerCache { shape, k: &mut kb, v: &mut vb }.store(&st, &kp, &vp).unwrap();
        }
        let n = rows.len();
        let (q, k, v) = (rng.vec(n * n_head * hd, -2.0, 2.0), rng.vec(n * width, -2.0, 2.0), rng.vec(n * width, -2.0, 2.0));
        let segs: Vec<_> = rows.iter().map(|&(slot, pos)| (slot, pos, 1)).collect();
        inputs.write_segments(dev, &vec![0; n], &segs).unwrap();
        // all rows in one launch
        let (qd, kd, vd) = (dev.upload(&q).unwrap(), dev.upload(&k).unwrap(), dev.upload(&v).unwrap());
        let mut out = poisoned(dev, n * n_head * hd);
        let mut scratch = DecodeScratch::rows(dev, n, n_head, hd).unwrap();
        let one_token = inputs.one_token_rows(dev, n).unwrap();
        LayerCache { shape, k: &mut ka, v: &mut va }.decode_rows(&one_token, &rope, (&qd, &kd, &vd), (scale, f16), &mut scratch, &mut out).unwrap();
        let got = dev.download(&out).unwrap();
        // each row alone, through its segment of the same write
        let mut one = DecodeScratch::new(dev, n_head, hd).unwrap();
        for (r, &(slot, pos)) in rows.iter().enumerate() {
            let (qr, kr, vr) = (
                dev.upload(&q[r * n_head * hd..][..n_head * hd]).unwrap(),
                dev.upload(&k[r * width..][..width]).unwrap(),
                dev.upload(&v[r * width..][..width]).unwrap(),
            );
            let mut o = poisoned(dev, n_head * hd);
            let st = inputs.segment(dev, slot, pos, 1).unwrap();
            LayerCache { shape, k: &mut kb, v: &mut vb }.decode(&st, &rope, (&qr, &kr, &vr), (scale, f16), &mut one, &mut o).unwrap();
            let want = dev.download(&o).unwrap();
            let what = format!("head_dim {hd} {pairs:?} f16 {f16}: row {r} (slot {slot}, position {pos})");
            assert!(want.iter().all(|x| x.is_finite()), "{what}");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got[r * n_head * hd..][..n_head * hd]), bits(&want), "{what}");
        }
        assert_eq!(dev.download_bytes(&ka).unwrap(), dev.download_bytes(&kb).unwrap(), "head_dim {hd}: the K caches");
        assert_eq!(dev.download_bytes(&va).unwrap(), dev.download_bytes(&vb).unwrap(), "head_dim {hd}: the V caches");
        // slot 2 was never named: still zeros
        let slot_bytes = positions * width * esz;
        assert!(dev.download_bytes(&ka).unwrap()[2 * slot_bytes..3 * slot_bytes].iter().all(|&b| b == 0), "head_dim {hd}: slot 2 untouched");
        // a prompt of 5 rows in slot 2 beside a one-token row: rows 1..6 of the pass
        inputs.write_segments(dev, &[0; 6], &[(0, 1, 1), (2, 0, 5)]).unwrap();
        let st = inputs.segment(dev, 2, 0, 5).unwrap();
        let (kp, vp) = (dev.upload(&rng.vec(5 * width, -2.0, 2.0)).unwrap(), dev.upload(&rng.vec(5 * width, -2.0, 2.0)).unwrap());
        let mut cache = LayerCache { shape, k: &mut ka, v: &mut va };
        cache.store(&st, &kp, &vp).unwrap();
        let stored = dev.download_bytes(cache.k).unwrap();
        assert!(stored[2 * slot_bytes..2 * slot_bytes + 5 * width * esz].iter().any(|&b| b != 0), "head_dim {hd}: the prompt in slot 2");
        assert!(stored[2 * slot_bytes + 5 * width * esz..3 * slot_bytes].iter().all(|&b| b == 0), "head_dim {hd}: slot 2 past the prompt");
        println!("ok head_dim {hd} {pairs:?} f16 {f16}: {n} rows in one launch, bit-identical to one-row launches");
    }
    // a slot past the cache's, and one-token rows the write did not make, are refused
    let mut inputs = StepInputs::with_slots(dev, 8, 16, 2, 1).unwrap();
    let e = inputs.write_segments(dev, &[0], &[(2, 0, 1)]);
    assert!(matches!(e, Err(Error::InvalidArgument { name: "slot", .. })), "{e:?}");
    inputs.write_segments(dev, &[0; 3], &[(0, 0, 1), (1, 0, 2)]).unwrap();
    assert!(inputs.one_token_rows(dev, 2).is_err());
    assert!(inputs.one_token_rows(dev, 1).is_ok());
    assert!(inputs.segment(dev, 1, 0, 1).is_err());
}

/// A prompt's flash attention on the tensor cores, and the rows kernel, against f64 softmax
/// attention over the same f16 caches: causal rows at an offset, grouped-query heads, heads of
/// 64, 128 and 256 (another size refused), sliding windows, row counts that are not block
/// multiples, output rows past `m` untouched.
#[test]
fn flash_attention_matches_f64() {
    use half::f16;
    let Some(dev) = device("flash_attention_matches_f64") else { return };
    let mut rng = Rng(0xf1a5_4a77);
    for (n_head, n_head_kv, hd, pos0, m, window) in [
        (9, 3, 64, 0, 130, None),
        (4, 1, 128, 37, 70, None),
        (2, 2, 64, 200, 1, None),
        (8, 2, 128, 0, 64, None),
        (3, 1, 64, 5, 17, None),
        // Gemma 3's heads, and sliding windows: shorter than a tile, one row's visible
        // positions in two tiles, blocks whose later rows see none of the first tiles
        (4, 1, 256, 37, 70, None),
        (4, 1, 256, 300, 40, Some(64)),
        (4, 1, 256, 0, 200, Some(48)),
        (2, 2, 64, 200, 1, Some(7)),
        (9, 3, 64, 0, 130, Some(16)),
        (4, 1, 128, 90, 150, Some(100)),
    ] {
        let positions = pos0 + m + 3;
        let shape = AttentionShape { n_head, n_head_kv, head_dim: hd, positions, f16: true, window };
        // flash attention takes heads of 64, 128 and 256, with windows (an f16 cache)
        assert!(shape.flash_fits(), "hd {hd} window {window:?}");
        let width = n_head_kv * hd;
        let kf: Vec<f16> = rng.vec(positions * width, -2.0, 2.0).into_iter().map(f16::from_f32).collect();
        let vf: Vec<f16> = rng.vec(positions * width, -2.0, 2.0).into_iter().map(f16::from_f32).collect();
        let bytes = |v: &[f16]| v.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
        let (mut kc, mut vc) = (dev.upload_bytes(&bytes(&kf)).unwrap(), dev.upload_bytes(&bytes(&vf)).unwrap());
        let q = rng.vec(m * n_head * hd, -1.0, 1.0);
        let scale = 1.0 / (hd as f32).sqrt();
        let mut want = vec![0f64; m * n_head * hd];
        for i in 0..m {
            for h in 0..n_head {
                let kvh = h / (n_head / n_head_kv);
                let qr = &q[(i * n_head + h) * hd..][..hd];
                // position pos0 + i sees the last `window` positions up to itself
                let lo = window.map_or(0, |w| (pos0 + i + 1).saturating_sub(w));
                let s: Vec<f64> = (lo..=pos0 + i)
                    .map(|p| (0..hd).map(|d| qr[d] as f64 * kf[p * width + kvh * hd + d].to_f64()).sum::<f64>() * scale as f64)
                    .collect();
                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - mx).exp()).collect();
                let sum: f64 = e.iter().sum();
                for d in 0..hd {
                    want[(i * n_head + h) * hd + d] =
                        e.iter().enumerate().map(|(p, w)| w * vf[(lo + p) * width + kvh * hd + d].to_f64()).sum::<f64>() / sum;
                }
            }
        }
        let mut inputs = StepInputs::new(dev, m, shape.positions, 1).unwrap();
        inputs.write(dev, &vec![0; m], pos0).unwrap();
        let qb = dev.upload(&q).unwrap();
        let mut out = poisoned(dev, m * n_head * hd + 1);
        let cache = LayerCache { shape, k: &mut kc, v: &mut vc };
        cache.flash_attend(&inputs.step_at(dev, pos0, m).unwrap(), &qb, scale, &mut out).unwrap();
        let got = dev.download(&out).unwrap();
        // f16 query and weights: ~2⁻¹¹ relative on terms of size ≤ 2
        close(
            &format!("flash attention {n_head}/{n_head_kv} heads hd {hd} pos0 {pos0} m {m} window {window:?}"),
            &got[..want.len()],
            &want,
            2e-3,
            4e-3,
        );
        assert!(got[want.len()].is_nan(), "wrote past m rows");
        // a head size it has no variant for is refused before any launch
        let odd = LayerCache { shape: AttentionShape { head_dim: 96, ..shape }, k: &mut kc, v: &mut vc };
        let e = odd.flash_attend(&inputs.step_at(dev, pos0, m).unwrap(), &qb, scale, &mut out);
        assert!(matches!(e, Err(Error::InvalidArgument { name: "head_dim", .. })), "{e:?}");
        // the rows kernel (short prompts and the unfused decoding step) on the same inputs:
        // an f32 query (nearer), then one rounded to f16 as the CPU engine rounds it
        for round_q in [false, true] {
            let mut out = poisoned(dev, m * n_head * hd + 1);
            let cache = LayerCache { shape, k: &mut kc, v: &mut vc };
            cache.attend(&inputs.step_at(dev, pos0, m).unwrap(), &qb, (scale, round_q), &mut out).unwrap();
            let got = dev.download(&out).unwrap();
            let what = format!("row attention {n_head}/{n_head_kv} heads hd {hd} pos0 {pos0} m {m} window {window:?} f16 query {round_q}");
            close(&what, &got[..want.len()], &want, 2e-3, 4e-3);
            assert!(got[want.len()].is_nan(), "{what}: wrote past m rows");
        }
        let cache = LayerCache { shape, k: &mut kc, v: &mut vc };
        // positions past the cache (written, or that the inputs could name) and an f32 cache
        // are errors before any launch
        assert!(inputs.write(dev, &vec![0; m], pos0 + 4).is_err());
        let mut wide = StepInputs::new(dev, m, shape.positions + 8, 1).unwrap();
        wide.write(dev, &vec![0; m], pos0).unwrap();
        assert!(cache.flash_attend(&wide.step(dev).unwrap(), &qb, scale, &mut out).is_err());
        let st = inputs.step_at(dev, pos0, m).unwrap();
        let f32_cache = LayerCache { shape: AttentionShape { f16: false, ..shape }, k: cache.k, v: cache.v };
        assert!(f32_cache.flash_attend(&st, &qb, scale, &mut out).is_err());
    }
}

/// Greedy sampling on the device: the first maximum (ties to the smaller index, −0 equal to
/// +0), the first NaN or +inf reported with its value, every value −inf reported as no index.
#[test]
fn argmax_finds_the_first_maximum_and_reports_bad_values() {
    let Some(dev) = device("argmax_finds_the_first_maximum_and_reports_bad_values") else { return };
    let mut rng = Rng(0xa7c3_0001);
    let mut scratch = poisoned(dev, 3);
    let first_max = |v: &[f32]| v.iter().enumerate().fold(0, |b, (i, &x)| if x > v[b] { i } else { b });
    // (runs of 8 per thread: lengths inside one run, at its edges, with a tail, and vocabularies)
    for n in [1usize, 7, 8, 9, 31, 1025, 8195, 49152, 151_936, 262_144] {
        let mut v = rng.vec(n, -30.0, 30.0);
        let r = argmax(dev, &dev.upload(&v).unwrap(), n, &mut scratch).unwrap();
        assert_eq!((r.index, r.max, r.first_bad), (Some(first_max(&v) as u32), v[first_max(&v)], None), "n {n}");
        // a tie: the smaller index wins, wherever the two fall among the threads
        if n > 2 {
            let (a, b) = (n / 3, n - 1);
            v[a] = 100.0;
            v[b] = 100.0;
            let r = argmax(dev, &dev.upload(&v).unwrap(), n, &mut scratch).unwrap();
            assert_eq!(r.index, Some(a as u32), "n {n}: tie");
            // ... and within one thread's run of 8 values (runs start at multiples of 8)
            let c = (n / 2) & !7;
            if c + 5 < n {
                v[c + 2] = 300.0;
                v[c + 5] = 300.0;
                let r = argmax(dev, &dev.upload(&v).unwrap(), n, &mut scratch).unwrap();
                assert_eq!(r.index, Some(c as u32 + 2), "n {n}: tie in a run");
            }
        }
    }
    // −0 and +0 are equal: the first one wins
    let r = argmax(dev, &dev.upload(&[-1.0, -0.0, 0.0, -3.0]).unwrap(), 4, &mut scratch).unwrap();
    assert_eq!(r.index, Some(1));
    // only the first n values count
    let r = argmax(dev, &dev.upload(&[1.0, 2.0, 9.0]).unwrap(), 2, &mut scratch).unwrap();
    assert_eq!(r.index, Some(1));
    // NaN and +inf: the first one, with its value
    let mut v = vec![0.5f32; 5000];
    v[4000] = f32::INFINITY;
    v[1234] = f32::NAN;
    let r = argmax(dev, &dev.upload(&v).unwrap(), v.len(), &mut scratch).unwrap();
    assert_eq!(r.first_bad.map(|(i, x)| (i, x.is_nan())), Some((1234, true)));
    v[1234] = 0.5;
    let r = argmax(dev, &dev.upload(&v).unwrap(), v.len(), &mut scratch).unwrap();
    assert_eq!(r.first_bad, Some((4000, f32::INFINITY)));
    let r = argmax(dev, &dev.upload(&[f32::NEG_INFINITY; 70]).unwrap(), 70, &mut scratch).unwrap();
    assert_eq!((r.index, r.max, r.first_bad), (None, f32::NEG_INFINITY, None));
    // sizes it cannot take are errors
    let x = dev.upload(&[1.0; 4]).unwrap();
    assert!(argmax(dev, &x, 0, &mut scratch).is_err());
    assert!(argmax(dev, &x, 5, &mut scratch).is_err());
    assert!(argmax(dev, &x, 4, &mut dev.zeros(2).unwrap()).is_err());
}

/// Top-k on the device: the k largest in `f32::total_cmp`'s order, the lower index first among
/// equal values (rows with many ties, −0 and +0, −inf), against a sort on the host; the first
/// NaN or +inf reported; sizes it cannot take are errors.
#[test]
fn top_k_finds_the_k_largest_with_ties_by_index() {
    let Some(dev) = device("top_k_finds_the_k_largest_with_ties_by_index") else { return };
    let mut rng = Rng(0x70b6_0001);
    let mut scratch = poisoned(dev, 2 * 128 + 1);
    let want = |v: &[f32], k: usize| {
        let mut idx: Vec<(u32, f32)> = v.iter().enumerate().map(|(i, &x)| (i as u32, x)).collect();
        idx.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        idx.truncate(k);
        idx
    };
    for n in [2usize, 100, 1025, 49152, 151_936] {
        for ties in [false, true] {
            let mut v = rng.vec(n, -20.0, 20.0);
            if ties {
                // a handful of distinct values: most of the k are ties
                v.iter_mut().for_each(|x| *x = (*x / 8.0).round());
                v[n / 2] = -0.0;
                v[n - 1] = f32::NEG_INFINITY;
            }
            let x = dev.upload(&v).unwrap();
            for k in [1usize, 2, 40, 128] {
                if k >= n {
                    continue;
                }
                let r = top_k(dev, &x, n, k, &mut scratch).unwrap();
                assert_eq!(r.first_bad, None);
                let got: Vec<(u32, u32)> = r.best.iter().map(|&(i, x)| (i, x.to_bits())).collect();
                let exp: Vec<(u32, u32)> = want(&v, k).iter().map(|&(i, x)| (i, x.to_bits())).collect();
                assert_eq!(got, exp, "n {n} k {k} ties {ties}");
            }
        }
    }
    // +0 ranks above −0, both above −1
    let r = top_k(dev, &dev.upload(&[-1.0, -0.0, 0.0, -3.0]).unwrap(), 4, 2, &mut scratch).unwrap();
    assert_eq!(r.best, vec![(2, 0.0), (1, -0.0)]);
    let mut v = vec![0.5f32; 3000];
    v[2500] = f32::INFINITY;
    v[700] = f32::NAN;
    let r = top_k(dev, &dev.upload(&v).unwrap(), v.len(), 40, &mut scratch).unwrap();
    assert_eq!(r.first_bad.map(|(i, x)| (i, x.is_nan())), Some((700, true)));
    let x = dev.upload(&[1.0; 8]).unwrap();
    assert!(top_k(dev, &x, 8, 0, &mut scratch).is_err());
    assert!(top_k(dev, &x, 8, 8, &mut scratch).is_err(), "k must be below n");
    assert!(top_k(dev, &x, 9, 2, &mut scratch).is_err());
    assert!(top_k(dev, &x, 8, 4, &mut dev.zeros(8).unwrap()).is_err(), "scratch below 2k + 1");
}

#[test]
fn step_inputs_refuse_positions_past_the_cache_and_ids_past_the_vocabulary() {
    let Some(dev) = device("step_inputs_refuse_positions_past_the_cache_and_ids_past_the_vocabulary") else { return };
    let mut inputs = StepInputs::new(dev, 4, 16, 100).unwrap();
    inputs.write(dev, &[1, 2, 3, 4], 12).unwrap();
    inputs.write(dev, &[99], 15).unwrap();
    inputs.write(dev, &[], 15).unwrap();
    // (no ids still name a position: one past the last is refused)
    let past = [(vec![1], 16), (vec![1, 2], 15), (vec![1; 5], 0), (vec![1], usize::MAX), (vec![], 16)];
    for (ids, pos0) in past {
        assert!(inputs.write(dev, &ids, pos0).is_err(), "{} ids at {pos0}", ids.len());
    }
    let e = inputs.write(dev, &[100], 0).unwrap_err();
    assert!(e.to_string().contains("100"), "{e}");
}

#[test]
fn dequantize_f16_takes_more_rows_than_a_grids_y() {
    // an output head of more rows than a launch grid's y holds (65,535): Llama 3's has
    // 128,256, Gemma 3's 262,144; Q8_0, 2 blocks a row, each row's values against the CPU's
    let Some(dev) = device("dequantize_f16_takes_more_rows_than_a_grids_y") else { return };
    let (rows, cols) = (70_001usize, 64usize);
    let mut rng = Rng(0x0d3a_7f16);
    let scale = half::f16::from_f32(0.01).to_bits().to_le_bytes();
    let bytes: Vec<u8> = (0..rows * cols / 32)
        .flat_map(|_| {
            let mut b = scale.to_vec();
            b.extend((0..32).map(|_| rng.f(-127.0, 127.0) as i8 as u8));
            b
        })
        .collect();
    let mut want = vec![0.0f32; rows * cols];
    rayo::quant::dequantize(rayo::quant::GgmlType::Q8_0, &bytes, &mut want).unwrap();
    let w = dev.upload_bytes(&bytes).unwrap();
    let mut wh = dev.zero_bytes(rows * cols * 2).unwrap();
    dev.dequantize_f16(rayo::cuda::QFormat::Q8_0, &w, (rows, cols), &mut wh).unwrap();
    let got = dev.download_bytes(&wh).unwrap();
    for (i, (pair, &x)) in got.chunks_exact(2).zip(&want).enumerate() {
        let g = half::f16::from_bits(u16::from_le_bytes([pair[0], pair[1]]));
        assert_eq!(g, half::f16::from_f32(x), "value {i} (row {})", i / cols);
    }
    println!("ok dequantize_f16: {rows} rows of {cols}");
}
