//! Every environment variable rayo reads, parsed in one place, once per process.
//!
//! | variable | accepts | default |
//! |---|---|---|
//! | `RAYO_BACKEND` | `scalar sse2 avx2 avx512 neon simd128 auto` (a backend this CPU has) | `auto` ([`Backend::detect`]) |
//! | `RAYO_FORCE_CPU` | `1 true yes on` / `0 false no off` | off |
//! | `RAYO_GEMM_KC`, `RAYO_GEMM_MC` | an integer in `8..=65536` (GEMM block sizes) | from the cache sizes |
//! | `RAYO_WGPU_SPIN_US` | an integer in `0..=1000000` (µs a readback polls before it blocks) | 200 |
//! | `RAYO_WGPU_EW_ITEMS` | `1 2 4` (items per invocation of element-wise kernels) | 2 |
//! | `RAYO_WGPU_REDUCE_GROUPS` | an integer in `64..=65535` (workgroups of a reduction stage) | 2048 |
//! | `RAYO_WGPU_LANES` | `1 2 4 8 16 32 64` (lanes per row of the LLM engine's wgpu products) | 1 on a CPU adapter, else 16 |
//! | `RAYO_WGPU_FUSE` | a boolean (the LLM engine's fused wgpu kernels) | on |
//! | `RAYO_WGPU_F16` | `auto`, or a boolean (the LLM engine's f16 wgpu kernels, where the GPU has `shader-f16`) | `auto`: on, except on CPU adapters |
//! | `RAYO_CUDA_PDL` | a boolean (programmatic dependent launch on Hopper) | on |
//! | `RAYO_CUDA_MATVEC` | `auto block warp` (a block or a warp per row of the quantized products) | `auto` |
//! | `RAYO_CUDA_GRAPHS` | a boolean (the LLM engine records a one-token step once and replays it) | on |
//! | `RAYO_CUDA_FUSED_ROPE` | a boolean (a decoding step's RoPE, KV store and attention in one launch) | on |
//! | `RAYO_CUDA_PREFILL` | `auto mma f32` (a prompt's products: `wgmma` on Hopper, `mma.sync`, or exact fp32) | `auto` |
//! | `RAYO_CUDA_DECODE` | `auto f32 f16 q8` (the activations a decoding step's products take) | `auto`: q8 from 1024 values a row |
//! | `RAYO_NCCL` | a boolean (tensor-parallel CUDA ranks sum through NCCL, where its library loads and each rank has a GPU of its own) | on |
//! | `RAYO_NCCL_LIBRARY` | a path or file name of NCCL's library | `libnccl.so.2`, then `libnccl.so` |
//!
//! A value rayo does not understand is not ignored silently: it is reported once, through the
//! `log` crate at warn level (naming the variable, the value and what is accepted), and the
//! default is used. [`Config::get`] shows what was parsed; [`Config::from_lookup`] parses any
//! source without touching the process environment (what tests use).

use crate::{Backend, Error};
use core::fmt;
use std::sync::OnceLock;

