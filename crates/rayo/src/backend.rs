//! Which instruction set runs the CPU kernels: detected once per process, overridable.

use crate::{Error, Result};
use std::sync::OnceLock;

/// A CPU instruction set rayo has kernels for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    Scalar,
    Sse2,
    /// AVX2 with FMA.
    Avx2,
    /// AVX-512F (with AVX2 and FMA).
    Avx512,
    Neon,
    Simd128,
}

impl Backend {
    /// Every backend, worst to best.
    pub const ALL: [Backend; 6] = [Backend::Scalar, Backend::Sse2, Backend::Avx2, Backend::Avx512, Backend::Neon, Backend::Simd128];

    /// The name used by `RAYO_BACKEND` and `rayo bench --backend`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Sse2 => "sse2",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
            Backend::Neon => "neon",
            Backend::Simd128 => "simd128",
        }
    }

    /// Parses a backend name (`scalar|sse2|avx2|avx512|neon|simd128`).
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Whether this CPU (and this build target) can run the backend.
    pub fn is_supported(self) -> bool {
        match self {
            Backend::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Sse2 => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => crate::cpu::isa::avx2::Avx2::try_new().is_some(),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => crate::cpu::isa::avx512::Avx512::try_new().is_some(),
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => true,
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Backend::Simd128 => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// Every backend this CPU supports, worst to best.
    pub fn available() -> Vec<Backend> {
        Backend::ALL.into_iter().filter(|b| b.is_supported()).collect()
    }

    /// The best backend the CPU offers (detected once, then cached).
    pub fn detect() -> Backend {
        static BEST: OnceLock<Backend> = OnceLock::new();
        *BEST.get_or_init(|| {
            let order = [Backend::Avx512, Backend::Avx2, Backend::Sse2, Backend::Neon, Backend::Simd128];
            order.into_iter().find(|b| b.is_supported()).unwrap_or(Backend::Scalar)
        })
    }

    /// The backend `RAYO_BACKEND` asks for, read from the environment now: `None` when it is
    /// unset, empty or `auto`; an error when it names no backend or one this CPU lacks. See
    /// [`Backend::parse_env_value`]; what the process uses is [`crate::Config::get`].
    pub fn from_env() -> Result<Option<Backend>> {
        match crate::config::read("RAYO_BACKEND") {
            Some(value) => Backend::parse_env_value(&value),
            None => Ok(None),
        }
    }

    /// Parses a value of `RAYO_BACKEND`: `None` for empty or `auto`, the backend it names
    /// (any case), [`Error::InvalidEnv`] for a name that is no backend, and
    /// [`Error::UnsupportedBackend`] for one this CPU lacks.
    pub fn parse_env_value(value: &str) -> Result<Option<Backend>> {
        if value.trim().is_empty() || value.trim().eq_ignore_ascii_case("auto") {
            return Ok(None);
        }
        let b = Backend::from_name(value).ok_or_else(|| Error::InvalidEnv {
            var: "RAYO_BACKEND",
            value: value.to_string(),
            expected: "scalar|sse2|avx2|avx512|neon|simd128|auto",
        })?;
        b.require().map(Some)
    }

    /// What new vectors use: `RAYO_BACKEND` when it is valid, else [`Backend::detect`]
    /// (through [`crate::Config::get`], which logs an invalid value once and ignores it).
    pub fn selected() -> Backend {
        crate::Config::get().backend.unwrap_or_else(Backend::detect)
    }

    /// Checks that the backend can run here.
    pub fn require(self) -> Result<Backend> {
        if self.is_supported() {
            Ok(self)
        } else {
            Err(Error::UnsupportedBackend { backend: self.name() })
        }
    }
}

impl core::fmt::Display for Backend {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// `RAYO_FORCE_CPU=1` (or `true`, `yes`, `on`): every op stays on the CPU even when a GPU
/// feature is on. Read once per process, with the rest of [`crate::Config`].
pub fn force_cpu() -> bool {
    crate::Config::get().force_cpu
}

/// Runs `$body` with `$s` bound to the token of `$backend`, inside that instruction set's
/// target-feature context. A backend the CPU lacks runs the scalar code (vectors check support
/// when they are created, so this does not happen through the public API).
macro_rules! dispatch {
    ($backend:expr, |$s:ident| $body:expr) => {{
        #[allow(unused_imports)]
        use $crate::cpu::simd::Simd as _;
        match $backend {
            #[cfg(target_arch = "x86_64")]
            $crate::Backend::Avx512 => match $crate::cpu::isa::avx512::Avx512::try_new() {
                Some($s) => $s.vectorize(
                    #[inline(always)]
                    || $body,
                ),
                None => {
                    let $s = $crate::cpu::isa::scalar::Scalar;
                    $body
                }
            },
            #[cfg(target_arch = "x86_64")]
            $crate::Backend::Avx2 => match $crate::cpu::isa::avx2::Avx2::try_new() {
                Some($s) => $s.vectorize(
                    #[inline(always)]
                    || $body,
                ),
                None => {
                    let $s = $crate::cpu::isa::scalar::Scalar;
                    $body
                }
            },
            #[cfg(target_arch = "x86_64")]
            $crate::Backend::Sse2 => {
                let $s = $crate::cpu::isa::sse2::Sse2(());
                $s.vectorize(
                    #[inline(always)]
                    || $body,
                )
            }
            #[cfg(target_arch = "aarch64")]
            $crate::Backend::Neon => {
                let $s = $crate::cpu::isa::neon::Neon::<false>(());
                $s.vectorize(
                    #[inline(always)]
                    || $body,
                )
            }
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            $crate::Backend::Simd128 => {
                let $s = $crate::cpu::isa::simd128::Simd128(());
                $s.vectorize(
                    #[inline(always)]
                    || $body,
                )
            }
            #[allow(unreachable_patterns)]
            _ => {
                let $s = $crate::cpu::isa::scalar::Scalar;
                $body
            }
        }
    }};
}
pub(crate) use dispatch;
