//! Shared by the integration tests: f64 references, input generators, ULP distance, and the
//! list of backends to run (with a printed skip line for each one this CPU lacks).
#![allow(dead_code)]

use rayo::Backend;

/// The backends this machine can run; prints a skip line for the others of this target.
pub fn backends(test: &str) -> Vec<Backend> {
    let native: &[Backend] = if cfg!(target_arch = "x86_64") {
        &[Backend::Scalar, Backend::Sse2, Backend::Avx2, Backend::Avx512]
    } else if cfg!(target_arch = "aarch64") {
        &[Backend::Scalar, Backend::Neon]
    } else if cfg!(target_arch = "wasm32") {
        &[Backend::Scalar, Backend::Simd128]
    } else {
        &[Backend::Scalar]
    };
    let mut run = Vec::new();
    for &b in native {
        if b.is_supported() {
            run.push(b);
        } else {
            println!("SKIP {test}: backend {b} not supported by this CPU/target");
        }
    }
    run
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    /// Random values in [lo, hi) with, every so often, a special value.
    pub fn data_with_specials(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| if self.next_u64() % 16 == 0 { SPECIALS[(self.next_u64() % SPECIALS.len() as u64) as usize] } else { self.uniform(lo, hi) })
            .collect()
    }
    pub fn data(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// NaN, ±inf, ±0, denormals, huge and tiny values.
pub const SPECIALS: [f32; 14] =
    [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -3e-39, f32::MIN_POSITIVE, 3e38, -3e38, 1e-20, -1e-20];

/// The lengths every op is tested on.
pub const LENGTHS: [usize; 18] = [0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4097, 100_003];

/// Distance from `got` to the exact `want`, in units of the f32 ULP at `want`.
pub fn ulps(got: f32, want: f64) -> f64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
    }
    // Past f32::MAX (after rounding) the right answer is ±inf.
    let w = want as f32;
    if w.is_infinite() || got.is_infinite() {
        return if got == w { 0.0 } else { f64::INFINITY };
    }
    let a = w.abs();
    let ulp = if a == f32::MAX { (a - f32::from_bits(a.to_bits() - 1)) as f64 } else { (f32::from_bits(a.to_bits() + 1) - a) as f64 };
    (got as f64 - want).abs() / ulp
}

/// Whether `got` matches `want` within `max_ulp`, with NaN matching NaN and the sign of a
/// zero result checked.
pub fn close(got: f32, want: f64, max_ulp: f64) -> bool {
    if want == 0.0 && got == 0.0 {
        return got.is_sign_negative() == want.is_sign_negative();
    }
    ulps(got, want) <= max_ulp
}

// ---- f64 references ----

pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
pub fn relu(x: f64) -> f64 {
    if x <= 0.0 {
        0.0
    } else {
        x
    }
}
pub fn leaky_relu(x: f64, a: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        a * x
    }
}
pub fn elu(x: f64, a: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        a * x.exp_m1()
    }
}
pub fn selu(x: f64) -> f64 {
    let (l, a) = (1.050_700_987_355_480_5_f64, 1.673_263_242_354_377_3_f64);
    l * elu(x, a)
}
pub fn swish(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        -0.0
    } else {
        x * sigmoid(x)
    }
}
pub fn gelu(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    if x == f64::INFINITY {
        return x;
    }
    // Φ(x) = erfc(−x/√2)/2, accurate for large negative x.
    x * 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}
pub fn mish(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x * x.exp().ln_1p().tanh()
}
pub fn hardswish(x: f64) -> f64 {
    if x <= -3.0 {
        0.0
    } else if x >= 3.0 {
        x
    } else {
        x * (x + 3.0) / 6.0
    }
}
