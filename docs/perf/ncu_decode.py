"""One decoding step's kernels from an `ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum
--csv` log of `rayo generate`: the launches after the last `argmax`/`top_k` but one (the last
decoded token's graph), summed per kernel name: launches, device time, DRAM bytes read and the
bandwidth they reach, largest first. Usage: python3 docs/perf/ncu_decode.py NCU.csv"""
import collections
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if 'Kernel Name' in r)
h = rows[hdr]
ii, ki, mi, vi, ui = h.index('ID'), h.index('Kernel Name'), h.index('Metric Name'), h.index('Metric Value'), h.index('Metric Unit')
launches = collections.OrderedDict()
for r in rows[hdr + 1:]:
    if len(r) <= vi:
        continue
    k = launches.setdefault(r[ii], {'name': r[ki]})
    v = float(r[vi].replace(',', ''))
    if r[mi] == 'gpu__time_duration.sum':
        k['ns'] = v * {'usecond': 1000, 'msecond': 1e6}.get(r[ui], 1)
    else:
        k['bytes'] = v * {'Kbyte': 1e3, 'Mbyte': 1e6, 'Gbyte': 1e9, 'byte': 1}.get(r[ui], 1)
seq = list(launches.values())
# a step ends with its sampling kernel: take the launches between the last two
ends = [i for i, k in enumerate(seq) if 'argmax' in k['name'].lower() or 'top_k' in k['name'].lower()]
step = seq[ends[-2] + 1:ends[-1] + 1] if len(ends) >= 2 else seq
tot, cnt, byt = collections.defaultdict(float), collections.Counter(), collections.defaultdict(float)
for k in step:
    tot[k['name']] += k.get('ns', 0)
    byt[k['name']] += k.get('bytes', 0)
    cnt[k['name']] += 1
all_ns, all_b = sum(tot.values()), sum(byt.values())
print(f"one step: {len(step)} launches, {all_ns / 1e3:.1f} us of kernel time (serialized), {all_b / 1e6:.1f} MB read, {all_b / max(all_ns, 1):.0f} GB/s")
for k in sorted(tot, key=lambda k: -tot[k]):
    print(f"{k[:44]:44} n={cnt[k]:4} {tot[k] / 1000:8.1f} us  mean {tot[k] / cnt[k] / 1000:6.2f} us  {byt[k] / 1e6:7.2f} MB  {byt[k] / max(tot[k], 1):6.0f} GB/s  {100 * tot[k] / all_ns:5.1f}%")
