//! The scale searches of llama.cpp's reference k-quant quantizers (`ggml/src/ggml-quants.c`),
//! ported line for line: same f32 operations in the same order (no fused multiply-adds), so
//! that rayo's quantizers produce llama.cpp's bytes. Only the paths that the `_ref` quantizers
//! (no importance matrix) take are here.

/// Blocks whose largest magnitude is below this are all zero (`GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// Round to nearest, ties to even, through the f32 adder (`nearest_int`): valid for
/// |x| ≤ 4194303; outside that (and for NaN) it returns some integer, never panics.
#[inline(always)]
pub(crate) fn nearest_int(fval: f32) -> i32 {
    let val = fval + 12_582_912.0;
    let i = val.to_bits() as i32;
    (i & 0x007f_ffff) - 0x0040_0000
}

/// The value of largest magnitude (the first one, as ggml's strict comparison keeps) and that
/// magnitude.
#[inline(always)]
pub(crate) fn signed_max(x: &[f32]) -> (f32, f32) {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// `make_qx_quants` with `qw == NULL`: symmetric quantization of `x` to `L[i] ∈ [0, 2·nmax)`
/// (offset by `nmax`), returning the scale. `rmse_type` chooses the weights (1: x², 2: 1,
/// 3: |x|, else √|x|); 0 takes the plain max scale, a negative type returns early.
pub(crate) fn make_qx_quants(nmax: i32, x: &[f32], l_out: &mut [i8], rmse_type: i32) -> f32 {
    let n = x.len();
    let l_out = &mut l_out[..n];
    let (max, amax) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let mut iscale = -nmaxf / max;
    if rmse_type == 0 {
        for (l, &v) in l_out.iter_mut().zip(x) {
            let q = nearest_int(iscale * v);
            *l = (nmax + q.clamp(-nmax, nmax - 1)) as i8;
        }
        return 1.0 / iscale;
    }
    let (rmse_type, return_early) = if rmse_type < 0 { (-rmse_type, true) } else { (rmse_type, false) };
    let weight = |v: f32| match rmse_type {
        1 => v * v,
        2 => 1.0,
        3 => v.abs(),
        _ => v.abs().sqrt(),
    };
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (l_o, &v) in l_out.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *l_o = (l + nmax) as i8;
        let w = weight(v);
        let lf = l as f32;
        sumlx += w * v * lf;
        suml2 += w * lf * lf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    if return_early {
        return if suml2 > 0.0 { 0.5 * (scale + 1.0 / iscale) } else { 1.0 / iscale };
    }
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmaxf + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for &v in x {
            let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
            let w = weight(v);
            let lf = l as f32;
            sumlx += w * v * lf;
            suml2 += w * lf * lf;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (l_o, &v) in l_out.iter_mut().zip(x) {
                let l = nearest_int(iscale * v);
                *l_o = (nmax + l.clamp(-nmax, nmax - 1)) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants`: symmetric quantization to `L[i] ∈ [0, 2·nmax)` with, when `do_rmse`,
/// llama.cpp's coordinate-descent refinement weighted by x².
pub(crate) fn make_q3_quants(nmax: i32, x: &[f32], l_out: &mut [i8], do_rmse: bool) -> f32 {
    let n = x.len();
    let l_out = &mut l_out[..n];
    let (max, amax) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    if do_rmse {
        let mut sumlx = 0.0f32;
        let mut suml2 = 0.0f32;
        for (l_o, &v) in l_out.iter_mut().zip(x) {
            let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
            *l_o = l as i8;
            let w = v * v;
            let lf = l as f32;
            sumlx += w * v * lf;
            suml2 += w * lf * lf;
        }
        for _ in 0..5 {
            let mut n_changed = 0;
            for (l_o, &v) in l_out.iter_mut().zip(x) {
                let w = v * v;
                let li = *l_o as f32;
                let mut slx = sumlx - w * v * li;
                if slx > 0.0 {
                    let mut sl2 = suml2 - w * li * li;
                    let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                    if new_l != *l_o as i32 {
                        let nl = new_l as f32;
                        slx += w * v * nl;
                        sl2 += w * nl * nl;
                        if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                            *l_o = new_l as i8;
                            sumlx = slx;
                            suml2 = sl2;
                            n_changed += 1;
                        }
                    }
                }
            }
            if n_changed == 0 {
                break;
            }
        }
        for l in l_out.iter_mut() {
            *l += nmax as i8;
        }
        return if suml2 > 0.0 { sumlx / suml2 } else { 0.0 };
    }
    for (l_o, &v) in l_out.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *l_o = (l + nmax) as i8;
    }
    1.0 / iscale
}

/// `make_qkx2_quants`: asymmetric quantization `x ≈ scale·L − min` with `L ∈ [0, nmax]`,
/// searching `nstep + 1` scales around `nmax / (max − min)`; returns `(scale, min)` with the
/// min as a positive number (`*the_min`). `use_mad` weighs |error| instead of error².
#[allow(clippy::too_many_arguments)]
pub(crate) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l_out: &mut [u8],
    l_aux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let (weights, l_out, l_aux) = (&weights[..n], &mut l_out[..n], &mut l_aux[..n]);
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out.fill(0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let err = |d: f32| if use_mad { d.abs() } else { d * d };
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            l_aux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * l_aux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l_out.copy_from_slice(l_aux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K/Q5_K block (`get_scale_min_k4`).
#[inline(always)]
pub fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// All eight (scale, min) pairs of a Q4_K/Q5_K block at once, as llama.cpp's dot products
/// unpack them: four 32-bit mask-and-shift steps instead of eight [`get_scale_min_k4`] calls.
#[inline(always)]
pub(crate) fn scales_mins_k4(q: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let w = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (u0, u1, u2) = (w(0), w(1), w(2));
    let sc_hi = (u2 & LOW4) | (((u0 >> 6) & LOW2) << 4);
    let mn_hi = ((u2 >> 4) & LOW4) | (((u1 >> 6) & LOW2) << 4);
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    sc[..4].copy_from_slice(&(u0 & LOW6).to_le_bytes());
    sc[4..].copy_from_slice(&sc_hi.to_le_bytes());
    mn[..4].copy_from_slice(&(u1 & LOW6).to_le_bytes());
    mn[4..].copy_from_slice(&mn_hi.to_le_bytes());
    (sc, mn)
}

/// Packs the eight 6-bit scales and mins of a Q4_K/Q5_K block (the inverse of
/// [`get_scale_min_k4`], as `quantize_row_q4_K_ref` writes them).
pub(crate) fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..8 {
        let (ls, lm) = (ls[j], lm[j]);
        if j < 4 {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            s[j - 4] |= (ls >> 4) << 6;
            s[j] |= (lm >> 4) << 6;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-2.6), -3);
        assert_eq!(nearest_int(4_194_303.0), 4_194_303);
        // Outside the domain: some integer, no panic.
        let _ = (nearest_int(f32::NAN), nearest_int(f32::INFINITY), nearest_int(-1e30));
    }

    #[test]
    fn scale_min_packing_round_trips() {
        let ls = [0, 1, 63, 17, 32, 63, 5, 48];
        let lm = [63, 0, 2, 40, 63, 1, 33, 16];
        let s = pack_scale_min_k4(&ls, &lm);
        for j in 0..8 {
            assert_eq!(get_scale_min_k4(j, &s), (ls[j], lm[j]), "j = {j}");
        }
    }

    #[test]
    fn all_scales_and_mins_at_once_equal_get_scale_min_k4() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            let mut q = [0u8; 12];
            for b in q.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            let (sc, mn) = scales_mins_k4(&q);
            for j in 0..8 {
                assert_eq!((sc[j], mn[j]), get_scale_min_k4(j, &q), "{q:?} j={j}");
            }
        }
    }
}