/// The parsed environment: what every knob of rayo is set to in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// `RAYO_BACKEND`: the CPU instruction set new vectors and matrices use (`None`: the best
    /// one this CPU has, [`Backend::detect`]).
    pub backend: Option<Backend>,
    /// `RAYO_FORCE_CPU`: every op stays on the CPU even when a GPU feature is on.
    pub force_cpu: bool,
    /// `RAYO_GEMM_KC`: the GEMM depth block (`None`: derived from the L2 size).
    pub gemm_kc: Option<usize>,
    /// `RAYO_GEMM_MC`: the GEMM row block (`None`: derived from the L2 size).
    pub gemm_mc: Option<usize>,
    /// `RAYO_WGPU_SPIN_US`: how long a native wgpu readback polls before it blocks.
    pub wgpu_spin_us: u64,
    /// `RAYO_WGPU_EW_ITEMS`: items per invocation of the generated element-wise kernels.
    pub wgpu_ew_items: u32,
    /// `RAYO_WGPU_REDUCE_GROUPS`: the most workgroups of a reduction stage.
    pub wgpu_reduce_groups: usize,
    /// `RAYO_WGPU_LANES`: lanes per row of the LLM engine's wgpu products (`None`: by adapter).
    pub wgpu_lanes: Option<usize>,
    /// `RAYO_WGPU_FUSE`: the LLM engine's fused wgpu kernels.
    pub wgpu_fuse: bool,
    /// `RAYO_WGPU_F16`: the LLM engine's f16 wgpu kernels (`None`: by adapter).
    pub wgpu_f16: Option<bool>,
    /// `RAYO_CUDA_PDL`: programmatic dependent launch on Hopper.
    pub cuda_pdl: bool,
    /// `RAYO_CUDA_MATVEC`: a block per row of the quantized products (`Some(true)`), a warp
    /// (`Some(false)`), or by shape (`None`).
    pub cuda_matvec_block: Option<bool>,
    /// `RAYO_CUDA_GRAPHS`: the LLM engine records a one-token step once and replays it.
    pub cuda_graphs: bool,
    /// `RAYO_CUDA_PERSISTENT`: the recorded one-token step replays as one persistent kernel
    /// (`Some(0)`: as many blocks an SM as fit; `Some(n)`: at most `n`), not as a graph.
    pub cuda_persistent: Option<u32>,
    /// `RAYO_CUDA_PERSISTENT_SUBS`: sub-blocks of 128 threads a block of the persistent step.
    pub cuda_persistent_subs: u32,
    /// `RAYO_CUDA_FUSED_ROPE`: a decoding step's RoPE, KV store and attention in one launch.
    pub cuda_fused_rope: bool,
    /// `RAYO_CUDA_PREFILL`: the GEMM a prompt's products run on.
    pub cuda_prefill: CudaPrefill,
    /// `RAYO_CUDA_DECODE`: the activations a decoding step's products take.
    pub cuda_decode: CudaDecode,
    /// `RAYO_NCCL`: tensor-parallel CUDA ranks sum and gather through NCCL where they can
    /// (else through the host).
    pub nccl: bool,
    /// `RAYO_NCCL_LIBRARY`: where NCCL's library is (`None`: `libnccl.so.2`, then `libnccl.so`,
    /// on the loader's path).
    pub nccl_library: Option<String>,
}

/// `RAYO_CUDA_PREFILL`: the GEMM of the LLM engine's prompt products on CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaPrefill {
    /// Tensor cores: Hopper's `wgmma` where the device has it, else `mma.sync`.
    Auto,
    /// Tensor cores through `mma.sync` on every device.
    Mma,
    /// The exact fp32 kernels.
    F32,
}

/// `RAYO_CUDA_DECODE`: the activations of the LLM engine's decoding products on CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaDecode {
    /// 8 bits on wide models, f32 on narrow ones.
    Auto,
    F32,
    F16,
    Q8,
}

/// One environment variable rayo reads: its name, what it accepts, its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvVar {
    pub name: &'static str,
    pub accepts: &'static str,
    pub default: &'static str,
}

const BACKEND_ACCEPTS: &str = "scalar|sse2|avx2|avx512|neon|simd128|auto";
const BOOL_ACCEPTS: &str = "1|true|yes|on or 0|false|no|off";
const BLOCK_ACCEPTS: &str = "an integer in 8..=65536";
const SPIN_ACCEPTS: &str = "an integer in 0..=1000000";
const EW_ACCEPTS: &str = "1|2|4";
const GROUPS_ACCEPTS: &str = "an integer in 64..=65535";
const LANES_ACCEPTS: &str = "1|2|4|8|16|32|64";
const AUTO_BOOL_ACCEPTS: &str = "auto, or 1|true|yes|on or 0|false|no|off";
const MATVEC_ACCEPTS: &str = "auto|block|warp";
const PERSISTENT_ACCEPTS: &str = "0|off, 1|on (as many blocks an SM as fit), or 2|3|4|6|8|12|16 blocks an SM at most";
const SUBS_ACCEPTS: &str = "1|2|4";
const PREFILL_ACCEPTS: &str = "auto|mma|f32";
const DECODE_ACCEPTS: &str = "auto|f32|f16|q8";

impl Default for Config {
    /// What an empty environment gives.
    fn default() -> Config {
        Config {
            backend: None,
            force_cpu: false,
            gemm_kc: None,
            gemm_mc: None,
            wgpu_spin_us: 200,
            wgpu_ew_items: 2,
            wgpu_reduce_groups: 2048,
            wgpu_lanes: None,
            wgpu_fuse: true,
            wgpu_f16: None,
            cuda_pdl: true,
            cuda_matvec_block: None,
            cuda_graphs: true,
            cuda_persistent: None,
            cuda_persistent_subs: 1,
            cuda_fused_rope: true,
            cuda_prefill: CudaPrefill::Auto,
            cuda_decode: CudaDecode::Auto,
            nccl: true,
            nccl_library: None,
        }
    }
}

