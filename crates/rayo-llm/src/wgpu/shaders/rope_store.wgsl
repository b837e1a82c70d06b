// RoPE and the KV store of m rows at positions pos0.. in one dispatch: the first m·n_head·n_rot/2
// threads rotate one pair of q each, in place; the next m·kv_width/2 write one pair of values of
// k (rotated as it is read: k itself is left as it was) and of v into the layer's cache. Pairs
// (2j, 2j+1) (style 0) or (j, j + n_rot/2) (style 1), by the host's (cos, sin) table. The cache's
// type (kv_f16 / kv_f32, bindings 3 and 4) comes before.
struct P {
    m: u32,
    n_head: u32,
    head_dim: u32,
    n_rot: u32,
    pos0: u32,
    style: u32,
    stride: u32,
    kv_width: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(5) var<storage, read> v: array<f32>;
@group(0) @binding(6) var<storage, read> table: array<f32>;

// Value idx of k (rows of kv_width), rotated: x·c − y·s for a pair's first, y·s + x·c for its
// second (y its partner), as the rotation of q below.
fn k_rot(idx: u32) -> f32 {
    let i = idx / p.kv_width;
    let e = (idx % p.kv_width) % p.head_dim;
    let x = k[idx];
    if (e >= p.n_rot) {
        return x;
    }
    let half = p.n_rot / 2u;
    var j = e / 2u;
    var first = (e & 1u) == 0u;
    var partner = e ^ 1u;
    if (p.style == 1u) {
        j = e % half;
        first = e < half;
        partner = select(e - half, e + half, first);
    }
    let t = (p.pos0 + i) * p.n_rot + 2u * j;
    let c = table[t];
    let s = table[t + 1u];
    let y = k[idx - e + partner];
    if (first) {
        return x * c - y * s;
    }
    return y * s + x * c;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let g = gid.x + gid.y * p.stride;
    let half = p.n_rot / 2u;
    let nq = p.m * p.n_head * half;
    if (g < nq) {
        let j = g % half;
        let hh = (g / half) % p.n_head;
        let i = g / (half * p.n_head);
        let t = (p.pos0 + i) * p.n_rot + 2u * j;
        let c = table[t];
        let s = table[t + 1u];
        var a = 2u * j;
        var b = 2u * j + 1u;
        if (p.style == 1u) {
            a = j;
            b = j + half;
        }
        let base = (i * p.n_head + hh) * p.head_dim;
        let x0 = q[base + a];
        let x1 = q[base + b];
        q[base + a] = x0 * c - x1 * s;
        q[base + b] = x0 * s + x1 * c;
        return;
    }
    let g2 = g - nq;
    if (g2 >= p.m * p.kv_width / 2u) {
        return;
    }
    let pair = p.pos0 * p.kv_width / 2u + g2;
    k_put2(pair, k_rot(2u * g2), k_rot(2u * g2 + 1u));
    v_put2(pair, v[2u * g2], v[2u * g2 + 1u]);
}
