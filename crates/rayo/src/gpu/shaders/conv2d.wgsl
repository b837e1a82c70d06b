// "Valid" 2-D convolution (cross-correlation, as in the CPU Matrix::convolve2d):
// out[y][x] = sum_{i<kh, j<kw} image[y + i][x + j] * kernel[i][j],
// out is (h - kh + 1) x (w - kw + 1). One thread per output element.

struct Meta {
    h: u32,
    w: u32,
    kh: u32,
    kw: u32,
    oh: u32,
    ow: u32,
    u6: u32, u7: u32,
    p: array<vec4<f32>, 4>,
}

@group(0) @binding(0) var<uniform> prm: Meta;
@group(0) @binding(1) var<storage, read> image: array<f32>;
@group(0) @binding(2) var<storage, read> kern: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let x = gid.x;
    let y = gid.y;
    if (x >= prm.ow || y >= prm.oh) { return; }
    var acc = 0.0;
    for (var i = 0u; i < prm.kh; i++) {
        let row = (y + i) * prm.w + x;
        for (var j = 0u; j < prm.kw; j++) {
            acc = fma(image[row + j], kern[i * prm.kw + j], acc);
        }
    }
    out[y * prm.ow + x] = acc;
}
