//! The kernel library: each kernel is a Rust value of its parameters (shape, tile, options) that
//! builds a checked [`PtxKernel`] for a target SM.

mod add_rows;
mod argmax;
mod attention;
mod common;
mod copy;
mod decode_attention;
mod embed;
mod flash_attention;
mod gemm;
mod half_gemm;
mod kquant;
mod narrow;
mod norm;
mod persistent;
mod qmatvec;
mod qmatvec_q8;
mod reduce;
mod rope;
mod rowloop;
mod softmax;
mod top_k;
mod wgmma_attention;
mod wgmma_gemm;

pub use add_rows::AddRowsKernel;
pub use argmax::ArgmaxKernel;
pub use attention::{AttentionKernel, KvStoreKernel};
pub use copy::CopyColsKernel;
pub use decode_attention::DecodeAttentionKernel;
pub use embed::{DequantF16Kernel, DequantTKernel, EmbedKernel};
pub use flash_attention::FlashAttentionKernel;
pub use gemm::{GemmKernel, GemmVariant};
pub use half_gemm::{HalfEpilogue, HalfGemmKernel};
pub use narrow::{ActFormat, NarrowKernel};
pub use norm::{NormKernel, NormKind};
pub use persistent::{PersistentKernel, Phase};
pub use qmatvec::{Epilogue, QFormat, QMatvecKernel};
pub use reduce::{ReduceCombine, ReduceKernel, ReduceLoad};
pub use rope::{RopeKernel, RopePairs};
pub use softmax::SoftmaxKernel;
pub use top_k::{TopKKernel, TopKRowsKernel};
pub use wgmma_attention::WgmmaAttentionKernel;
pub use wgmma_gemm::WgmmaGemmKernel;

use crate::ptx::{CheckError, PtxKernel, PtxModule};

/// Grid and block sizes (x, y, z) and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

/// A kernel of the library: a name unique to the code it generates, and its PTX for a target SM.
///
/// Shapes and scalars (lengths, row sizes, epsilon, GEMM dimensions) are kernel *parameters*, not
/// part of the generated code: the name depends only on what the code is specialised on, so a
/// cache keyed by (kernel type, name) stays small however many shapes an application runs.
pub trait Kernel {
    /// The entry name; two values of one kernel type with the same name generate the same code
    /// (a runtime caches by the type and this name).
    fn name(&self) -> String;

    /// Builds the entry function for `sm` (e.g. 80, 90).
    fn build(&self, sm: u32) -> PtxKernel;

    /// The PTX target for `sm`: `sm_{sm}`, or an architecture-specific one (`sm_90a`) for a
    /// kernel that uses its instructions.
    fn target(&self, sm: u32) -> String {
        format!("sm_{sm}")
    }

    /// A module holding only this kernel, PTX ISA 8.0, for [`Kernel::target`].
    fn module(&self, sm: u32) -> PtxModule {
        PtxModule::new().version(8, 0).target(&self.target(sm)).address_size(64).kernel(self.build(sm))
    }

    /// PTX text for `sm_{sm}`.
    fn emit_ptx_for(&self, sm: u32) -> String {
        self.module(sm).emit()
    }

    /// PTX text for sm_90 (Hopper).
    fn emit_ptx(&self) -> String {
        self.emit_ptx_for(90)
    }

    /// Runs the checker on the kernel built for `sm`.
    fn check(&self, sm: u32) -> Result<(), CheckError> {
        self.module(sm).check()
    }
}

