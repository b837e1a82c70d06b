//! Rows of values ↔ bytes of any [`GgmlType`]: length checks, the view of bytes as blocks
//! (in place when aligned, copied a few blocks at a time when not), the ISA dispatch.

use super::blocks::*;
use super::codec::{BlockCodec, Unpack};
use super::{float, kernel, GgmlType};
use crate::backend::dispatch;
use crate::cpu::parallel;
use crate::{Backend, Error, Result};

/// Blocks copied at a time from a misaligned byte slice.
const UNALIGNED_BATCH: usize = 16;

/// Values worth a thread of their own: dequantizing streams memory; the k-quants' scale
/// searches cost some 100 ns a value, the other quantizers a few.
const GRAIN_DEQUANTIZE: usize = 1 << 18;
const GRAIN_QUANTIZE_K: usize = 1 << 12;
const GRAIN_QUANTIZE: usize = 1 << 16;

/// `f` over matching parts of `a` (`a_per` elements a block) and `b` (`b_per`), split at
/// block boundaries over up to `parts` threads.
fn split<T: Sync, U: Send>(a: &[T], a_per: usize, b: &mut [U], b_per: usize, parts: usize, f: &(impl Fn(&[T], &mut [U]) + Sync)) {
    let blocks = a.len() / a_per.max(1);
    if parts <= 1 || blocks < 2 {
        return f(a, b);
    }
    let m = blocks * (parts / 2) / parts;
    let (a0, a1) = a.split_at(m * a_per);
    let (b0, b1) = b.split_at_mut(m * b_per);
    parallel::both(|| split(a0, a_per, b0, b_per, parts / 2, f), || split(a1, a_per, b1, b_per, parts - parts / 2, f));
}

/// Checks that `n` values of `ty` take exactly `bytes` bytes.
fn check(op: &'static str, ty: GgmlType, n: usize, bytes: usize) -> Result<()> {
    let want = ty.bytes_for(n)?;
    if want != bytes {
        return Err(Error::LengthMismatch { op, expected: want, actual: bytes });
    }
    Ok(())
}

/// Decodes `bytes` (whole blocks of `ty`, as a GGUF file stores them) into `out`, on the
/// selected backend ([`Backend::selected`]). Errors: `out.len()` is not a whole number of
/// blocks (`NotBlockMultiple`), or `bytes` is not the size of `out.len()` values of `ty`
/// (`LengthMismatch`). Any alignment of `bytes` works.
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    dequantize_with(Backend::selected(), ty, bytes, out)
}

/// [`dequantize`] on a given backend (an unsupported one runs the scalar code).
pub fn dequantize_with(backend: Backend, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check("quant::dequantize", ty, out.len(), bytes.len())?;
    let parts = parallel::parts(out.len(), GRAIN_DEQUANTIZE);
    split(bytes, ty.type_size(), out, ty.block_size(), parts, &|bytes, out| dequantize_part(backend, ty, bytes, out));
    Ok(())
}

/// Lengths already checked.
fn dequantize_part(backend: Backend, ty: GgmlType, bytes: &[u8], out: &mut [f32]) {
    match ty {
        GgmlType::F32 => float::dequantize_f32(bytes, out),
        GgmlType::F16 => float::dequantize_f16(backend, bytes, out),
        GgmlType::BF16 => float::dequantize_bf16(bytes, out),
        GgmlType::Q4_0 => blocks_into::<BlockQ4_0>(backend, bytes, out),
        GgmlType::Q4_1 => blocks_into::<BlockQ4_1>(backend, bytes, out),
        GgmlType::Q5_0 => blocks_into::<BlockQ5_0>(backend, bytes, out),
        GgmlType::Q5_1 => blocks_into::<BlockQ5_1>(backend, bytes, out),
        GgmlType::Q8_0 => blocks_into::<BlockQ8_0>(backend, bytes, out),
        GgmlType::Q8_1 => blocks_into::<BlockQ8_1>(backend, bytes, out),
        GgmlType::Q2_K => blocks_into::<BlockQ2K>(backend, bytes, out),
        GgmlType::Q3_K => blocks_into::<BlockQ3K>(backend, bytes, out),
        GgmlType::Q4_K => blocks_into::<BlockQ4K>(backend, bytes, out),
        GgmlType::Q5_K => blocks_into::<BlockQ5K>(backend, bytes, out),
        GgmlType::Q6_K => blocks_into::<BlockQ6K>(backend, bytes, out),
        GgmlType::Q8_K => blocks_into::<BlockQ8K>(backend, bytes, out),
    }
}

