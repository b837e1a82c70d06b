// Activation values normalized as they are loaded: x·(1/rms)·g, in rms_norm.wgsl's order.
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
fn xin4(t: u32, e: u32, c: u32) -> vec4<f32> {
    return x[e >> 2u] * inv[t] * g[c >> 2u];
}
fn xin1(t: u32, e: u32, c: u32) -> f32 {
    return x[e >> 2u][e & 3u] * inv[t] * g[c >> 2u][c & 3u];
}
