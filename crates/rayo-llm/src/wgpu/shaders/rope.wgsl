// Rotates the first n_rot values of every head of q (n_head heads) and k (n_head_kv heads) for
// m rows at positions pos0.. by the host's (cos, sin) table; pairs (2j, 2j+1) (style 0) or
// (j, j + n_rot/2) (style 1). One thread per pair.
struct P {
    m: u32,
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_rot: u32,
    pos0: u32,
    style: u32,
    stride: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;
@group(0) @binding(2) var<storage, read_write> k: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let g = gid.x + gid.y * p.stride;
    let half = p.n_rot / 2u;
    let heads = p.n_head + p.n_head_kv;
    if (g >= p.m * heads * half) {
        return;
    }
    let j = g % half;
    let hh = (g / half) % heads;
    let i = g / (half * heads);
    let t = (p.pos0 + i) * p.n_rot + 2u * j;
    let c = table[t];
    let s = table[t + 1u];
    var a = 2u * j;
    var b = 2u * j + 1u;
    if (p.style == 1u) {
        a = j;
        b = j + half;
    }
    if (hh < p.n_head) {
        let base = (i * p.n_head + hh) * p.head_dim;
        let x0 = q[base + a];
        let x1 = q[base + b];
        q[base + a] = x0 * c - x1 * s;
        q[base + b] = x0 * s + x1 * c;
    } else {
        let base = (i * p.n_head_kv + hh - p.n_head) * p.head_dim;
        let x0 = k[base + a];
        let x1 = k[base + b];
        k[base + a] = x0 * c - x1 * s;
        k[base + b] = x0 * s + x1 * c;
    }
}
