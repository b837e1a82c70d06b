// One weight matrix (its names get a suffix per weight): the part of row r's dot products with
// activation rows i0.. that this lane takes (its sub-blocks in turn, one scale and min each).
@group(0) @binding(WB) var<storage, read> w: array<u32>;
fn row_dot(r: u32, rows: u32, lane: u32, i0: u32) -> array<f32, MT> {
    var acc = array<f32, MT>();
    if (r >= rows) {
        return acc;
    }
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
                        let xv = xin4(t, (i0 + t) * p.cols + c0 + j, c0 + j);
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
                        let xv = xin1(t, (i0 + t) * p.cols + c0 + j, c0 + j);
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
    return acc;
}
