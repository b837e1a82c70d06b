// out[t][c] = W[ids[t]][c] for the tokens whose row lies in this part of the table (rows
// row0..row0 + rows). The format's QK, BB, SUB, scale_min and quant come before this text.
struct P {
    cols: u32,
    n: u32,
    row0: u32,
    rows: u32,
    stride: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let g = gid.x + gid.y * p.stride;
    if (g >= p.n * p.cols) {
        return;
    }
    let t = g / p.cols;
    let c = g % p.cols;
    let id = ids[t];
    if (id < p.row0 || id >= p.row0 + p.rows) {
        return;
    }
    let b = (id - p.row0) * ((p.cols / QK) * BB) + (c / QK) * BB;
    let j = c % QK;
    let sm = scale_min(b, j / SUB);
    out[g] = sm.x * quant(b, j) + sm.y;
}
