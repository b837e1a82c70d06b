// Activation values as they are (no norm).
fn xin4(t: u32, e: u32, c: u32) -> vec4<f32> {
    return x[e >> 2u];
}
fn xin1(t: u32, e: u32, c: u32) -> f32 {
    return x[e >> 2u][e & 3u];
}