impl Config {
    /// Every variable [`Config`] reads.
    pub const VARS: [EnvVar; 20] = [
        EnvVar { name: "RAYO_BACKEND", accepts: BACKEND_ACCEPTS, default: "auto" },
        EnvVar { name: "RAYO_FORCE_CPU", accepts: BOOL_ACCEPTS, default: "0" },
        EnvVar { name: "RAYO_GEMM_KC", accepts: BLOCK_ACCEPTS, default: "from the L2 size" },
        EnvVar { name: "RAYO_GEMM_MC", accepts: BLOCK_ACCEPTS, default: "from the L2 size" },
        EnvVar { name: "RAYO_WGPU_SPIN_US", accepts: SPIN_ACCEPTS, default: "200" },
        EnvVar { name: "RAYO_WGPU_EW_ITEMS", accepts: EW_ACCEPTS, default: "2" },
        EnvVar { name: "RAYO_WGPU_REDUCE_GROUPS", accepts: GROUPS_ACCEPTS, default: "2048" },
        EnvVar { name: "RAYO_WGPU_LANES", accepts: LANES_ACCEPTS, default: "1 on a CPU adapter, else 16" },
        EnvVar { name: "RAYO_WGPU_FUSE", accepts: BOOL_ACCEPTS, default: "1" },
        EnvVar { name: "RAYO_WGPU_F16", accepts: AUTO_BOOL_ACCEPTS, default: "auto" },
        EnvVar { name: "RAYO_CUDA_PDL", accepts: BOOL_ACCEPTS, default: "1" },
        EnvVar { name: "RAYO_CUDA_MATVEC", accepts: MATVEC_ACCEPTS, default: "auto" },
        EnvVar { name: "RAYO_CUDA_GRAPHS", accepts: BOOL_ACCEPTS, default: "1" },
        EnvVar { name: "RAYO_CUDA_PERSISTENT", accepts: PERSISTENT_ACCEPTS, default: "0" },
        EnvVar { name: "RAYO_CUDA_PERSISTENT_SUBS", accepts: SUBS_ACCEPTS, default: "1" },
        EnvVar { name: "RAYO_CUDA_FUSED_ROPE", accepts: BOOL_ACCEPTS, default: "1" },
        EnvVar { name: "RAYO_CUDA_PREFILL", accepts: PREFILL_ACCEPTS, default: "auto" },
        EnvVar { name: "RAYO_CUDA_DECODE", accepts: DECODE_ACCEPTS, default: "auto" },
        EnvVar { name: "RAYO_NCCL", accepts: BOOL_ACCEPTS, default: "1" },
        EnvVar { name: "RAYO_NCCL_LIBRARY", accepts: "a path or file name", default: "libnccl.so.2, then libnccl.so" },
    ];

