// C (m x n) = A (m x k) * B (k x n), all row-major f32.
// Tiled and register-blocked: a workgroup of 16 x 16 threads computes a 128 x 128 tile of C;
// each thread holds an 8 x 8 block of outputs in registers, rows ty + 16 i and columns
// tx + 16 j (strided, so that workgroup-memory reads are conflict-free and stores coalesce).
// K advances 16 at a time through workgroup memory (A stored transposed: As[k][row]).

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

var<workgroup> As: array<f32, 2048>; // BK x TILE
var<workgroup> Bs: array<f32, 2048>; // BK x TILE

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

    var acc: array<array<f32, 8>, 8>;
    for (var i = 0u; i < 8u; i++) {
        for (var j = 0u; j < 8u; j++) {
            acc[i][j] = 0.0;
        }
    }
    var ar: array<f32, 8>;
    var br: array<f32, 8>;

    for (var k0 = 0u; k0 < k; k0 += BK) {
        // A tile: 128 rows x 16 columns, 8 elements per thread; consecutive threads read
        // consecutive columns of a row.
        for (var l = 0u; l < 8u; l++) {
            let idx = t + l * 256u;
            let r = idx / BK;
            let cc = idx % BK;
            let gr = row0 + r;
            let gc = k0 + cc;
            var v = 0.0;
            if (gr < m && gc < k) { v = a[gr * k + gc]; }
            As[cc * TILE + r] = v;
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
            Bs[r * TILE + cc] = v;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            for (var i = 0u; i < 8u; i++) {
                ar[i] = As[kk * TILE + ty + 16u * i];
            }
            for (var j = 0u; j < 8u; j++) {
                br[j] = Bs[kk * TILE + tx + 16u * j];
            }
            for (var i = 0u; i < 8u; i++) {
                for (var j = 0u; j < 8u; j++) {
                    acc[i][j] = fma(ar[i], br[j], acc[i][j]);
                }
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < 8u; i++) {
        let r = row0 + ty + 16u * i;
        if (r < m) {
            for (var j = 0u; j < 8u; j++) {
                let cc = col0 + tx + 16u * j;
                if (cc < n) {
                    c[r * n + cc] = acc[i][j];
                }
            }
        }
    }
}
