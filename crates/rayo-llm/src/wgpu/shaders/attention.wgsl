// Causal grouped-query attention of query row i (position pos0 + i), head h, over the cache's
// positions 0..=pos0 + i (the last `window` of them where window > 0: a local layer's sliding
// window): one workgroup of 64 threads. Positions are taken 64 at a time (one
// score per thread), folded into a running max, sum and weighted sum of the values (each
// thread owns dimensions t, t + 64, ...: head_dim ≤ 256). The cache's type and the scores
// (score_f32 / score_f16: q·k in f32 or f16 math) come before.
struct P {
    head_dim: u32,
    n_head: u32,
    group: u32,
    kv_width: u32,
    pos0: u32,
    scale: f32,
    round_q: u32,
    window: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> qs: array<f32, 256>;
var<workgroup> sc: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let h = wid.x;
    let i = wid.y;
    let hd = p.head_dim;
    let qbase = (i * p.n_head + h) * hd;
    let kvoff = (h / p.group) * hd;
    for (var d = t; d < hd; d += 64u) {
        var v = q[qbase + d];
        if (p.round_q != 0u) {
            v = unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
        }
        qs[d] = v;
    }
    workgroupBarrier();
    prepare_q(t, hd);
    workgroupBarrier();
    let n = p.pos0 + i + 1u;
    var mx = -3.4028234663852886e38;
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    var lo = 0u;
    if (p.window != 0u && n > p.window) {
        lo = n - p.window;
    }
    for (var c0 = lo; c0 < n; c0 += 64u) {
        let pos = c0 + t;
        var s = -3.4028234663852886e38;
        if (pos < n) {
            s = score(pos * p.kv_width + kvoff, hd) * p.scale;
        }
        sc[t] = s;
        workgroupBarrier();
        let cnt = min(64u, n - c0);
        var cm = mx;
        for (var j = 0u; j < cnt; j++) {
            cm = max(cm, sc[j]);
        }
        let corr = exp(mx - cm);
        l *= corr;
        for (var e = 0u; e < 4u; e++) {
            acc[e] *= corr;
        }
        for (var j = 0u; j < cnt; j++) {
            let pj = exp(sc[j] - cm);
            l += pj;
            let vb = (c0 + j) * p.kv_width + kvoff;
            for (var e = 0u; e < 4u; e++) {
                let d = t + 64u * e;
                if (d < hd) {
                    acc[e] += pj * v_get(vb + d);
                }
            }
        }
        mx = cm;
        workgroupBarrier();
    }
    let obase = (i * p.n_head + h) * hd;
    for (var e = 0u; e < 4u; e++) {
        let d = t + 64u * e;
        if (d < hd) {
            out[obase + d] = acc[e] / l;
        }
    }
}
