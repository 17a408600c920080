#!/usr/bin/env bash
# Soft-iWARP beside Soft-RoCE beside plain TCP, measured in one run.
#
#   bench/iwarp.sh [OUTDIR]      (default bench/results/iwarp-<timestamp>)
#
# On loopback, connections made by rdma_cm (perftest -R) on each transport
# (and Soft-iWARP once more with SOFTRDMA_IW_NAGLE=1, Nagle on):
#   ib_write_bw -R  and  ib_write_lat -R   at 4 KiB and 64 KiB
# and qperf tcp_bw / tcp_lat at the same sizes: what the machine's TCP
# sockets give without RDMA semantics.  Writes results.csv
# (metric,size,value,unit) and a table.  BENCH_SECONDS (default 3) per
# bandwidth run, BENCH_ITERS (default 2000) per latency run.  Benchmarks
# are not tests: nothing here passes or fails.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
B=${SR_BUILD_DIR:-$here/build}
out=${1:-$here/bench/results/iwarp-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
RUN="$B/bin/softrdma-run"
DUR=${BENCH_SECONDS:-3}
ITERS=${BENCH_ITERS:-2000}
csv=$out/results.csv
log=$out/log.txt
echo "metric,size,value,unit" > "$csv"
: > "$log"
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = lo\n' > "$out/roce.conf"
printf 'crc = on\n[siw0]\ntype = iwarp\nnetdev = lo\n' > "$out/iwarp.conf"

rec() { echo "$1,$2,$3,$4" >> "$csv"; printf '  %-24s %6s  %10s %s\n' "$1" "$2" "$3" "$4"; }

# perftest pair over rdma_cm: CONF NAGLE TOOL ARGS...; prints the client's output
pair() {
	local conf=$1 nagle=$2; shift 2
	local p; p=$(bench_port)
	SOFTRDMA_IW_NAGLE=$nagle SOFTRDMA_CONF=$conf timeout 90 "$RUN" "$@" -R -p "$p" >> "$log" 2>&1 &
	local s=$!
	sleep 0.7
	local o; o=$(SOFTRDMA_IW_NAGLE=$nagle SOFTRDMA_CONF=$conf timeout 90 "$RUN" "$@" -R -p "$p" 127.0.0.1 2>&1)
	wait $s 2>/dev/null
	echo "== $*" >> "$log"
	echo "$o" >> "$log"
	echo "$o"
}

for t in roce iwarp iwarpnagle; do
	conf=$out/${t%nagle}.conf nagle=0
	[ "$t" = iwarpnagle ] && nagle=1
	echo "== $t: ib_write_bw -R / ib_write_lat -R"
	for sz in 4096 65536; do
		o=$(pair "$conf" $nagle ib_write_bw -s $sz -D $DUR)
		rec "${t}_write_bw" $sz "$(echo "$o" | awk -v s=$sz '$1==s && NF>=5 {print $4}' | tail -1)" MB/s
		o=$(pair "$conf" $nagle ib_write_lat -s $sz -n $ITERS)
		line=$(echo "$o" | awk -v s=$sz '$1==s && NF>=9' | tail -1)
		rec "${t}_write_lat_median" $sz "$(echo "$line" | awk '{print $5}')" us
	done
done

echo "== TCP: qperf"
qperf >> "$log" 2>&1 &
qs=$!
sleep 0.5
for sz in 4096 65536; do
	rec tcp_bw $sz "$(qperf -t $DUR -m $sz 127.0.0.1 tcp_bw 2>&1 |
		awk '$1=="bw" {v=$3; if ($4 ~ /^GB/) v*=1000; if ($4 ~ /^KB/) v/=1000; print v}')" MB/s
	rec tcp_lat $sz "$(qperf -t $DUR -m $sz 127.0.0.1 tcp_lat 2>&1 |
		awk '$1=="latency" {v=$3; if ($4 ~ /^ms/) v*=1000; if ($4 ~ /^ns/) v/=1000; print v}')" us
done
kill $qs 2>/dev/null
wait $qs 2>/dev/null

python3 - "$csv" > "$out/table.txt" <<'PY'
import csv, sys
d = {}
for r in csv.DictReader(open(sys.argv[1])):
    try: d[(r["metric"], r["size"])] = float(r["value"])
    except (TypeError, ValueError): pass
def g(m, s):
    v = d.get((m, s))
    return f"{v:10.1f}" if v is not None else "       n/a"
print(f"{'':28s}{'Soft-iWARP':>10s} {'iWARP+Nagle':>12s} {'Soft-RoCE':>10s} {'qperf tcp':>10s}")
for s in ("4096", "65536"):
    print(f"{'write bw  ' + s + ' B (MB/s)':28s}{g('iwarp_write_bw', s)}   {g('iwarpnagle_write_bw', s)} {g('roce_write_bw', s)} {g('tcp_bw', s)}")
for s in ("4096", "65536"):
    print(f"{'write lat ' + s + ' B (us)':28s}{g('iwarp_write_lat_median', s)}   {g('iwarpnagle_write_lat_median', s)} {g('roce_write_lat_median', s)} {g('tcp_lat', s)}")
PY
cat "$out/table.txt"
echo "results: $out"