/// One representative of every kernel variant of this crate (used by `rayo ptx` and the ptxas
/// tests; the fused element-wise kernels are built from rayo's op registry, in `rayo::cuda`).
pub fn all_variants() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = vec![];
    for (load, combine) in [
        (ReduceLoad::Plain, ReduceCombine::Sum),
        (ReduceLoad::Plain, ReduceCombine::Max),
        (ReduceLoad::Plain, ReduceCombine::Min),
        (ReduceLoad::Product, ReduceCombine::Sum),
        (ReduceLoad::Abs, ReduceCombine::Sum),
        (ReduceLoad::Square, ReduceCombine::Sum),
        (ReduceLoad::Abs, ReduceCombine::Max),
    ] {
        let k = ReduceKernel::new(load, combine);
        v.push(Box::new(k));
        if load == ReduceLoad::Square {
            v.push(Box::new(k.second_pass(true)));
        }
    }
    // one kernel per chunk width: 4096 and 1000 share one (16-byte chunks), 7 gets the other
    for cols in [4096, 7] {
        v.push(Box::new(SoftmaxKernel::new(cols, false)));
        v.push(Box::new(SoftmaxKernel::new(cols, true)));
        v.push(Box::new(NormKernel::new(NormKind::LayerNorm, cols, 1e-5)));
        v.push(Box::new(NormKernel::new(NormKind::RmsNorm, cols, 1e-5)));
        v.push(Box::new(NormKernel::new(NormKind::RmsNorm, cols, 1e-5).residual()));
    }
    // the LLM engine's kernels
    v.extend(QFormat::ALL.map(|f| Box::new(QMatvecKernel::new(f)) as Box<dyn Kernel>));
    v.extend(QFormat::ALL.map(|f| Box::new(EmbedKernel::new(f)) as Box<dyn Kernel>));
    v.extend(QFormat::ALL.map(|f| Box::new(DequantTKernel::new(f)) as Box<dyn Kernel>));
    v.extend(QFormat::ALL.map(|f| Box::new(DequantF16Kernel::new(f)) as Box<dyn Kernel>));
    for epilogue in [HalfEpilogue::Store, HalfEpilogue::Add] {
        v.extend(HalfGemmKernel::new(epilogue, 576).map(|g| Box::new(g) as Box<dyn Kernel>));
    }
    v.extend([64, 128, 256].map(|hd| Box::new(FlashAttentionKernel::new(hd).expect("64, 128 and 256")) as Box<dyn Kernel>));
    v.push(Box::new(CopyColsKernel));
    v.push(Box::new(AddRowsKernel));
    v.push(Box::new(ArgmaxKernel));
    v.push(Box::new(TopKKernel));
    v.push(Box::new(TopKRowsKernel));
    for (norm, mats, epi) in
        [(true, 3, Epilogue::Store), (false, 1, Epilogue::Add), (true, 2, Epilogue::Swiglu), (true, 2, Epilogue::Geglu), (true, 1, Epilogue::Store)]
    {
        v.extend(QMatvecKernel::fused(QFormat::Q4_1, norm, mats, epi).map(|k| Box::new(k) as Box<dyn Kernel>));
        v.extend(QMatvecKernel::fused(QFormat::Q8_0, norm, mats, epi).map(|k| Box::new(k.per_block(true)) as Box<dyn Kernel>));
    }
    // Q, K and V with their biases (Qwen2's), a warp and a block per row
    for wide in [false, true] {
        v.extend(
            QMatvecKernel::fused(QFormat::Q5_0, true, 3, Epilogue::Store)
                .and_then(QMatvecKernel::with_bias)
                .map(|k| Box::new(k.per_block(wide)) as Box<dyn Kernel>),
        );
    }
    // the decoding products on narrower activations: every format with a path (f16: all; 8
    // bits: those with dp4a), plain, three matrices, with the residual add, and gate·up (a
    // block per row, as a decoding step takes them)
    for act in [ActFormat::F16, ActFormat::Q8] {
        v.extend([false, true].map(|norm| Box::new(NarrowKernel::new(norm, act).expect("not f32")) as Box<dyn Kernel>));
        for fmt in QFormat::ALL {
            for (mats, epi) in [(1, Epilogue::Store), (3, Epilogue::Store), (1, Epilogue::Add), (2, Epilogue::Swiglu), (2, Epilogue::Geglu)] {
                let k = QMatvecKernel::fused(fmt, false, mats, epi).and_then(|k| k.with_activations(act));
                v.extend(k.map(|k| Box::new(k.per_block(fmt != QFormat::Q8_0)) as Box<dyn Kernel>));
                if mats == 3 {
                    v.extend(k.and_then(QMatvecKernel::with_bias).map(|k| Box::new(k.per_block(fmt != QFormat::Q8_0)) as Box<dyn Kernel>));
                }
            }
        }
    }
    v.push(Box::new(RopeKernel::new(RopePairs::Adjacent)));
    v.push(Box::new(RopeKernel::new(RopePairs::HalfSplit)));
    v.push(Box::new(RopeKernel::with_cache(RopePairs::Adjacent, true)));
    v.push(Box::new(RopeKernel::with_cache(RopePairs::HalfSplit, false)));
    for f16 in [true, false] {
        v.push(Box::new(KvStoreKernel::new(f16)));
        for (hd, positions) in [(64, 8192), (128, 2048), (32, 10240), (96, 1024), (256, 4096)] {
            v.extend(AttentionKernel::new(hd, positions, f16).map(|a| Box::new(a) as Box<dyn Kernel>));
        }
        // a decoding step's, RoPE fused in: pairs inside a lane (64), across neighbouring lanes
        // (32), across halves (128; 256, Gemma 3's)
        for (hd, pairs) in [(64, RopePairs::Adjacent), (32, RopePairs::Adjacent), (128, RopePairs::HalfSplit), (256, RopePairs::HalfSplit)] {
            v.extend(DecodeAttentionKernel::new(hd, 8192, f16, pairs).map(|a| Box::new(a) as Box<dyn Kernel>));
            v.extend(DecodeAttentionKernel::new(hd, 8192, f16, pairs).map(|a| Box::new(a.batched()) as Box<dyn Kernel>));
            v.extend(DecodeAttentionKernel::new(hd, 8192, f16, pairs).map(|a| Box::new(a.with_qk_norm()) as Box<dyn Kernel>));
            v.extend(DecodeAttentionKernel::new(hd, 8192, f16, pairs).map(|a| Box::new(a.batched().with_qk_norm()) as Box<dyn Kernel>));
        }
    }
    // GEMM: one kernel per variant (the shape is a parameter)
    v.push(Box::new(GemmKernel::naive(1024, 1024, 1024)));
    for tile in [8, 16, 32] {
        v.push(Box::new(GemmKernel::tiled(1024, 1024, 1024, tile)));
    }
    for bk in [8, 16] {
        v.extend(GemmKernel::tensor_core_bk(4096, 4096, 4096, bk).map(|g| Box::new(g) as Box<dyn Kernel>));
        v.extend(GemmKernel::blocked_bk(4096, 4096, 4096, bk).map(|g| Box::new(g) as Box<dyn Kernel>));
        v.extend(GemmKernel::blocked_split(1024, 1024, 1024, bk, 2).map(|g| Box::new(g) as Box<dyn Kernel>));
    }
    v
}

