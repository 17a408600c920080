#!/usr/bin/env bash
# softrdma benchmarks, side by side with the alternatives, in one run.
#
#   bench/run.sh [OUTDIR]        (default bench/results/<timestamp>)
#
# Measures on loopback, each tool as a server/client pair:
#   softrdma   ib_write_bw / ib_send_bw / ib_read_bw by message size, ib_write_lat,
#              ib_send_lat (median and p99), ibv_rc_pingpong 4 KiB / 64 KiB,
#              CPU seconds per GB moved, memory per QP
#   raw TCP/UDP qperf tcp_bw / tcp_lat / udp_bw / udp_lat, iperf3
# and writes results.csv (metric,size,value,unit), ratios.txt and bench.png.
# Absolute numbers on a shared 2-core machine drift; ratios measured in the
# same run hold. Benchmarks are not tests: nothing here passes or fails.
# Beside it: bench/middleware.sh (UCX, Open MPI), bench/iwarp.sh
# (Soft-iWARP) and bench/storage.sh (iSER with tgtd and libiscsi beside
# iSCSI over TCP; `make bench-storage`).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=${SR_BUILD_DIR:-$here/build}
out=${1:-$here/bench/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
conf=$out/lo.conf
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = lo\n' > "$conf"
export SOFTRDMA_CONF=$conf
RUN="$B/bin/softrdma-run"
csv=$out/results.csv
echo "metric,size,value,unit" > "$csv"
log=$out/log.txt
: > "$log"
DUR=${BENCH_SECONDS:-3}

rec() { echo "$1,$2,$3,$4" >> "$csv"; printf '  %-28s %8s  %12s %s\n' "$1" "$2" "$3" "$4"; }
port() { echo $((30000 + RANDOM % 20000)); }

# server/client pair; prints client output. $1 = wrapper ("" or $RUN)
pair() {
	local wrap=$1; shift
	local p; p=$(port)
	$wrap "$@" -p "$p" >> "$log" 2>&1 &
	local s=$!
	sleep 0.5
	local o; o=$(timeout 60 $wrap "$@" -p "$p" 127.0.0.1 2>&1)
	wait $s 2>/dev/null
	echo "$o" >> "$log"
	echo "$o"
}

echo "== softrdma: RDMA WRITE/SEND/READ bandwidth by message size (perftest, ${DUR}s each)"
for op in write send read; do
	for sz in 64 1024 4096 16384 65536 262144 1048576; do
		o=$(pair "$RUN" ib_${op}_bw -x 0 -s $sz -D $DUR)
		bw=$(echo "$o" | awk -v s=$sz '$1==s && NF>=5 {print $4}' | tail -1)
		rec "softrdma_${op}_bw" $sz "${bw:-0}" MB/s
	done
done

echo "== softrdma: latency (perftest, 64 B, 5000 iterations)"
for op in write send read; do
	o=$(pair "$RUN" ib_${op}_lat -x 0 -s 64 -n 5000)
	line=$(echo "$o" | awk '$1==64 && NF>=9' | tail -1)
	rec "softrdma_${op}_lat_median" 64 "$(echo "$line" | awk '{print $5}')" us
	rec "softrdma_${op}_lat_p99" 64 "$(echo "$line" | awk '{print $8}')" us
done

echo "== softrdma: ibv_rc_pingpong"
for sz in 4096 65536; do
	o=$(pair "$RUN" ibv_rc_pingpong -g 0 -s $sz -n 2000)
	rec softrdma_rc_pingpong_bw $sz "$(echo "$o" | awk '/Mbit\/sec/ {print $(NF-1)}')" Mbit/s
	rec softrdma_rc_pingpong_iter $sz "$(echo "$o" | awk '/usec\/iter/ {print $(NF-1)}')" us/iter
done

echo "== softrdma: CPU per GB moved (ib_write_bw 64 KiB, both processes)"
p=$(port)
/usr/bin/time -f "%U %S" -o "$out/cpu_srv" $RUN ib_write_bw -x 0 -s 65536 -D $DUR -p $p >> "$log" 2>&1 &
s=$!; sleep 0.5
o=$(/usr/bin/time -f "%U %S" -o "$out/cpu_cli" $RUN ib_write_bw -x 0 -s 65536 -D $DUR -p $p 127.0.0.1 2>&1)
wait $s
bw=$(echo "$o" | awk '$1==65536 && NF>=5 {print $4}' | tail -1)
cpu=$(cat "$out/cpu_srv" "$out/cpu_cli" | awk '{c+=$1+$2} END {print c}')
gb=$(awk -v b="${bw:-0}" -v d=$DUR 'BEGIN {print b*d/1000}')
rec softrdma_cpu_per_gb 65536 "$(awk -v c="$cpu" -v g="$gb" 'BEGIN {if (g>0) printf "%.2f", c/g; else print 0}')" cpu-s/GB

echo "== softrdma: memory per RC QP"
if [ -x "$B/bin/softrdma-qpmem" ]; then
	m=$($RUN "$B/bin/softrdma-qpmem" 1000 2>>"$log" | awk '/per QP/ {print $(NF-1)}')
	rec softrdma_mem_per_qp 0 "${m:-0}" KiB
fi

echo "== raw TCP/UDP: qperf"
qperf >> "$log" 2>&1 &
qs=$!; sleep 0.5
mbps() { awk -v k="$1" '$1==k {v=$3; if ($4 ~ /^GB/) v*=1000; if ($4 ~ /^KB/) v/=1000; print v}'; }
for sz in 4096 65536; do
	rec qperf_tcp_bw $sz "$(qperf -t $DUR -m $sz 127.0.0.1 tcp_bw 2>&1 | mbps bw)" MB/s
	# a UDP datagram carries at most 65507 bytes
	usz=$sz; [ $usz -gt 65000 ] && usz=65000
	rec qperf_udp_bw $sz "$(qperf -t $DUR -m $usz 127.0.0.1 udp_bw 2>&1 | mbps recv_bw)" MB/s
done
rec qperf_tcp_lat 64 "$(qperf -t $DUR -m 64 127.0.0.1 tcp_lat 2>&1 | awk '$1=="latency" {v=$3; if ($4 ~ /^ms/) v*=1000; print v}')" us
rec qperf_udp_lat 64 "$(qperf -t $DUR -m 64 127.0.0.1 udp_lat 2>&1 | awk '$1=="latency" {v=$3; if ($4 ~ /^ms/) v*=1000; print v}')" us
kill $qs 2>/dev/null; wait $qs 2>/dev/null

if command -v iperf3 >/dev/null; then
	echo "== raw TCP: iperf3"
	p=$(port)
	iperf3 -s -1 -p $p >> "$log" 2>&1 &
	sleep 0.5
	v=$(iperf3 -c 127.0.0.1 -p $p -t $DUR -J 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e6)' 2>/dev/null)
	rec iperf3_tcp_bw 131072 "$(printf '%.1f' "${v:-0}")" MB/s
	wait 2>/dev/null
fi

# ratios against the alternatives measured above
python3 - "$csv" > "$out/ratios.txt" <<'PY'
import csv, sys
d = {}
for r in csv.DictReader(open(sys.argv[1])):
    try: d[(r["metric"], r["size"])] = float(r["value"])
    except (TypeError, ValueError): pass
def ratio(a, b, label):
    if a in d and b in d and d[b] > 0:
        print(f"{label:52s} {d[a]:10.1f} / {d[b]:10.1f} = {d[a]/d[b]:.2f}")
for sz in ("4096", "65536"):
    ratio(("softrdma_write_bw", sz), ("qperf_tcp_bw", sz), f"ib_write_bw / qperf tcp_bw  ({sz} B, MB/s)")
    ratio(("softrdma_write_bw", sz), ("qperf_udp_bw", sz), f"ib_write_bw / qperf udp_bw  ({sz} B, MB/s)")
ratio(("softrdma_send_lat_median", "64"), ("qperf_tcp_lat", "64"), "ib_send_lat median / qperf tcp_lat (64 B, us)")
ratio(("softrdma_write_lat_median", "64"), ("qperf_udp_lat", "64"), "ib_write_lat median / qperf udp_lat (64 B, us)")
PY
cat "$out/ratios.txt"

if command -v gnuplot >/dev/null; then
	for op in write send read; do grep "^softrdma_${op}_bw," "$csv" | cut -d, -f2,3 | tr , ' ' > "$out/$op.dat"; done
	tcp=$(awk -F, '$1=="qperf_tcp_bw" && $2==65536 {print $3}' "$csv")
	gnuplot <<GP
set terminal png size 900,560 noenhanced
set output "$out/bench.png"
set format x "%.0b%BB"
set title "softrdma on loopback: bandwidth by message size"
set logscale x 2
set xlabel "message size (bytes)"
set ylabel "MB/s"
set key left top
plot "$out/write.dat" w lp t "ib_write_bw", "$out/send.dat" w lp t "ib_send_bw", \
     "$out/read.dat" w lp t "ib_read_bw", ${tcp:-0} w l dt 2 t "qperf tcp_bw (64 KiB)"
GP
fi
echo "results: $out"
