//! What every block format provides: its definition as values (`dequantize`, scalar, the
//! reference the SIMD paths are tested against), llama.cpp's reference quantizer, and the
//! unpacked form the SIMD dequantizer consumes.

use super::blocks::Block;

/// Decoding and encoding of one block. Both take slices of exactly [`Block::VALUES`] values
/// (a shorter slice panics, like `copy_from_slice`; the row functions
/// [`super::dequantize`] and [`super::quantize`] check lengths and return errors instead).
pub trait BlockCodec: Block {
    /// The block's values, computed as ggml (and the `gguf` package's numpy reference)
    /// compute them: each a product of f32s (`d·q`, then `− m` or `+ m` as a separate
    /// operation), so the results are bit-identical.
    fn dequantize(&self, out: &mut [f32]);

    /// `quantize_row_*_ref` of llama.cpp's `ggml-quants.c` for one block (no importance
    /// matrix). NaN or ±inf inputs give some block (whatever the arithmetic makes of them)
    /// and never panic.
    fn quantize(src: &[f32]) -> Self;
}

/// How a group's min enters its values.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MinKind {
    /// `d·q`
    None,
    /// `d·q + m` (Q4_1, Q5_1)
    Add,
    /// `d·q − m` (Q2_K, Q4_K, Q5_K)
    Sub,
}

/// A block as small integers and per-group f32 coefficients: value `i` is
/// `d[i / GROUP]·q[i]`, then `± m[i / GROUP]` per [`MinKind`] — exactly the f32 operations of
/// [`BlockCodec::dequantize`], so a vector loop over this form is bit-identical to it.
pub trait Unpack: BlockCodec {
    /// Values sharing one scale (and min); divides `VALUES` and is a multiple of 16.
    const GROUP: usize;
    const MIN: MinKind;
    /// Writes `q[..VALUES]`, `d[..VALUES / GROUP]` and (unless `MIN` is `None`) `m[..]`.
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], m: &mut [f32; 16]);
}
