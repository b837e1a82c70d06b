//! A weight matrix as the CPU backend holds it: in place in the file's memory map, and where
//! rayo has a kernel for it ([`Repacked`]: Q4_K on AVX-512 VNNI and AVX2) a copy repacked for the
//! one-token rows of decoding (the prompt rows' panels are built from it too), made the first
//! time a product with quantized activations runs (an embedding table that is only looked up is
//! never repacked; a tied output head is, once).

use crate::weights::WeightRef;
use crate::Result;
use rayo::gguf::GgufFile;
use rayo::quant::{QuantMatrix, Repacked};
use std::sync::{Arc, OnceLock};

#[derive(Clone, Debug)]
pub struct CpuWeight {
    pub tensor: WeightRef,
    /// Shared by the clones (a layer's weights are cloned into each product's job).
    repacked: Arc<OnceLock<Option<Repacked>>>,
}

impl CpuWeight {
    pub fn new(tensor: WeightRef) -> CpuWeight {
        CpuWeight { tensor, repacked: Arc::new(OnceLock::new()) }
    }

    /// Repacks the rows now if that has not been tried yet (on the calling thread; the
    /// repacking itself uses rayon's threads).
    pub fn repack(&self, file: &GgufFile, simd: rayo::Backend) -> Result<()> {
        if self.repacked.get().is_none() {
            let m = self.tensor.matrix(file)?;
            let _ = self.repacked.get_or_init(|| Repacked::new(simd, &m));
        }
        Ok(())
    }

    /// The matrix as a view of `file`'s bytes, with the repacked rows where they were made.
    pub fn matrix<'f>(&'f self, file: &'f GgufFile) -> Result<QuantMatrix<'f>> {
        let m = self.tensor.matrix(file)?;
        match self.repacked.get() {
            Some(Some(r)) => Ok(m.with_repacked(r)?),
            _ => Ok(m),
        }
    }
}