    /// The configuration of this process: the environment, read on first use and then fixed.
    /// Each value that is not understood is logged once (warn level) and its default used.
    pub fn get() -> &'static Config {
        &parsed().0
    }

    /// The values of this process's environment that [`Config::get`] did not understand
    /// (and replaced by their defaults), for a program that shows them without a logger.
    pub fn problems() -> &'static [Error] {
        &parsed().1
    }

    /// Parses a configuration from `lookup(name)` (the value of each variable, `None` when
    /// unset) without touching the process environment. Returns the configuration (defaults
    /// where a value was bad) and one error per bad value ([`Error::InvalidEnv`], or
    /// [`Error::UnsupportedBackend`] for a backend this CPU lacks).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> (Config, Vec<Error>) {
        let mut c = Config::default();
        let mut problems = Vec::new();
        let get = |var: &'static str| lookup(var).filter(|v| !v.trim().is_empty());
        if let Some(v) = get("RAYO_BACKEND") {
            match Backend::parse_env_value(&v) {
                Ok(b) => c.backend = b,
                Err(e) => problems.push(e),
            }
        }
        let mut num = |var: &'static str, accepts: &'static str, lo: u64, hi: u64| -> Option<u64> {
            let v = get(var)?;
            match v.trim().parse::<u64>() {
                Ok(x) if (lo..=hi).contains(&x) => Some(x),
                _ => {
                    problems.push(Error::InvalidEnv { var, value: v, expected: accepts });
                    None
                }
            }
        };
        c.gemm_kc = num("RAYO_GEMM_KC", BLOCK_ACCEPTS, 8, 65536).map(|x| x as usize);
        c.gemm_mc = num("RAYO_GEMM_MC", BLOCK_ACCEPTS, 8, 65536).map(|x| x as usize);
        if let Some(x) = num("RAYO_WGPU_SPIN_US", SPIN_ACCEPTS, 0, 1_000_000) {
            c.wgpu_spin_us = x;
        }
        if let Some(x) = num("RAYO_WGPU_REDUCE_GROUPS", GROUPS_ACCEPTS, 64, 65535) {
            c.wgpu_reduce_groups = x as usize;
        }
        if let Some(v) = get("RAYO_WGPU_EW_ITEMS") {
            match v.trim() {
                "1" => c.wgpu_ew_items = 1,
                "2" => c.wgpu_ew_items = 2,
                "4" => c.wgpu_ew_items = 4,
                _ => problems.push(Error::InvalidEnv { var: "RAYO_WGPU_EW_ITEMS", value: v, expected: EW_ACCEPTS }),
            }
        }
        // a value from a fixed list of spellings (case-insensitive), else reported
        let mut choice = |var: &'static str, accepts: &'static str, table: &[(&str, u8)]| -> Option<u8> {
            let v = get(var)?;
            let key = v.trim().to_ascii_lowercase();
            match table.iter().find(|(name, _)| *name == key) {
                Some(&(_, x)) => Some(x),
                None => {
                    problems.push(Error::InvalidEnv { var, value: v, expected: accepts });
                    None
                }
            }
        };
        const BOOL: &[(&str, u8)] = &[("1", 1), ("true", 1), ("yes", 1), ("on", 1), ("0", 0), ("false", 0), ("no", 0), ("off", 0)];
        const AUTO_BOOL: &[(&str, u8)] = &[("auto", 2), ("1", 1), ("true", 1), ("yes", 1), ("on", 1), ("0", 0), ("false", 0), ("no", 0), ("off", 0)];
        let mut flag = |var: &'static str, default: bool| choice(var, BOOL_ACCEPTS, BOOL).map_or(default, |x| x == 1);
        c.force_cpu = flag("RAYO_FORCE_CPU", false);
        c.wgpu_fuse = flag("RAYO_WGPU_FUSE", true);
        c.cuda_pdl = flag("RAYO_CUDA_PDL", true);
        c.cuda_graphs = flag("RAYO_CUDA_GRAPHS", true);
        c.cuda_fused_rope = flag("RAYO_CUDA_FUSED_ROPE", true);
        c.nccl = flag("RAYO_NCCL", true);
        let persistent = [("0", 0), ("off", 0), ("1", 1), ("on", 1), ("2", 2), ("3", 3), ("4", 4), ("6", 6), ("8", 8), ("12", 12), ("16", 16)];
        // (1 = as many blocks an SM as fit; 0 = off)
        c.cuda_persistent = match choice("RAYO_CUDA_PERSISTENT", PERSISTENT_ACCEPTS, &persistent) {
            None | Some(0) => None,
            Some(1) => Some(0),
            Some(n) => Some(u32::from(n)),
        };
        c.cuda_persistent_subs = choice("RAYO_CUDA_PERSISTENT_SUBS", SUBS_ACCEPTS, &[("1", 1), ("2", 2), ("4", 4)]).map_or(1, u32::from);
        let lanes = [("1", 1), ("2", 2), ("4", 4), ("8", 8), ("16", 16), ("32", 32), ("64", 64)];
        c.wgpu_lanes = choice("RAYO_WGPU_LANES", LANES_ACCEPTS, &lanes).map(usize::from);
        c.wgpu_f16 = choice("RAYO_WGPU_F16", AUTO_BOOL_ACCEPTS, AUTO_BOOL).and_then(|x| (x != 2).then_some(x == 1));
        c.cuda_matvec_block =
            choice("RAYO_CUDA_MATVEC", MATVEC_ACCEPTS, &[("auto", 2), ("block", 1), ("warp", 0)]).and_then(|x| (x != 2).then_some(x == 1));
        c.cuda_prefill = match choice("RAYO_CUDA_PREFILL", PREFILL_ACCEPTS, &[("auto", 0), ("mma", 1), ("f32", 2)]) {
            Some(1) => CudaPrefill::Mma,
            Some(2) => CudaPrefill::F32,
            _ => CudaPrefill::Auto,
        };
        c.cuda_decode = match choice("RAYO_CUDA_DECODE", DECODE_ACCEPTS, &[("auto", 0), ("f32", 1), ("f16", 2), ("q8", 3)]) {
            Some(1) => CudaDecode::F32,
            Some(2) => CudaDecode::F16,
            Some(3) => CudaDecode::Q8,
            _ => CudaDecode::Auto,
        };
        c.nccl_library = get("RAYO_NCCL_LIBRARY").map(|v| v.trim().to_string());
        (c, problems)
    }
}

