// Greedy sampling where the logits are: the first maximum of x[0..n] and the first NaN or +inf
// (the sampler's checks). One workgroup; thread t scans t, t + 256, ...; thread 0 combines in
// thread order. out: [index (0 if none), max bits (-inf if none), first bad index (0xffffffff if
// none), its bits]. NaN and +inf are told by their bits (no float compare a compiler may fold).
struct P {
    n: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const NONE: u32 = 0xffffffffu;
var<workgroup> wi: array<u32, 256>;
var<workgroup> wm: array<f32, 256>;
var<workgroup> wb: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
    var best = NONE;
    var mx = 0.0;
    var bad = NONE;
    for (var i = li; i < p.n; i += 256u) {
        let v = x[i];
        let b = bitcast<u32>(v);
        if ((b & 0x7fffffffu) > 0x7f800000u || b == 0x7f800000u) {
            bad = min(bad, i);
        } else if (best == NONE || v > mx) {
            best = i;
            mx = v;
        }
    }
    wi[li] = best;
    wm[li] = mx;
    wb[li] = bad;
    workgroupBarrier();
    if (li == 0u) {
        var bi = NONE;
        var bm = 0.0;
        var bb = NONE;
        for (var t = 0u; t < 256u; t++) {
            let i = wi[t];
            if (i != NONE && (bi == NONE || wm[t] > bm || (wm[t] == bm && i < bi))) {
                bi = i;
                bm = wm[t];
            }
            bb = min(bb, wb[t]);
        }
        if (bi == NONE) {
            out[0] = 0u;
            out[1] = 0xff800000u;
        } else {
            out[0] = bi;
            out[1] = bitcast<u32>(bm);
        }
        out[2] = bb;
        out[3] = 0u;
        if (bb != NONE) {
            out[3] = bitcast<u32>(x[bb]);
        }
    }
}
