#!/usr/bin/env python3
"""bench/median.py SAMPLES.CSV RESULTS.CSV: one row per (metric, size) of
the samples bench/run.sh recorded (metric,size,value,unit,round), with the
median of its numeric values and their min, max and count, in the order
the metrics were first measured.  A metric with no numeric sample (a run
that failed) keeps an empty value."""
import csv
import statistics
import sys

order, vals, units = [], {}, {}
for r in csv.DictReader(open(sys.argv[1])):
    k = (r["metric"], r["size"])
    if k not in vals:
        order.append(k)
        vals[k] = []
        units[k] = r["unit"]
    try:
        vals[k].append(float(r["value"]))
    except (TypeError, ValueError):
        pass


def fmt(x):
    return f"{x:g}"


with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["metric", "size", "value", "unit", "min", "max", "n"])
    for k in order:
        v = vals[k]
        if v:
            w.writerow([k[0], k[1], fmt(statistics.median(v)), units[k], fmt(min(v)), fmt(max(v)), len(v)])
        else:
            w.writerow([k[0], k[1], "", units[k], "", "", 0])
