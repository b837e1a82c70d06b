// The sum over the LANES threads of a weight row, by subgroup shuffles (they lie in one
// subgroup: LANES is at most the device's smallest subgroup, and divides it).
const SG: bool = true;
fn lane_sum(v: f32) -> f32 {
    var s = v;
    for (var off = LANES / 2u; off > 0u; off >>= 1u) {
        s += subgroupShuffleXor(s, off);
    }
    return s;
}
