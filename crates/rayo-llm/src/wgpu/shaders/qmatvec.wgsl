// y[i][row0 + r] (+)= Σ_c W[r][c]·x[i][c]: one weight matrix (or one part of it, rows row0..)
// in its GGUF blocks, MT activation rows per workgroup (1 for a decoding step, 4 or 8 for a
// prompt). LANES threads per weight row take its sub-blocks in turn (one scale and min each),
// then reduce: by subgroup shuffles where the device has subgroups of at least LANES (SG), else
// in workgroup memory; with LANES = 1 (CPU adapters: lavapipe, SwiftShader, whose barriers are
// dear) each thread takes a whole row. The format's QK, BB, SUB, scale_min, quant and quant4, MT, LANES,
// SG and lane_sum come before this text.
struct P {
    rows: u32,
    cols: u32,
    m: u32,
    out_stride: u32,
    row0: u32,
    add: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> w: array<u32>;
// the activations as vec4 (rows of a multiple of 4 values where SUB is; buffers padded to 16 bytes)
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const RPW: u32 = 64u / LANES;
var<workgroup> red: array<f32, 64 * MT>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = (wid.x + wid.y * nwg.x) * RPW + li / LANES;
    let lane = li % LANES;
    let i0 = wid.z * MT;
    var acc = array<f32, MT>();
    if (r < p.rows) {
        let units = p.cols / SUB;
        let row_bytes = (p.cols / QK) * BB;
        for (var u = lane; u < units; u += LANES) {
            let b = r * row_bytes + (u / (QK / SUB)) * BB;
            let s = u % (QK / SUB);
            let sm = scale_min(b, s);
            let c0 = u * SUB;
            var qa = array<f32, MT>();
            var xa = array<f32, MT>();
            if (SUB % 4u == 0u) {
                // four values per load of the weights and of the activations
                for (var j = 0u; j < SUB; j += 4u) {
                    let q = quant4(b, s * SUB + j);
                    for (var t = 0u; t < MT; t++) {
                        if (i0 + t < p.m) {
                            let xv = x[((i0 + t) * p.cols + c0 + j) >> 2u];
                            qa[t] += dot(q, xv);
                            xa[t] += xv.x + xv.y + xv.z + xv.w;
                        }
                    }
                }
            } else {
                for (var j = 0u; j < SUB; j++) {
                    let q = quant(b, s * SUB + j);
                    for (var t = 0u; t < MT; t++) {
                        if (i0 + t < p.m) {
                            let e = (i0 + t) * p.cols + c0 + j;
                            let xv = x[e >> 2u][e & 3u];
                            qa[t] += q * xv;
                            xa[t] += xv;
                        }
                    }
                }
            }
            for (var t = 0u; t < MT; t++) {
                acc[t] += sm.x * qa[t] + sm.y * xa[t];
            }
        }
    }
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
    }
    if (lane == 0u && r < p.rows) {
        for (var t = 0u; t < MT; t++) {
            let i = i0 + t;
            if (i < p.m) {
                let o = i * p.out_stride + p.row0 + r;
                var v = acc[t];
                if (p.add != 0u) {
                    v += y[o];
                }
                y[o] = v;
            }
        }
    }
}
