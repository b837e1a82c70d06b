#!/usr/bin/env bash
# Where a prompt's time goes on the GPU machine (issue 12, prefill): `ncu` over the first
# pp512 pass of `rayo bench --model … --backend cuda` (its warm-up: one 512-token batch), the
# device time summed per kernel. Run there from the repository root with the binaries in
# /tmp/b and the model in /tmp/m (see issue12-cuda.sh). Output in $OUT (default /tmp/out).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
model=${1:-/tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf}
launches=${LAUNCHES:-700}
timeout 300 ncu --metrics gpu__time_duration.sum --csv --launch-count "$launches" \
  /tmp/b/rayo bench --model "$model" --backend cuda --json 2>/dev/null >/tmp/ncu-pp.csv
python3 - <<'PY' | tee "$OUT/ncu-prefill.txt"
import csv, collections
rows = list(csv.reader(open('/tmp/ncu-pp.csv')))
hdr = next(i for i, r in enumerate(rows) if 'Kernel Name' in r)
h = rows[hdr]; ki, vi, ui = h.index('Kernel Name'), h.index('Metric Value'), h.index('Metric Unit')
tot, cnt = collections.defaultdict(float), collections.Counter()
for r in rows[hdr + 1:]:
    if len(r) > vi:
        tot[r[ki]] += float(r[vi].replace(',', '')) * {'usecond': 1000, 'msecond': 1e6}.get(r[ui], 1)
        cnt[r[ki]] += 1
all_ns = sum(tot.values())
print(f"{sum(cnt.values())} launches, {all_ns / 1e6:.2f} ms of device time (serialized)")
for k in sorted(tot, key=lambda k: -tot[k]):
    print(f"{k[:40]:40} n={cnt[k]:5} total={tot[k] / 1000:9.1f} us  mean={tot[k] / cnt[k] / 1000:7.2f} us  {100 * tot[k] / all_ns:5.1f}%")
PY