/// [`dequantize`] through each block's scalar definition ([`BlockCodec::dequantize`]): the
/// reference the vector paths are tested against. Same errors.
pub fn dequantize_scalar(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check("quant::dequantize_scalar", ty, out.len(), bytes.len())?;
    fn each<B: BlockCodec>(bytes: &[u8], out: &mut [f32]) {
        for (c, o) in bytes.chunks_exact(core::mem::size_of::<B>()).zip(out.chunks_exact_mut(B::VALUES)) {
            bytemuck::pod_read_unaligned::<B>(c).dequantize(o);
        }
    }
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => return dequantize_with(Backend::Scalar, ty, bytes, out),
        GgmlType::Q4_0 => each::<BlockQ4_0>(bytes, out),
        GgmlType::Q4_1 => each::<BlockQ4_1>(bytes, out),
        GgmlType::Q5_0 => each::<BlockQ5_0>(bytes, out),
        GgmlType::Q5_1 => each::<BlockQ5_1>(bytes, out),
        GgmlType::Q8_0 => each::<BlockQ8_0>(bytes, out),
        GgmlType::Q8_1 => each::<BlockQ8_1>(bytes, out),
        GgmlType::Q2_K => each::<BlockQ2K>(bytes, out),
        GgmlType::Q3_K => each::<BlockQ3K>(bytes, out),
        GgmlType::Q4_K => each::<BlockQ4K>(bytes, out),
        GgmlType::Q5_K => each::<BlockQ5K>(bytes, out),
        GgmlType::Q6_K => each::<BlockQ6K>(bytes, out),
        GgmlType::Q8_K => each::<BlockQ8K>(bytes, out),
    }
    Ok(())
}

/// Lengths already checked: `bytes` is `out.len() / VALUES` blocks.
fn blocks_into<B: Unpack>(backend: Backend, bytes: &[u8], out: &mut [f32]) {
    let run = |blocks: &[B], out: &mut [f32]| dispatch!(backend, |s| kernel::dequantize_blocks(s, blocks, out));
    match bytemuck::try_cast_slice::<u8, B>(bytes) {
        Ok(blocks) => run(blocks, out),
        Err(_) => {
            // Misaligned for the block's f16/f32 fields: copy a few blocks at a time.
            let mut buf = [B::zeroed(); UNALIGNED_BATCH];
            let size = core::mem::size_of::<B>();
            for (chunk, out) in bytes.chunks(size * UNALIGNED_BATCH).zip(out.chunks_mut(B::VALUES * UNALIGNED_BATCH)) {
                let n = chunk.len() / size;
                for (b, c) in buf.iter_mut().zip(chunk.chunks_exact(size)) {
                    *b = bytemuck::pod_read_unaligned(c);
                }
                run(&buf[..n], out);
            }
        }
    }
}

/// Encodes `src` as `ty` into `out` with llama.cpp's reference quantizers
/// (`quantize_row_*_ref`). Errors: `src.len()` is not a whole number of blocks
/// (`NotBlockMultiple`), or `out` is not `ty.bytes_for(src.len())` bytes (`LengthMismatch`).
/// NaN and ±inf in `src` never panic; the blocks they touch hold whatever ggml's arithmetic
/// makes of them (as in llama.cpp, they are not meaningful).
pub fn quantize(ty: GgmlType, src: &[f32], out: &mut [u8]) -> Result<()> {
    check("quant::quantize", ty, src.len(), out.len())?;
    let grain = if ty.block_size() == super::QK_K && ty != GgmlType::Q8_K { GRAIN_QUANTIZE_K } else { GRAIN_QUANTIZE };
    split(src, ty.block_size(), out, ty.type_size(), parallel::parts(src.len(), grain), &|src, out| quantize_part(ty, src, out));
    Ok(())
}

/// Lengths already checked.
fn quantize_part(ty: GgmlType, src: &[f32], out: &mut [u8]) {
    match ty {
        GgmlType::F32 => float::quantize_f32(src, out),
        GgmlType::F16 => float::quantize_f16(src, out),
        GgmlType::BF16 => float::quantize_bf16(src, out),
        GgmlType::Q4_0 => blocks_from::<BlockQ4_0>(src, out),
        GgmlType::Q4_1 => blocks_from::<BlockQ4_1>(src, out),
        GgmlType::Q5_0 => blocks_from::<BlockQ5_0>(src, out),
        GgmlType::Q5_1 => blocks_from::<BlockQ5_1>(src, out),
        GgmlType::Q8_0 => blocks_from::<BlockQ8_0>(src, out),
        GgmlType::Q8_1 => blocks_from::<BlockQ8_1>(src, out),
        GgmlType::Q2_K => blocks_from::<BlockQ2K>(src, out),
        GgmlType::Q3_K => blocks_from::<BlockQ3K>(src, out),
        GgmlType::Q4_K => blocks_from::<BlockQ4K>(src, out),
        GgmlType::Q5_K => blocks_from::<BlockQ5K>(src, out),
        GgmlType::Q6_K => blocks_from::<BlockQ6K>(src, out),
        GgmlType::Q8_K => blocks_from::<BlockQ8K>(src, out),
    }
}

/// [`quantize`] into a new vector.
pub fn quantize_to_vec(ty: GgmlType, src: &[f32]) -> Result<Vec<u8>> {
    let mut out = vec![0u8; ty.bytes_for(src.len())?];
    quantize(ty, src, &mut out)?;
    Ok(out)
}

/// Lengths already checked. Blocks are written as bytes, so `out` may have any alignment.
fn blocks_from<B: BlockCodec>(src: &[f32], out: &mut [u8]) {
    for (x, o) in src.chunks_exact(B::VALUES).zip(out.chunks_exact_mut(core::mem::size_of::<B>())) {
        o.copy_from_slice(bytemuck::bytes_of(&B::quantize(x)));
    }
}
