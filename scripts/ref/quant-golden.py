#!/usr/bin/env python3
"""Golden vectors for rayo's quantized formats, written to crates/rayo/tests/data/quant/.

    scripts/ref/quant-golden.py            # creates .venv-gguf (gguf==0.19.0, numpy) once

Two kinds of line, in one text file per type (`<TYPE>.txt`, hex of little-endian bytes):

    dequant <block bytes> <the block's values as f32 bytes>
    quant <bytes of the 256 values of line i of inputs.txt, quantized>

Where the values come from:
- dequant: `gguf.quants.dequantize` (the `gguf` PyPI package's numpy reference) for every type
  it has. It lacks Q8_1 and Q8_K: those are computed here in numpy by ggml's layout (`d·q` in
  f32, `d` f16 for Q8_1 — its `s` is not a value — and f32 for Q8_K). F16 is numpy's astype.
  Blocks: a few random ones (random bytes, finite random scales) and hand-chosen edge blocks
  (scales 0, −0, negative, ±65504, subnormal, ±inf, NaN; all-zero and all-one bits).
- quant: `gguf.quants.quantize` for Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 BF16 (and numpy's astype for
  F16); llama.cpp's own `quantize_row_*_ref` (ctypes on libggml-base.so from
  scripts/ref/llama-cpp.sh, or $GGML_BASE_LIB) for Q8_1, Q2_K..Q6_K and Q8_K, which the
  package does not implement. The legacy formats are also run through llama.cpp and the
  script fails if numpy and C disagree.
Inputs (inputs.txt): 32 blocks of 256 f32 from a fixed seed, in several distributions, plus
edge blocks (zeros, constants, tiny values, one spike). No NaN/inf: ggml gives no meaning to
those (rayo only promises not to panic on them).
"""
import ctypes
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RAYO_GGUF_VENV", ROOT / ".venv-gguf"))
OUT = ROOT / "crates/rayo/tests/data/quant"


def ensure_venv():
    """Re-runs this script under the venv with gguf==0.19.0 (creating it once)."""
    py = VENV / "bin/python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not py.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    ok = subprocess.run([str(py), "-c", "import gguf, numpy; from importlib.metadata import version; assert version('gguf') == '0.19.0'"], capture_output=True).returncode == 0
    if not ok:
        subprocess.check_call([str(py), "-m", "pip", "install", "-q", "gguf==0.19.0", "numpy"])
    os.execv(str(py), [str(py), __file__, *sys.argv[1:]])


ensure_venv()

import numpy as np  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T  # noqa: E402
from gguf import quants  # noqa: E402

TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"]
# Byte offsets of the f16 scale fields (d, then m/dmin/s) in each block.
F16_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q8_1": [0, 2], "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}
# gguf 0.19.0's GGML_QUANT_SIZES still says 40 bytes for Q8_1 (its old f32 d and s); ggml's
# block_q8_1 is a half2 (d, s) and 32 i8: 36 bytes.
SIZES = {**{t: GGML_QUANT_SIZES[T[t]] for t in TYPES if t not in ("Q8_1", "Q8_K")}, "Q8_1": (32, 36), "Q8_K": (256, 292)}
C_QUANT = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"}
NUMPY_QUANT = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16"}

rng = np.random.default_rng(20261124)


def ggml_lib():
    path = os.environ.get("GGML_BASE_LIB")
    if not path:
        bindir = subprocess.check_output([str(ROOT / "scripts/ref/llama-cpp.sh")], text=True).strip().splitlines()[-1]
        path = str(Path(bindir) / "libggml-base.so")
    return ctypes.CDLL(path)


def c_quantize(lib, t, x):
    bs, ts = SIZES[t]
    out = np.zeros(len(x) // bs * ts, dtype=np.uint8)
    f = getattr(lib, f"quantize_row_{t.lower().replace('_k', '_K')}_ref")
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    f.restype = None
    x = np.ascontiguousarray(x, dtype=np.float32)
    f(x.ctypes.data, out.ctypes.data, len(x))
    return out


def dequant_ref(t, raw):
    """Values of the blocks in `raw` (uint8), by the numpy reference (or by layout)."""
    if t == "Q8_1":
        b = raw.reshape(-1, 36)
        d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
        return (d * b[:, 4:].copy().view(np.int8).astype(np.float32)).reshape(-1)
    if t == "Q8_K":
        b = raw.reshape(-1, 292)
        d = b[:, 0:4].copy().view(np.float32)
        return (d * b[:, 4:260].copy().view(np.int8).astype(np.float32)).reshape(-1)
    return np.asarray(quants.dequantize(raw, T[t]), dtype=np.float32).reshape(-1)


def f16_bits(v):
    return np.array([v], dtype=np.float16).view(np.uint8)


def dequant_blocks(t):
    """Random blocks and edge blocks for type t, as a list of uint8 arrays."""
    bs, ts = SIZES[t]
    blocks = []
    if bs == 1:  # float types: 24 random bit patterns (NaN, inf and subnormals among them)
        raw = rng.integers(0, 256, size=24 * ts, dtype=np.uint8)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -65504.0, 3.0e38], dtype=np.float32)
        if t == "F16":
            specials = specials.astype(np.float16)
        elif t == "BF16":
            specials = (specials.view(np.uint32) >> 16).astype(np.uint16)
        return [raw[i * ts:(i + 1) * ts] for i in range(24)] + [specials.view(np.uint8)[i * ts:(i + 1) * ts] for i in range(len(specials))]
    for _ in range(4):
        b = rng.integers(0, 256, size=ts, dtype=np.uint8)
        if t == "Q8_K":
            b[0:4] = np.array([rng.normal() * 0.01], dtype=np.float32).view(np.uint8)
        for off in F16_FIELDS.get(t, []):
            b[off:off + 2] = f16_bits(rng.normal() * 0.05)
        blocks.append(b)
    scales = [0.0, -0.0, -0.0123, 65504.0, -65504.0, 2.0**-24, np.inf, -np.inf, np.nan]
    for k, s in enumerate(scales):
        for fill in [(0x00, 0xFF, None)[k % 3]]:
            b = rng.integers(0, 256, size=ts, dtype=np.uint8) if fill is None else np.full(ts, fill, dtype=np.uint8)
            if t == "Q8_K":
                b[0:4] = np.array([s if abs(s) != 65504.0 else s * 1e30], dtype=np.float32).view(np.uint8)
            for i, off in enumerate(F16_FIELDS.get(t, [])):
                # the second field (min) gets another edge value, so pairs vary
                b[off:off + 2] = f16_bits(s if i == 0 else scales[(k + 3) % len(scales)])
            blocks.append(b)
    return blocks


