// Last step of norm_l2: out[off] holds Σ (x/s)² and s[0] = max |x|; the norm is s·√(Σ (x/s)²).
// A NaN, infinite or zero s is the answer itself (NaN in, NaN out; inf; an all-zero input).

struct Meta {
    off: u32,
    u1: u32, u2: u32, u3: u32, u4: u32, u5: u32, u6: u32, u7: u32,
    p: array<vec4<f32>, 4>,
}

@group(0) @binding(0) var<uniform> prm: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> s: array<f32>;

// NaN or ±inf.
fn nonfinite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u; }

@compute @workgroup_size(1)
fn main() {
    let m = s[0];
    let ss = out[prm.off];
    out[prm.off] = select(sqrt(ss) * m, m, nonfinite(m) || m == 0.0);
}
