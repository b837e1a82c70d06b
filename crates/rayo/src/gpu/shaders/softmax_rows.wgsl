// Softmax / log_softmax of each row of a row-major rows × cols matrix: one workgroup per row
// (row = wid.x + wid.y * nwg.x), three passes over the row (max, Σ exp(x - max), write).
// A row holding a NaN, or whose maximum is infinite, becomes all NaN (prm.p[0].x holds a NaN,
// as the CPU does). prm.log == 1 selects log_softmax.

struct Meta {
    rows: u32,
    cols: u32,
    log: u32,
    u3: u32, u4: u32, u5: u32, u6: u32, u7: u32,
    p: array<vec4<f32>, 4>,
}

@group(0) @binding(0) var<uniform> prm: Meta;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> sdata: array<f32, 256>;

fn nan_s(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
fn max_s(a: f32, b: f32) -> f32 { return select(select(max(a, b), b, nan_s(b)), a, nan_s(a)); }
// NaN or ±inf.
fn nonfinite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u; }

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= prm.rows) { return; }
    let n = prm.cols;
    let base = row * n;
    var m = x[base];
    for (var j = lid.x; j < n; j = j + 256u) {
        m = max_s(m, x[base + j]);
    }
    sdata[lid.x] = m;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid.x < s) {
            sdata[lid.x] = max_s(sdata[lid.x], sdata[lid.x + s]);
        }
        workgroupBarrier();
    }
    let rm = sdata[0];
    workgroupBarrier();
    var acc = 0.0;
    for (var j = lid.x; j < n; j = j + 256u) {
        acc = acc + exp(x[base + j] - rm);
    }
    sdata[lid.x] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid.x < s) {
            sdata[lid.x] = sdata[lid.x] + sdata[lid.x + s];
        }
        workgroupBarrier();
    }
    let se = sdata[0];
    let lse = log(se);
    let bad = nonfinite(rm);
    for (var j = lid.x; j < n; j = j + 256u) {
        let d = x[base + j] - rm;
        var v: f32;
        if (prm.log == 1u) {
            v = d - lse;
        } else {
            v = exp(d) / se;
        }
        out[base + j] = select(v, prm.p[0].x, bad);
    }
}