impl fmt::Display for Config {
    /// One `NAME=value` line per variable, as parsed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |x: Option<usize>| x.map_or_else(|| "auto".to_string(), |v| v.to_string());
        writeln!(f, "RAYO_BACKEND={}", self.backend.map_or("auto", Backend::name))?;
        writeln!(f, "RAYO_FORCE_CPU={}", u8::from(self.force_cpu))?;
        writeln!(f, "RAYO_GEMM_KC={}", opt(self.gemm_kc))?;
        writeln!(f, "RAYO_GEMM_MC={}", opt(self.gemm_mc))?;
        writeln!(f, "RAYO_WGPU_SPIN_US={}", self.wgpu_spin_us)?;
        writeln!(f, "RAYO_WGPU_EW_ITEMS={}", self.wgpu_ew_items)?;
        writeln!(f, "RAYO_WGPU_REDUCE_GROUPS={}", self.wgpu_reduce_groups)?;
        let auto_bool = |x: Option<bool>| x.map_or("auto", |b| if b { "1" } else { "0" });
        writeln!(f, "RAYO_WGPU_LANES={}", opt(self.wgpu_lanes))?;
        writeln!(f, "RAYO_WGPU_FUSE={}", u8::from(self.wgpu_fuse))?;
        writeln!(f, "RAYO_WGPU_F16={}", auto_bool(self.wgpu_f16))?;
        writeln!(f, "RAYO_CUDA_PDL={}", u8::from(self.cuda_pdl))?;
        writeln!(f, "RAYO_CUDA_MATVEC={}", self.cuda_matvec_block.map_or("auto", |b| if b { "block" } else { "warp" }))?;
        writeln!(f, "RAYO_CUDA_GRAPHS={}", u8::from(self.cuda_graphs))?;
        writeln!(f, "RAYO_CUDA_PERSISTENT_SUBS={}", self.cuda_persistent_subs)?;
        writeln!(f, "RAYO_CUDA_PERSISTENT={}", self.cuda_persistent.map_or("0".to_string(), |n| if n == 0 { "1".into() } else { n.to_string() }))?;
        writeln!(f, "RAYO_CUDA_FUSED_ROPE={}", u8::from(self.cuda_fused_rope))?;
        let prefill = match self.cuda_prefill {
            CudaPrefill::Auto => "auto",
            CudaPrefill::Mma => "mma",
            CudaPrefill::F32 => "f32",
        };
        writeln!(f, "RAYO_CUDA_PREFILL={prefill}")?;
        let decode = match self.cuda_decode {
            CudaDecode::Auto => "auto",
            CudaDecode::F32 => "f32",
            CudaDecode::F16 => "f16",
            CudaDecode::Q8 => "q8",
        };
        writeln!(f, "RAYO_CUDA_DECODE={decode}")?;
        writeln!(f, "RAYO_NCCL={}", u8::from(self.nccl))?;
        write!(f, "RAYO_NCCL_LIBRARY={}", self.nccl_library.as_deref().unwrap_or("default"))
    }
}

/// The environment parsed once; each problem logged once.
fn parsed() -> &'static (Config, Vec<Error>) {
    static CONFIG: OnceLock<(Config, Vec<Error>)> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let (config, problems) = Config::from_lookup(read);
        for e in &problems {
            log::warn!("rayo: {e}; using the default");
        }
        (config, problems)
    })
}

