#!/usr/bin/env python3
"""The reference table of a GGUF file, as PyPI `gguf`'s GGUFReader reads it (the committed
crates/rayo/tests/data/smollm2-q4_1.gguf.tsv, which tests/gguf_real.rs checks rayo's reader
against). Run through scripts/ref/gguf-table.sh, which makes the venv (gguf 0.19.0, numpy).

One record per line, fields separated by tabs:
  version|alignment|data_offset|tensor_count|kv_count  <number>
  meta  <key>  <type>  <value>        scalars; strings JSON-quoted (json.dumps, ensure_ascii=False)
  meta  <key>  array[<type>]  <len>  <first>  <last>  <sum>
        first/last element (strings JSON-quoted); sum: of the elements for integer arrays,
        of the UTF-8 byte lengths for string arrays, '-' otherwise
  tensor  <name>  <ggml type>  <dims, ne[0] first, comma-separated>  <offset in the data section>  <bytes>
"""
import json
import sys
from importlib.metadata import version as package_version

from gguf import GGUFReader, GGUFValueType

NAMES = {
    GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
    GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
    GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
    GGUFValueType.FLOAT64: "f64",
}
INTS = {GGUFValueType.UINT8, GGUFValueType.INT8, GGUFValueType.UINT16, GGUFValueType.INT16,
        GGUFValueType.UINT32, GGUFValueType.INT32, GGUFValueType.UINT64, GGUFValueType.INT64}


def scalar(t, v):
    if t == GGUFValueType.STRING:
        return json.dumps(v, ensure_ascii=False)
    if t == GGUFValueType.BOOL:
        return "true" if v else "false"
    if t in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return repr(float(v))
    return str(int(v))


def main(path):
    r = GGUFReader(path)
    out = []
    version = int(r.fields["GGUF.version"].contents())
    alignment = int(r.fields["general.alignment"].contents()) if "general.alignment" in r.fields else 32
    kvs = [f for f in r.fields.values() if not f.name.startswith("GGUF.")]
    out.append(f"# {path.rsplit('/', 1)[-1]}, read by PyPI gguf {package_version('gguf')} (scripts/ref/gguf-table.py)")
    out.append(f"version\t{version}")
    out.append(f"alignment\t{alignment}")
    out.append(f"data_offset\t{r.data_offset}")
    out.append(f"tensor_count\t{len(r.tensors)}")
    out.append(f"kv_count\t{len(kvs)}")
    for f in kvs:
        t = f.types[0]
        if t == GGUFValueType.ARRAY:
            et = f.types[1]
            v = f.contents()
            if et == GGUFValueType.ARRAY:
                raise SystemExit(f"{f.name}: nested arrays are not in this table's format")
            if et in INTS:
                s = str(sum(int(x) for x in v))
            elif et == GGUFValueType.STRING:
                s = str(sum(len(x.encode("utf-8")) for x in v))
            else:
                s = "-"
            first, last = (scalar(et, v[0]), scalar(et, v[-1])) if v else ("-", "-")
            out.append(f"meta\t{f.name}\tarray[{NAMES[et]}]\t{len(v)}\t{first}\t{last}\t{s}")
        else:
            out.append(f"meta\t{f.name}\t{NAMES[t]}\t{scalar(t, f.contents())}")
    for t in r.tensors:
        dims = ",".join(str(int(d)) for d in t.shape)
        out.append(f"tensor\t{t.name}\t{t.tensor_type.name}\t{dims}\t{t.data_offset - r.data_offset}\t{t.n_bytes}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
