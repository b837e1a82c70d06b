#!/usr/bin/env python3
"""A small GGUF file written by PyPI `gguf`'s GGUFWriter (0.19.0), printed as hex, 64 bytes a
line: crates/rayo/tests/data/pygguf-every-type.gguf.hex, which tests/gguf_interop.rs reads with
rayo (and rewrites with rayo's writer, byte for byte). Every value type, arrays of each, arrays
of arrays, a 64-byte alignment, tensors in F32, F16 and Q8_0.

  .venv-gguf/bin/python scripts/ref/gguf-interop.py > crates/rayo/tests/data/pygguf-every-type.gguf.hex
"""
import io
import os
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.gguf")
        w = GGUFWriter(path, "llama")
        w.add_custom_alignment(64)
        w.add_uint8("t.u8", 254)
        w.add_int8("t.i8", -128)
        w.add_uint16("t.u16", 65535)
        w.add_int16("t.i16", -12345)
        w.add_uint32("t.u32", 0xDEADBEEF)
        w.add_int32("t.i32", -(2**31))
        w.add_float32("t.f32", -1.5e-7)
        w.add_bool("t.bool", True)
        w.add_string("t.string", "héllo, 世界\n\t\"quoted\"")
        w.add_uint64("t.u64", 2**64 - 1)
        w.add_int64("t.i64", -(2**63) + 1)
        w.add_float64("t.f64", 3.141592653589793)
        w.add_key_value("a.u8", [0, 1, 255], GGUFValueType.ARRAY, GGUFValueType.UINT8)
        w.add_key_value("a.i16", [-32768, 7], GGUFValueType.ARRAY, GGUFValueType.INT16)
        w.add_array("a.i32", [3, -1, 1])
        w.add_array("a.f32", [0.5, -0.0, 2.25])
        w.add_array("a.bool", [True, False, True])
        w.add_array("a.string", ["a", "", "Ġthe"])
        w.add_key_value("a.u64", [2**64 - 1, 0], GGUFValueType.ARRAY, GGUFValueType.UINT64)
        w.add_key_value("a.f64", [1e300, -2.5], GGUFValueType.ARRAY, GGUFValueType.FLOAT64)
        w.add_array("a.strings.nested", [["x", "yz"], ["w"]])
        w.add_array("a.ints.nested", [[1, 2], [3]])
        w.add_tensor("norm", np.arange(5, dtype=np.float32))
        w.add_tensor("f16", np.arange(6, dtype=np.float16).reshape(2, 3))
        q8 = np.frombuffer(bytes(range(68)), dtype=np.uint8)
        w.add_tensor("q8", q8.reshape(2, 34), raw_dtype=GGMLQuantizationType.Q8_0)  # 2 rows of 32 values
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        data = open(path, "rb").read()
    h = data.hex()
    sys.stdout.write("".join(h[i:i + 128] + "\n" for i in range(0, len(h), 128)))


if __name__ == "__main__":
    main()
