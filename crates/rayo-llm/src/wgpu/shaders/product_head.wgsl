// The quantized products y = n(x)·Wᵀ of one to three weight matrices (each in its GGUF blocks)
// in one dispatch: MT activation rows per workgroup (1 for a decoding step, 4 or 8 for a
// prompt), 64 / LANES weight rows per workgroup. n(x) is x, or RMSNorm(x)·g where NORM (each
// workgroup finds its rows' 1/rms itself: d values, cheap next to a weight row per thread).
// Before this text: MT, LANES, NORM, SG and lane_sum; after it, each weight's format and
// row_dot (names suffixed _a, _b, _c), then the outputs and main (product_main.wgsl).
struct P {
    cols: u32,
    m: u32,
    add: u32,
    eps: f32,
    rows_a: u32,
    rows_b: u32,
    rows_c: u32,
    groups_a: u32,
    groups_b: u32,
    out_stride_a: u32,
    row0_a: u32,
}
@group(0) @binding(0) var<uniform> p: P;
// the activations as vec4 (rows of a multiple of 4 values where SUB is; buffers padded to 16 bytes)
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;

const RPW: u32 = 64u / LANES;
var<workgroup> red: array<f32, 64 * MT>;
// 1 / rms of the workgroup's activation rows (NORM)
var<private> inv: array<f32, MT>;

// inv[t] for rows i0 + t: 64 partial sums of squares per row, summed in order by every thread
// (rms_norm.wgsl sums the same way: the fused and separate norms give the same bits).
fn norm_rows(li: u32, i0: u32) {
    for (var t = 0u; t < MT; t++) {
        var ss = 0.0;
        if (i0 + t < p.m) {
            let base = (i0 + t) * p.cols;
            for (var c = li; c < p.cols; c += 64u) {
                let e = base + c;
                let v = x[e >> 2u][e & 3u];
                ss += v * v;
            }
        }
        red[li * MT + t] = ss;
    }
    workgroupBarrier();
    for (var t = 0u; t < MT; t++) {
        var s = 0.0;
        for (var j = 0u; j < 64u; j++) {
            s += red[j * MT + t];
        }
        inv[t] = 1.0 / sqrt(s / f32(p.cols) + p.eps);
    }
    // red is the lanes' reduction space next
    workgroupBarrier();
}

// The sum over a weight row's LANES threads (lane 0 holds it).
fn reduce(a: array<f32, MT>, li: u32, lane: u32) -> array<f32, MT> {
    var acc = a;
    if (LANES > 1u && SG) {
        for (var t = 0u; t < MT; t++) {
            acc[t] = lane_sum(acc[t]);
        }
    } else if (LANES > 1u) {
        for (var t = 0u; t < MT; t++) {
            red[li * MT + t] = acc[t];
        }
        workgroupBarrier();
        for (var off = LANES / 2u; off > 0u; off >>= 1u) {
            if (lane < off) {
                for (var t = 0u; t < MT; t++) {
                    red[li * MT + t] += red[(li + off) * MT + t];
                }
            }
            workgroupBarrier();
        }
        for (var t = 0u; t < MT; t++) {
            acc[t] = red[li * MT + t];
        }
        workgroupBarrier();
    }
    return acc;
}
