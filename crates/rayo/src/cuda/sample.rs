//! Greedy sampling on the device ([`ArgmaxKernel`]): a decoding step sends the host one token
//! id (and two words of checks) instead of the vocabulary's logits.

use super::buffer::DeviceBuffer;
use super::device::CudaDevice;
use super::ffi::{launch, Arg};
use super::llm::{room, u32_of};
use crate::error::{Error, Result};
use rayo_ptx::kernels::ArgmaxKernel;

/// What [`CudaDevice::argmax`] found in a row of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Argmax {
    /// The index of the first maximum (`None`: every value is −inf or NaN).
    pub index: Option<u32>,
    /// The maximum (−inf when `index` is `None`).
    pub max: f32,
    /// The first NaN or +inf and its index, if any.
    pub first_bad: Option<(u32, f32)>,
}

impl CudaDevice {
    /// The first maximum of the first `n` values of `x`, in one launch; `scratch` (at least 3
    /// values) takes the result, of which the host reads 12 bytes.
    pub fn argmax(&self, x: &DeviceBuffer, n: usize, scratch: &mut DeviceBuffer) -> Result<Argmax> {
        const OP: &str = "cuda argmax";
        self.owns(OP, &[x, scratch])?;
        if n == 0 {
            return Err(Error::EmptyInput { op: OP });
        }
        room(OP, x.len(), n)?;
        room(OP, scratch.len(), 3)?;
        let k = ArgmaxKernel;
        let f = self.loaded(&k)?;
        launch(&self.stream, &f, k.launch(), &mut [Arg::In(&x.slice), Arg::Out(&mut scratch.slice), Arg::U32(u32_of(OP, "n", n)?)])?;
        let mut r = [0f32; 3];
        self.download_prefix(scratch, &mut r)?;
        let (index, bad) = (r[0].to_bits(), r[1].to_bits());
        let first_bad = match bad {
            u32::MAX => None,
            i => {
                let mut v = [0f32];
                self.copy_within_device(x, i as usize, scratch, 0, 1)?;
                self.download_prefix(scratch, &mut v)?;
                Some((i, v[0]))
            }
        };
        Ok(Argmax { index: (index != u32::MAX).then_some(index), max: r[2], first_bad })
    }
}