/// The process environment's value of `var` (a value that is not UTF-8 is passed on lossily,
/// so that it is reported rather than taken for unset).
pub(crate) fn read(var: &str) -> Option<String> {
    std::env::var_os(var).map(|v| v.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> (Config, Vec<Error>) {
        Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn empty_environment_gives_the_defaults() {
        assert_eq!(parse(&[]), (Config::default(), vec![]));
        assert_eq!(parse(&[("RAYO_BACKEND", " "), ("RAYO_GEMM_KC", "")]), (Config::default(), vec![]));
    }

    #[test]
    fn good_values_are_taken() {
        let (c, e) = parse(&[
            ("RAYO_BACKEND", "Scalar"),
            ("RAYO_FORCE_CPU", "TRUE"),
            ("RAYO_GEMM_KC", "256"),
            ("RAYO_GEMM_MC", "96"),
            ("RAYO_WGPU_SPIN_US", "0"),
            ("RAYO_WGPU_EW_ITEMS", "4"),
            ("RAYO_WGPU_REDUCE_GROUPS", "64"),
            ("RAYO_WGPU_LANES", "8"),
            ("RAYO_WGPU_FUSE", "off"),
            ("RAYO_WGPU_F16", "Auto"),
            ("RAYO_CUDA_PDL", "0"),
            ("RAYO_CUDA_MATVEC", "warp"),
            ("RAYO_CUDA_GRAPHS", "no"),
            ("RAYO_CUDA_PERSISTENT", "4"),
            ("RAYO_CUDA_PERSISTENT_SUBS", "2"),
            ("RAYO_CUDA_FUSED_ROPE", "false"),
            ("RAYO_CUDA_PREFILL", "MMA"),
            ("RAYO_CUDA_DECODE", "q8"),
        ]);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(c.backend, Some(Backend::Scalar));
        assert!(c.force_cpu);
        assert_eq!((c.gemm_kc, c.gemm_mc), (Some(256), Some(96)));
        assert_eq!((c.wgpu_spin_us, c.wgpu_ew_items, c.wgpu_reduce_groups), (0, 4, 64));
        assert_eq!((c.wgpu_lanes, c.wgpu_fuse, c.wgpu_f16), (Some(8), false, None));
        assert_eq!((c.cuda_pdl, c.cuda_matvec_block, c.cuda_graphs, c.cuda_fused_rope), (false, Some(false), false, false));
        assert_eq!((c.cuda_prefill, c.cuda_decode), (CudaPrefill::Mma, CudaDecode::Q8));
        assert_eq!((c.cuda_persistent, c.cuda_persistent_subs), (Some(4), 2));
        let shown = c.to_string();
        assert!(shown.contains("RAYO_GEMM_KC=256") && shown.contains("RAYO_CUDA_PREFILL=mma") && shown.contains("RAYO_WGPU_LANES=8"), "{c}");
        assert_eq!(shown.lines().count(), Config::VARS.len(), "{c}");
    }

    #[test]
    fn bad_values_are_reported_and_the_default_used() {
        let bad = [
            ("RAYO_BACKEND", "mmx"),
            ("RAYO_FORCE_CPU", "maybe"),
            ("RAYO_GEMM_KC", "4"),
            ("RAYO_GEMM_MC", "-1"),
            ("RAYO_WGPU_SPIN_US", "1e9"),
            ("RAYO_WGPU_EW_ITEMS", "3"),
            ("RAYO_WGPU_REDUCE_GROUPS", "65536"),
            ("RAYO_WGPU_LANES", "3"),
            ("RAYO_WGPU_FUSE", "2"),
            ("RAYO_WGPU_F16", "half"),
            ("RAYO_CUDA_PDL", "yes please"),
            ("RAYO_CUDA_MATVEC", "thread"),
            ("RAYO_CUDA_GRAPHS", "-1"),
            ("RAYO_CUDA_FUSED_ROPE", "x"),
            ("RAYO_CUDA_PREFILL", "wgmma"),
            ("RAYO_CUDA_DECODE", "q4"),
        ];
        let (c, e) = parse(&bad);
        assert_eq!(c, Config::default());
        assert_eq!(e.len(), bad.len(), "{e:?}");
        for (var, value) in bad {
            let err =
                e.iter().find(|x| matches!(x, Error::InvalidEnv { var: v, .. } if *v == var)).unwrap_or_else(|| panic!("{var} not reported: {e:?}"));
            let msg = err.to_string();
            let accepts = Config::VARS.iter().find(|v| v.name == var).unwrap().accepts;
            assert!(msg.contains(var) && msg.contains(value) && msg.contains(accepts), "{msg}");
        }
    }
}