/// The kernels that exist only for Hopper (sm_90a: `wgmma`, `setmaxnreg`, TMA), for tests and
/// the ptxas sweep.
pub fn hopper_variants() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = vec![];
    for ty in [crate::ptx::WgmmaType::F16, crate::ptx::WgmmaType::BF16, crate::ptx::WgmmaType::TF32] {
        for bn in [128, 256] {
            v.extend(WgmmaGemmKernel::new(ty, bn).map(|k| Box::new(k) as Box<dyn Kernel>));
            v.extend(WgmmaGemmKernel::new(ty, bn).map(|k| Box::new(k.clustered()) as Box<dyn Kernel>));
            v.extend(WgmmaGemmKernel::new(ty, bn).and_then(|k| k.narrow_c()).map(|k| Box::new(k) as Box<dyn Kernel>));
            v.extend(WgmmaGemmKernel::new(ty, bn).and_then(|k| k.clustered().accumulating()).map(|k| Box::new(k) as Box<dyn Kernel>));
        }
        if ty != crate::ptx::WgmmaType::TF32 {
            v.push(Box::new(WgmmaGemmKernel::tall(ty)));
            v.push(Box::new(WgmmaGemmKernel::tall(ty).clustered()));
        }
        for hd in [64, 128] {
            for causal in [false, true] {
                v.extend(WgmmaAttentionKernel::new(ty, hd, causal).map(|k| Box::new(k) as Box<dyn Kernel>));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// 1,000 different lengths, row sizes, epsilons and GEMM shapes name a handful of kernels:
    /// a runtime that caches by name compiles each once, however the sizes vary.
    #[test]
    fn shapes_and_scalars_do_not_multiply_kernels() {
        let mut names = HashSet::new();
        let mut variants = 0;
        for i in 0..1000u32 {
            let cols = 1 + i * 37 % 5000;
            let eps = 1e-6 * (1 + i) as f32;
            for log in [false, true] {
                names.insert(SoftmaxKernel::new(cols, log).name());
            }
            names.insert(NormKernel::new(NormKind::LayerNorm, cols, eps).name());
            names.insert(NormKernel::new(NormKind::RmsNorm, cols, eps).name());
            names.insert(ReduceKernel::new(ReduceLoad::Plain, ReduceCombine::Sum).name());
            let (m, k, n) = (1 + i % 97, 1 + i * 7 % 300, 1 + i * 13 % 211);
            names.insert(GemmKernel::auto(m, k, n).name());
            names.insert(GemmKernel::naive(m, k, n).name());
            let big = 128 * (1 + i % 8);
            names.insert(GemmKernel::auto(big, 8 * (1 + i % 64), big).name());
            names.insert(GemmKernel::for_device(big, 16 * (1 + i % 64), 128, 132).name());
            names.insert(GemmKernel::tensor_core(big, 8 * (1 + i % 64), big).name());
            variants += 10;
        }
        println!("{variants} kernel values, {} distinct names: {names:?}", names.len());
        // softmax/log_softmax x 2 widths, 2 norms x 2 widths, 1 reduce, naive, tiled16,
        // blocked8, blocked8 split 2, tf32 bk8 and bk16
        assert!(names.len() <= 16, "{} names: {names:?}", names.len());
    }

    /// `QFormat` is the table's PTX column, and its blocks are the table's (the float formats
    /// read 32 values at a time).
    #[test]
    fn qformats_are_the_tables_ptx_column() {
        let table: Vec<u32> = rayo_formats::FORMATS.iter().filter(|f| f.kernels.ptx).map(|f| f.id).collect();
        let mut ours: Vec<u32> = QFormat::ALL.iter().map(|q| q.id()).collect();
        ours.sort_unstable();
        assert_eq!(ours, table);
        for f in rayo_formats::FORMATS {
            let q = QFormat::of_id(f.id);
            assert_eq!(q.map(|q| q.id()), f.kernels.ptx.then_some(f.id), "{}", f.name);
            let Some(q) = q else { continue };
            assert_eq!(format!("{q:?}"), f.name);
            assert_eq!(q.block_values() % f.block_values, 0, "{}", f.name);
            assert_eq!(q.block_bytes() / (q.block_values() / f.block_values), f.block_bytes, "{}", f.name);
            assert_eq!(q.block_values(), f.block_values.max(32), "{}", f.name);
        }
        assert_eq!(QFormat::of_id(9), None, "Q8_1 has no PTX kernel");
        assert_eq!(QFormat::of_id(20), None, "IQ4_NL is not implemented");
    }

    #[test]
    fn every_variant_has_a_distinct_name() {
        let all = all_variants();
        let names: HashSet<String> = all.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), all.len(), "two variants share a name (a cache key)");
    }
}
