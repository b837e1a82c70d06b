"""Device time per kernel from an `ncu --metrics gpu__time_duration.sum --csv` log: launches,
total and mean per kernel name, largest first, and each one's share of the whole.
Usage: python3 docs/perf/ncu_summary.py NCU.csv"""
import collections
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if 'Kernel Name' in r)
h = rows[hdr]
ki, vi, ui = h.index('Kernel Name'), h.index('Metric Value'), h.index('Metric Unit')
tot, cnt = collections.defaultdict(float), collections.Counter()
for r in rows[hdr + 1:]:
    if len(r) > vi:
        tot[r[ki]] += float(r[vi].replace(',', '')) * {'usecond': 1000, 'msecond': 1e6}.get(r[ui], 1)
        cnt[r[ki]] += 1
all_ns = sum(tot.values())
print(f"{sum(cnt.values())} launches, {all_ns / 1e6:.2f} ms of device time (serialized)")
for k in sorted(tot, key=lambda k: -tot[k]):
    print(f"{k[:40]:40} n={cnt[k]:5} total={tot[k] / 1000:9.1f} us  mean={tot[k] / cnt[k] / 1000:7.2f} us  {100 * tot[k] / all_ns:5.1f}%")
