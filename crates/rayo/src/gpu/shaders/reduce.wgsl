// One stage of a tiled reduction. Each workgroup folds a grid-strided share of the input into
// one value per thread, then a tree in workgroup memory folds the 256 values into one partial.
// The host runs further stages over the partials until one value is left.
// Placeholders filled in by gpu/kernels.rs (upper case): the load of element i, the combining
// function on T and on f32 (for the workgroup tree), the accumulator's start (max and min start
// from element 0) and extra bindings.

// T is f32, or vec4<f32> for a first stage over a length divisible by 4 (16-byte loads).
alias T = TYPE;

struct Meta {
    n: u32,
    out_offset: u32,
    u2: u32, u3: u32, u4: u32, u5: u32, u6: u32, u7: u32,
    p: array<vec4<f32>, 4>,
}

@group(0) @binding(0) var<uniform> prm: Meta;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
EXTRA

var<workgroup> sdata: array<f32, 256>;

// NaN tests on the bits (a driver may fold `x != x` away) and NaN-propagating max/min: a NaN
// operand wins, as in PyTorch (WGSL's max/min may return the other operand).
fn nan_s(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
fn nan_v(v: vec4<f32>) -> vec4<bool> { return (bitcast<vec4<u32>>(v) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u); }
fn max_s(a: f32, b: f32) -> f32 { return select(select(max(a, b), b, nan_s(b)), a, nan_s(a)); }
fn min_s(a: f32, b: f32) -> f32 { return select(select(min(a, b), b, nan_s(b)), a, nan_s(a)); }
fn max_v(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return select(select(max(a, b), b, nan_v(b)), a, nan_v(a)); }
fn min_v(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return select(select(min(a, b), b, nan_v(b)), a, nan_v(a)); }

// Folds the lanes of one accumulator into one value.
fn horiz(v: T) -> f32 {
    HORIZ_BODY
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = prm.n;
    let stride = nwg.x * 256u;
    var i = wid.x * 256u + lid.x;
    var a0: T = INIT;
    var a1: T = a0;
    var a2: T = a0;
    var a3: T = a0;
    // Four accumulators: four independent loads in flight per thread.
    loop {
        if (i + 3u * stride >= n) { break; }
        a0 = COMBINE(a0, LOAD(i));
        a1 = COMBINE(a1, LOAD(i + stride));
        a2 = COMBINE(a2, LOAD(i + 2u * stride));
        a3 = COMBINE(a3, LOAD(i + 3u * stride));
        i = i + 4u * stride;
    }
    loop {
        if (i >= n) { break; }
        a0 = COMBINE(a0, LOAD(i));
        i = i + stride;
    }
    sdata[lid.x] = horiz(COMBINE(COMBINE(a0, a1), COMBINE(a2, a3)));
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid.x < s) {
            sdata[lid.x] = COMBINE_S(sdata[lid.x], sdata[lid.x + s]);
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        out[prm.out_offset + wid.x] = sdata[0];
    }
}
