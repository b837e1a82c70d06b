//! Q8_K: the activations' side of k-quant products: f32 `d`, 256 i8 values, and the sums of
//! each 16 (`bsums`) that the products with a min use.

use super::blocks::BlockQ8K;
use super::codec::{BlockCodec, MinKind, Unpack};
use super::search::{nearest_int, signed_max};
use super::QK_K;

impl BlockCodec for BlockQ8K {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK_K];
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = self.d * q as f32;
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK_K];
        let mut y = BlockQ8K { d: 0.0, qs: [0; QK_K], bsums: [0; 16] };
        let (max, amax) = signed_max(x);
        if amax == 0.0 {
            return y;
        }
        // −127 (not −128) so that no value is −128 (ggml: "for IQ2_XXS").
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, q) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = q.iter().map(|&q| q as i16).sum();
        }
        y.d = 1.0 / iscale;
        y
    }
}

impl Unpack for BlockQ8K {
    const GROUP: usize = QK_K;
    const MIN: MinKind = MinKind::None;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], _m: &mut [f32; 16]) {
        q.copy_from_slice(&self.qs);
        d[0] = self.d;
    }
}
