// C (m x n) = A (m x k) * B (k x n), all row-major f32.
// Tiled and register-blocked: a workgroup of 16 x 16 threads computes a 128 x 128 tile of C;
// each thread keeps an 8 x 8 block of outputs in 16 vec4 registers: rows ty*4..+3 and
// 64+ty*4..+3, columns tx*4..+3 and 64+tx*4..+3, so that its workgroup-memory reads are
// consecutive 16-byte words across the warp (no bank conflicts) and its stores coalesce.
// K advances 16 at a time through workgroup memory, A stored transposed (As[k][row], rows padded
// by one vec4 so that the transposing stores spread over the banks). The next tile's global
// loads are issued into registers before the current tile's arithmetic (software pipelining).
// Written out with named accumulators: no private array, nothing indexed at run time, so no
// driver moves the accumulators to local memory.

struct Meta {
    m: u32,
    k: u32,
    n: u32,
    u3: u32, u4: u32, u5: u32, u6: u32, u7: u32,
    p: array<vec4<f32>, 4>,
}

@group(0) @binding(0) var<uniform> prm: Meta;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

const TILE: u32 = 128u;
const BK: u32 = 16u;
// vec4 words per row of As (32 + 1 of padding) and of Bs.
const AS_ROW: u32 = 33u;
const BS_ROW: u32 = 32u;

var<workgroup> As: array<vec4<f32>, 528>; // BK rows of TILE floats (+ padding), As[k][row]
var<workgroup> Bs: array<vec4<f32>, 512>; // BK rows of TILE floats, Bs[k][col]

// Element l (0..8) of this thread's share of the A tile: 128 rows x 16 columns, consecutive
// threads on consecutive columns of a row (64-byte runs).
fn load_a(t: u32, l: u32, row0: u32, col0: u32, k0: u32) -> f32 {
    let idx = t + l * 256u;
    let gr = row0 + idx / BK;
    let gc = k0 + idx % BK;
    if (gr < prm.m && gc < prm.k) { return a[gr * prm.k + gc]; }
    return 0.0;
}

fn store_a(t: u32, l: u32, v: f32) {
    let idx = t + l * 256u;
    let r = idx / BK;
    As[(idx % BK) * AS_ROW + r / 4u][r % 4u] = v;
}

// Element l of this thread's share of the B tile: 16 rows x 128 columns.
fn load_b(t: u32, l: u32, row0: u32, col0: u32, k0: u32) -> f32 {
    let idx = t + l * 256u;
    let gr = k0 + idx / TILE;
    let gc = col0 + idx % TILE;
    if (gr < prm.k && gc < prm.n) { return b[gr * prm.n + gc]; }
    return 0.0;
}

fn store_b(t: u32, l: u32, v: f32) {
    let idx = t + l * 256u;
    let cc = idx % TILE;
    Bs[(idx / TILE) * BS_ROW + cc / 4u][cc % 4u] = v;
}

fn store4(r: u32, col: u32, v: vec4<f32>) {
    let base = r * prm.n;
    let n = prm.n;
    if (col + 0u < n) { c[base + col + 0u] = v.x; }
    if (col + 1u < n) { c[base + col + 1u] = v.y; }
    if (col + 2u < n) { c[base + col + 2u] = v.z; }
    if (col + 3u < n) { c[base + col + 3u] = v.w; }
}

