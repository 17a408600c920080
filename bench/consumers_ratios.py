#!/usr/bin/env python3
"""bench/consumers_ratios.py RESULTS.CSV OUTDIR [LOAD-START LOAD-END NPROC]:
bench/consumers.sh's ratios.  Every softrdma transport of a row (topology,
program, metric, size) beside every TCP mode of the same row (transports
named tcp*), as softrdma over TCP (latency: TCP's over softrdma's), so
that >= 1 is at least as fast.  Prints them one a line and writes
OUTDIR/ratios.md (one table row per measure, loopback and netns side by
side) and OUTDIR/ratios.dat (label, ratio: consumers.png's bars)."""
import csv
import sys

d, order = {}, []
for r in csv.DictReader(open(sys.argv[1])):
    k = (r["topology"], r["program"], r["metric"], r["size"])
    if k not in order:
        order.append(k)
    try:
        d[k + (r["transport"],)] = (float(r["value"]), r["unit"])
    except (TypeError, ValueError):
        pass

rows = []
for k in order:
    trs = [x[4] for x in d if x[:4] == k]
    for base in sorted(b for b in trs if b.startswith("tcp")):
        t = d[k + (base,)][0]
        for tr in sorted(x for x in trs if not x.startswith("tcp")):
            v, unit = d[k + (tr,)]
            if v and t:
                r = t / v if unit in ("us", "ms") else v / t
                rows.append((k, tr.replace("softrdma-", ""), base, v, t, unit, r))

print("softrdma / TCP, same machine, same run: >= 1.00 is at least as fast (latency: TCP's / softrdma's)")
if len(sys.argv) > 5:
    print(f"load average {sys.argv[3]} at the start, {sys.argv[4]} at the end, {sys.argv[5]} CPUs")
for (topo, prog, m, size), tr, base, v, t, unit, r in rows:
    print(f"{topo:8s} {prog:8s} {m:22s} {size:>8s} {tr:10s} {v:10.2f} / {base:7s} {t:10.2f} {unit:5s} = {r:5.2f}x "
          f"{'faster' if r >= 1 else 'slower'}")

out = sys.argv[2]
with open(f"{out}/ratios.dat", "w") as dat:
    for (topo, prog, m, size), tr, base, v, t, unit, r in rows:
        dat.write(f"\"{topo[:2]} {prog} {m} {size} {tr}/{base}\" {r:.3f}\n")
pivot, keys = {}, []
for (topo, prog, m, size), tr, base, v, t, unit, r in rows:
    key = (prog, m, size, tr, base)
    if key not in pivot:
        keys.append(key)
    pivot.setdefault(key, {})[topo] = f"{v:g} / {t:g} {unit} = **{r:.2f}x**"
with open(f"{out}/ratios.md", "w") as md:
    md.write("| program | measure | size | softrdma | TCP mode | loopback: softrdma / TCP | netns: softrdma / TCP |\n")
    md.write("|---|---|---|---|---|---|---|\n")
    for key in keys:
        prog, m, size, tr, base = key
        cells = [pivot[key].get(t, "n/a") for t in ("loopback", "netns")]
        md.write(f"| {prog} | {m} | {size} | {tr} | {base} | {cells[0]} | {cells[1]} |\n")
