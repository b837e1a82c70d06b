//! The byte lanes of `Simd` (the quantized dots' vocabulary) on every instruction set this
//! machine has, against the scalar token's definitions.

use crate::backend::dispatch;
use crate::cpu::isa::scalar::Scalar;
use crate::cpu::simd::Simd;
use crate::Backend;

/// What one backend computes from the inputs: every primitive reduced to integers.
fn run<S: Simd>(s: S, a: &[u8; 32], b: &[u8; 32], nib: &[u8; 16], bits: u32, s0: i16, s1: i16) -> Vec<i64> {
    let mut out = Vec::new();
    // A byte vector is read back lane by lane through a dot with a unit vector.
    let lanes = |v: S::B, out: &mut Vec<i64>| {
        for k in 0..32 {
            let mut e = [0u8; 32];
            e[k] = 1;
            out.push(s.dsum(s.dot_i8i8(v, s.bload(&e))) as i64);
        }
    };
    let (va, vb) = (s.bload(a), s.bload(b));
    lanes(va, &mut out);
    lanes(s.bload_nib(nib), &mut out);
    lanes(s.bsplat(a[3]), &mut out);
    lanes(s.band(va, vb), &mut out);
    lanes(s.bor(va, vb), &mut out);
    lanes(s.bsub(va, vb), &mut out);
    for n in 0..8 {
        lanes(s.bshr(va, n), &mut out);
        lanes(s.bshl(va, n), &mut out);
    }
    lanes(s.bbits(bits), &mut out);
    // Dots under their documented bounds: `a` unsigned ≤ 127, signed sides in -127..=127.
    let ua = s.band(va, s.bsplat(127));
    let sb = s.bload(&b.map(|x| if x == 0x80 { 0x81 } else { x }));
    let sa = s.bload(&a.map(|x| if x == 0x80 { 0x81 } else { x }));
    out.push(s.dsum(s.dot_u8i8(ua, sb)) as i64);
    out.push(s.dsum(s.dot_i8i8(sa, sb)) as i64);
    out.push(s.dsum(s.dot_u8i8_s2(ua, sb, s0, s1)) as i64);
    out.push(s.dsum(s.dadd(s.dot_u8i8(ua, sb), s.dot_i8i8(sa, sb))) as i64);
    out.push(s.dsum(s.dzero()) as i64);
    let f = s.fmadd_d(s.fmadd_d(s.fzero(), s.dot_i8i8(sa, sb), 0.5), s.dot_u8i8(ua, sb), -0.25);
    out.push((s.fsum(f) as f64 * 4.0).round() as i64);
    out
}

#[test]
fn byte_lanes_match_scalar_on_every_isa() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut ran = Vec::new();
    for backend in Backend::available() {
        for case in 0..64 {
            let a: [u8; 32] = core::array::from_fn(|_| next() as u8);
            let mut b: [u8; 32] = core::array::from_fn(|_| next() as u8);
            if case == 0 {
                // Extremes: the bounds of each dot.
                b = [0x81; 32];
            }
            let nib: [u8; 16] = core::array::from_fn(|_| next() as u8);
            let bits = next() as u32;
            let (s0, s1) = (next() as i8 as i16, next() as i8 as i16);
            let want = run(Scalar, &a, &b, &nib, bits, s0, s1);
            let got = dispatch!(backend, |s| run(s, &a, &b, &nib, bits, s0, s1));
            assert_eq!(got, want, "backend {backend}, case {case}");
        }
        #[cfg(target_arch = "x86_64")]
        if backend == Backend::Avx512 {
            // The VNNI token too, where the CPU has it (the dispatch runs `maddubs`).
            match crate::cpu::isa::avx512::Avx512::try_new_vnni() {
                Some(t) => {
                    let a: [u8; 32] = core::array::from_fn(|_| next() as u8);
                    let b: [u8; 32] = core::array::from_fn(|_| next() as u8);
                    let nib = [0x5a; 16];
                    let want = run(Scalar, &a, &b, &nib, 7, -3, 100);
                    assert_eq!(t.vectorize(|| run(t, &a, &b, &nib, 7, -3, 100)), want, "avx512 vnni");
                    ran.push("avx512+vnni".to_string());
                }
                None => println!("SKIP byte lanes: avx512 vnni not on this CPU"),
            }
        }
        #[cfg(target_arch = "aarch64")]
        if backend == Backend::Neon {
            // The dot-product token too, where the CPU has it (qemu's default CPU does).
            match crate::cpu::isa::neon::Neon::try_new_dot() {
                Some(t) => {
                    for case in 0..64 {
                        let a: [u8; 32] = core::array::from_fn(|_| next() as u8);
                        let b: [u8; 32] = if case == 0 { [0x81; 32] } else { core::array::from_fn(|_| next() as u8) };
                        let nib: [u8; 16] = core::array::from_fn(|_| next() as u8);
                        let (bits, s0, s1) = (next() as u32, next() as i8 as i16, next() as i8 as i16);
                        let want = run(Scalar, &a, &b, &nib, bits, s0, s1);
                        assert_eq!(t.vectorize(|| run(t, &a, &b, &nib, bits, s0, s1)), want, "neon dotprod, case {case}");
                    }
                    ran.push("neon+dotprod".to_string());
                }
                None => println!("SKIP byte lanes: neon dotprod not on this CPU"),
            }
        }
        ran.push(backend.name().to_string());
    }
    println!("byte lanes checked on: {}", ran.join(", "));
}

#[test]
fn f16_to_f32_is_exact_for_every_half() {
    for backend in Backend::available() {
        let bad = dispatch!(backend, |s| (0..=u16::MAX)
            .filter(|&h| {
                let (got, want) = (s.f16_to_f32(h), half::f16::from_bits(h).to_f32());
                !(got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan())
            })
            .count());
        assert_eq!(bad, 0, "{backend}");
    }
}