def inputs():
    """32 blocks of 256 values: varied distributions, then edge blocks."""
    rows = []
    for i in range(24):
        kind = i % 8
        if kind == 0:
            x = rng.uniform(-1, 1, 256)
        elif kind == 1:
            x = rng.normal(0, 1, 256)
        elif kind == 2:
            x = rng.normal(0, 0.02, 256)  # like trained weights
        elif kind == 3:
            x = rng.uniform(0, 1, 256)
        elif kind == 4:
            x = rng.uniform(-2, 0, 256)
        elif kind == 5:
            x = rng.normal(0, 1, 256)
            x[rng.integers(0, 256, 4)] *= 20  # outliers
        elif kind == 6:
            x = rng.laplace(0, 0.1, 256)
        else:
            x = rng.normal(0, 1, 256) * np.repeat(10.0 ** rng.uniform(-3, 1, 16), 16)  # scale per 16
        rows.append(x)
    rows.append(np.zeros(256))
    rows.append(np.full(256, 0.5))
    rows.append(np.full(256, -3.0))
    rows.append(rng.normal(0, 1e-20, 256))
    spike = np.zeros(256)
    spike[77] = -7.25
    rows.append(spike)
    rows.append(np.tile([1.0, -1.0], 128) * 1000)
    rows.append(np.round(rng.normal(0, 4, 256)))  # integers
    rows.append(rng.normal(0, 1, 256) * 1e-6)
    return np.array(rows, dtype=np.float32)


def main():
    np.seterr(all="ignore")  # the edge blocks make inf·0 = NaN on purpose
    OUT.mkdir(parents=True, exist_ok=True)
    x = inputs()
    with open(OUT / "inputs.txt", "w") as f:
        f.write("# 256 f32 (little-endian hex) per line: the inputs of the `quant` lines (scripts/ref/quant-golden.py)\n")
        for row in x:
            f.write(row.tobytes().hex() + "\n")
    lib = ggml_lib()
    for t in TYPES:
        lines = [f"# {t}: written by scripts/ref/quant-golden.py (gguf 0.19.0 numpy reference; llama.cpp ref quantizers via ctypes); do not edit\n"]
        src = "numpy layout" if t in ("Q8_1", "Q8_K") else ("numpy astype" if t == "F16" else "gguf.quants.dequantize")
        lines.append(f"# dequant: {src}\n")
        bs, ts = SIZES[t]
        for b in dequant_blocks(t):
            vals = dequant_ref(t, b) if t != "F16" else b.view(np.float16).astype(np.float32)
            assert vals.dtype == np.float32 and len(vals) == bs
            lines.append(f"dequant {b.tobytes().hex()} {vals.tobytes().hex()}\n")
        if t == "F32":
            qsrc = "identity"
        elif t == "F16":
            qsrc = "numpy astype(float16)"
        elif t in NUMPY_QUANT:
            qsrc = "gguf.quants.quantize"
        else:
            qsrc = "llama.cpp quantize_row_*_ref"
        lines.append(f"# quant: {qsrc}\n")
        # The float types' encodings are plain conversions: 4 rows are plenty (none for F32).
        for row in x[: {"F32": 0, "F16": 4, "BF16": 4}.get(t, len(x))]:
            if t == "F32":
                q = row.view(np.uint8)
            elif t == "F16":
                q = row.astype(np.float16).view(np.uint8)
            elif t in NUMPY_QUANT:
                q = np.asarray(quants.quantize(row, T[t])).view(np.uint8).reshape(-1)
                if t in C_QUANT:
                    c = c_quantize(lib, t, row)
                    assert (c == q).all(), f"{t}: numpy and llama.cpp disagree"
            else:
                q = c_quantize(lib, t, row)
            assert len(q) == 256 // bs * ts
            lines.append(f"quant {q.tobytes().hex()}\n")
        (OUT / f"{t}.txt").write_text("".join(lines))
        print(f"{t}: {sum(l.startswith('dequant') for l in lines)} dequant blocks, {sum(l.startswith('quant') for l in lines)} quant rows ({qsrc})")


if __name__ == "__main__":
    main()
