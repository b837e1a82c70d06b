"""How large a `rayo synth` file's feed-forward activations get: dequantizes layer 0's gate and
up matrices (gguf-py from the vendored llama.cpp tree; numpy) and prints the largest
|gate| and |silu(gate)·up| for an RMS-normalized random input and for the coherent worst case
(all ones), against f16's largest value (65504), which the tensor-core paths round to.

usage: python docs/perf/issue28-synth-range.py FILE.gguf   (a venv with numpy and pyyaml)
Measured on the Llama-3.2-1B Q4_K shape: before the synth's weights averaged zero, mean 0.82
and a coherent |silu(gate)·up| of 5,376,141 (NaN on CUDA's tensor-core prefill); after, mean
0.0000 and 1,281 (Q4_K), 5,304 (Q5_K), 2,189 (Q6_K), 1,271 (Q8_0).
"""
import sys

import numpy as np

sys.path.insert(0, ".cache/llama.cpp/src/vendor/llama.cpp/gguf-py")
from gguf import GGUFReader  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

r = GGUFReader(sys.argv[1])
t = {x.name: x for x in r.tensors}


def weight(name):
    x = t[name]
    return dequantize(x.data, x.tensor_type).reshape(-1, int(x.shape[0]))


g, u = weight("blk.0.ffn_gate.weight"), weight("blk.0.ffn_up.weight")
print("weights: mean %.4f std %.4f" % (g.mean(), g.std()))
rng = np.random.default_rng(0)
for what, x in [("random", rng.standard_normal(g.shape[1])), ("coherent (all ones)", np.ones(g.shape[1]))]:
    x = x / np.sqrt((x * x).mean())
    a, b = g @ x, u @ x
    with np.errstate(over="ignore"):
        h = a / (1 + np.exp(-a)) * b
    print(f"{what}: |gate| max {abs(a).max():.0f}, |silu(gate)*up| max {abs(h).max():.0f} (f16 max 65504)")
