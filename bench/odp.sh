#!/bin/bash
# bench/odp.sh [OUTDIR]: what on-demand paging changes, on Soft-RoCE on lo.
#  - reg_cost.csv: a buffer's registration cost (ibv_reg_mr +
#    ibv_dereg_mr, median of 201) as an ordinary MR, an explicit ODP MR
#    and under an implicit ODP MR (registered once: nothing per buffer),
#    at 4 KiB, 1 MiB and 64 MiB;
#  - bw.csv: ib_write_bw and ib_send_bw at 4 KiB and 64 KiB with
#    ordinary MRs and with --odp (ODP MRs: each send's pages are probed),
#    alternately, BENCH_ROUNDS times each (default 3), and their medians.
# OUTDIR defaults to bench/results/<timestamp>-odp.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
build=${SR_BUILD_DIR:-$here/build}
RUN=$build/bin/softrdma-run
out=${1:-$here/bench/results/$(date +%Y-%m-%d-%H%M%S)-odp}
rounds=${BENCH_ROUNDS:-3}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = lo\n' > "$tmp/lo.conf"
export SOFTRDMA_CONF=$tmp/lo.conf

"$RUN" "$build/bin/reg_cost" > "$out/reg_cost.csv"
column -s, -t < "$out/reg_cost.csv"

echo "test,size,mr,round,MB_s" > "$out/bw.csv"
for r in $(seq "$rounds"); do
	for t in ib_write_bw ib_send_bw; do
		for s in 4096 65536; do
			for mr in ordinary odp; do
				odp=; [ $mr = odp ] && odp=--odp
				p=$(bench_port)
				timeout 120 "$RUN" $t $odp -s $s -D 2 -p $p > "$tmp/srv" 2>&1 &
				sleep 0.7
				timeout 120 "$RUN" $t $odp -s $s -D 2 -p $p 127.0.0.1 > "$tmp/cli" 2>&1
				wait
				bw=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $4 } END { print v }' "$tmp/cli")
				echo "$t,$s,$mr,$r,${bw:-}" >> "$out/bw.csv"
			done
		done
	done
done
python3 - "$out/bw.csv" <<'PY' | tee "$out/ratios.txt"
import csv, statistics, sys
v = {}
for r in csv.DictReader(open(sys.argv[1])):
    try:
        v.setdefault((r["test"], r["size"], r["mr"]), []).append(float(r["MB_s"]))
    except ValueError:
        pass
print("test size: ordinary MR, ODP MR (median MB/s of each), ODP / ordinary")
for (t, s, mr) in sorted(v):
    if mr != "ordinary" or (t, s, "odp") not in v:
        continue
    a, b = statistics.median(v[(t, s, mr)]), statistics.median(v[(t, s, "odp")])
    print(f"{t} {s}: {a:.0f}, {b:.0f}, {b / a:.2f}x")
PY
echo "results in $out"
