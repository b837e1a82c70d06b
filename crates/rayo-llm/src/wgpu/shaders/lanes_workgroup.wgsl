// No subgroups: the sum over a row's threads goes through workgroup memory.
const SG: bool = false;
fn lane_sum(v: f32) -> f32 {
    return v;
}