fn store_row(r: u32, col: u32, va: vec4<f32>, vb: vec4<f32>) {
    if (r >= prm.m) { return; }
    store4(r, col, va);
    store4(r, col + 64u, vb);
}

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let k = prm.k;
    let tx = lid.x;
    let ty = lid.y;
    let t = ty * 16u + tx;
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    var acc0a = vec4<f32>(0.0);
    var acc0b = vec4<f32>(0.0);
    var acc1a = vec4<f32>(0.0);
    var acc1b = vec4<f32>(0.0);
    var acc2a = vec4<f32>(0.0);
    var acc2b = vec4<f32>(0.0);
    var acc3a = vec4<f32>(0.0);
    var acc3b = vec4<f32>(0.0);
    var acc4a = vec4<f32>(0.0);
    var acc4b = vec4<f32>(0.0);
    var acc5a = vec4<f32>(0.0);
    var acc5b = vec4<f32>(0.0);
    var acc6a = vec4<f32>(0.0);
    var acc6b = vec4<f32>(0.0);
    var acc7a = vec4<f32>(0.0);
    var acc7b = vec4<f32>(0.0);
    var k0 = 0u;
    var pa0 = vec4<f32>(load_a(t, 0u, row0, col0, k0), load_a(t, 1u, row0, col0, k0), load_a(t, 2u, row0, col0, k0), load_a(t, 3u, row0, col0, k0));
    var pa1 = vec4<f32>(load_a(t, 4u, row0, col0, k0), load_a(t, 5u, row0, col0, k0), load_a(t, 6u, row0, col0, k0), load_a(t, 7u, row0, col0, k0));
    var pb0 = vec4<f32>(load_b(t, 0u, row0, col0, k0), load_b(t, 1u, row0, col0, k0), load_b(t, 2u, row0, col0, k0), load_b(t, 3u, row0, col0, k0));
    var pb1 = vec4<f32>(load_b(t, 4u, row0, col0, k0), load_b(t, 5u, row0, col0, k0), load_b(t, 6u, row0, col0, k0), load_b(t, 7u, row0, col0, k0));

    loop {
        if (k0 >= k) { break; }
        store_a(t, 0u, pa0.x);
        store_a(t, 1u, pa0.y);
        store_a(t, 2u, pa0.z);
        store_a(t, 3u, pa0.w);
        store_a(t, 4u, pa1.x);
        store_a(t, 5u, pa1.y);
        store_a(t, 6u, pa1.z);
        store_a(t, 7u, pa1.w);
        store_b(t, 0u, pb0.x);
        store_b(t, 1u, pb0.y);
        store_b(t, 2u, pb0.z);
        store_b(t, 3u, pb0.w);
        store_b(t, 4u, pb1.x);
        store_b(t, 5u, pb1.y);
        store_b(t, 6u, pb1.z);
        store_b(t, 7u, pb1.w);
        workgroupBarrier();
        // Next tile's loads in flight during this tile's arithmetic (zeros past the end).
        k0 += BK;
        pa0 = vec4<f32>(load_a(t, 0u, row0, col0, k0), load_a(t, 1u, row0, col0, k0), load_a(t, 2u, row0, col0, k0), load_a(t, 3u, row0, col0, k0));
        pa1 = vec4<f32>(load_a(t, 4u, row0, col0, k0), load_a(t, 5u, row0, col0, k0), load_a(t, 6u, row0, col0, k0), load_a(t, 7u, row0, col0, k0));
        pb0 = vec4<f32>(load_b(t, 0u, row0, col0, k0), load_b(t, 1u, row0, col0, k0), load_b(t, 2u, row0, col0, k0), load_b(t, 3u, row0, col0, k0));
        pb1 = vec4<f32>(load_b(t, 4u, row0, col0, k0), load_b(t, 5u, row0, col0, k0), load_b(t, 6u, row0, col0, k0), load_b(t, 7u, row0, col0, k0));
        for (var kk = 0u; kk < BK; kk++) {
            let a0 = As[kk * AS_ROW + ty];
            let a1 = As[kk * AS_ROW + 16u + ty];
            let b0 = Bs[kk * BS_ROW + tx];
            let b1 = Bs[kk * BS_ROW + 16u + tx];
            acc0a = fma(vec4<f32>(a0.x), b0, acc0a);
            acc0b = fma(vec4<f32>(a0.x), b1, acc0b);
            acc1a = fma(vec4<f32>(a0.y), b0, acc1a);
            acc1b = fma(vec4<f32>(a0.y), b1, acc1b);
            acc2a = fma(vec4<f32>(a0.z), b0, acc2a);
            acc2b = fma(vec4<f32>(a0.z), b1, acc2b);
            acc3a = fma(vec4<f32>(a0.w), b0, acc3a);
            acc3b = fma(vec4<f32>(a0.w), b1, acc3b);
            acc4a = fma(vec4<f32>(a1.x), b0, acc4a);
            acc4b = fma(vec4<f32>(a1.x), b1, acc4b);
            acc5a = fma(vec4<f32>(a1.y), b0, acc5a);
            acc5b = fma(vec4<f32>(a1.y), b1, acc5b);
            acc6a = fma(vec4<f32>(a1.z), b0, acc6a);
            acc6b = fma(vec4<f32>(a1.z), b1, acc6b);
            acc7a = fma(vec4<f32>(a1.w), b0, acc7a);
            acc7b = fma(vec4<f32>(a1.w), b1, acc7b);
        }
        workgroupBarrier();
    }

    store_row(row0 + ty * 4u + 0u, col0 + tx * 4u, acc0a, acc0b);
    store_row(row0 + ty * 4u + 1u, col0 + tx * 4u, acc1a, acc1b);
    store_row(row0 + ty * 4u + 2u, col0 + tx * 4u, acc2a, acc2b);
    store_row(row0 + ty * 4u + 3u, col0 + tx * 4u, acc3a, acc3b);
    store_row(row0 + 64u + ty * 4u + 0u, col0 + tx * 4u, acc4a, acc4b);
    store_row(row0 + 64u + ty * 4u + 1u, col0 + tx * 4u, acc5a, acc5b);
    store_row(row0 + 64u + ty * 4u + 2u, col0 + tx * 4u, acc6a, acc6b);
    store_row(row0 + 64u + ty * 4u + 3u, col0 + tx * 4u, acc7a, acc7b);
}
