// C (m x n) = A (m x k) * B (k x n), all row-major f32.
// Tiled and register-blocked: a workgroup of 16 x 16 threads computes a 128 x 128 tile of C;
// each thread keeps an 8 x 8 block of outputs in 16 vec4 registers (rows ty*8.., columns
// tx*8..). K advances 16 at a time through workgroup memory, A stored transposed (As[k][row])
// so that each thread reads its 8 A values and 8 B values as two vec4 each per k step.
// Written out by hand with named accumulators: no private array, nothing indexed at run time,
// so no driver can move the accumulators to local memory.

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

var<workgroup> As: array<vec4<f32>, 512>; // BK x TILE floats, As[k][row]
var<workgroup> Bs: array<vec4<f32>, 512>; // BK x TILE floats, Bs[k][col]

fn store_row(r: u32, col: u32, va: vec4<f32>, vb: vec4<f32>) {
    if (r >= prm.m) { return; }
    let base = r * prm.n;
    let n = prm.n;
    if (col + 0u < n) { c[base + col + 0u] = va.x; }
    if (col + 1u < n) { c[base + col + 1u] = va.y; }
    if (col + 2u < n) { c[base + col + 2u] = va.z; }
    if (col + 3u < n) { c[base + col + 3u] = va.w; }
    if (col + 4u < n) { c[base + col + 4u] = vb.x; }
    if (col + 5u < n) { c[base + col + 5u] = vb.y; }
    if (col + 6u < n) { c[base + col + 6u] = vb.z; }
    if (col + 7u < n) { c[base + col + 7u] = vb.w; }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let m = prm.m;
    let k = prm.k;
    let n = prm.n;
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

    for (var k0 = 0u; k0 < k; k0 += BK) {
        // A tile: 128 rows x 16 columns, 8 elements per thread, 16 consecutive per row.
        for (var l = 0u; l < 8u; l++) {
            let idx = t + l * 256u;
            let r = idx / BK;
            let cc = idx % BK;
            let gr = row0 + r;
            let gc = k0 + cc;
            var v = 0.0;
            if (gr < m && gc < k) { v = a[gr * k + gc]; }
            As[cc * 32u + r / 4u][r % 4u] = v;
        }
        // B tile: 16 rows x 128 columns.
        for (var l = 0u; l < 8u; l++) {
            let idx = t + l * 256u;
            let r = idx / TILE;
            let cc = idx % TILE;
            let gr = k0 + r;
            let gc = col0 + cc;
            var v = 0.0;
            if (gr < k && gc < n) { v = b[gr * n + gc]; }
            Bs[r * 32u + cc / 4u][cc % 4u] = v;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let a0 = As[kk * 32u + ty * 2u];
            let a1 = As[kk * 32u + ty * 2u + 1u];
            let b0 = Bs[kk * 32u + tx * 2u];
            let b1 = Bs[kk * 32u + tx * 2u + 1u];
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

    let col = col0 + tx * 8u;
    store_row(row0 + ty * 8u + 0u, col, acc0a, acc0b);
    store_row(row0 + ty * 8u + 1u, col, acc1a, acc1b);
    store_row(row0 + ty * 8u + 2u, col, acc2a, acc2b);
    store_row(row0 + ty * 8u + 3u, col, acc3a, acc3b);
    store_row(row0 + ty * 8u + 4u, col, acc4a, acc4b);
    store_row(row0 + ty * 8u + 5u, col, acc5a, acc5b);
    store_row(row0 + ty * 8u + 6u, col, acc6a, acc6b);
    store_row(row0 + ty * 8u + 7u, col, acc7a, acc7b);
}
