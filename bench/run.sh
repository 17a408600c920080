#!/usr/bin/env bash
# softrdma benchmarks, side by side with the alternatives, in one run.
#
#   bench/run.sh [OUTDIR]        (default bench/results/<timestamp>)
#
# Measures on loopback, each tool as a server/client pair:
#   Soft-RoCE   ib_write_bw / ib_send_bw / ib_read_bw by message size, the
#               64 B message rate (default and -l 32 post lists), ib_write_lat
#               8 B, ib_send_lat / ib_read_lat / ib_write_lat 64 B (median and
#               p99), ibv_rc_pingpong 4 KiB / 64 KiB, CPU seconds per GB moved,
#               memory per idle RC QP, 10,000 QPs in one process (create and
#               empty-poll time)
#   Soft-iWARP  the same perftest programs over rdma_cm (-R): write and read
#               bandwidth, 64 B message rate, write latency 8 B
#   by event    ib_send_lat -e / ib_read_lat -e 8 B on both transports
#               (completions by ibv_get_cq_event), beside qperf tcp_lat
#   CRCs off    ib_write_bw 64 KiB (Soft-RoCE) and 4 KiB (Soft-iWARP) again
#               with `crc = off`: the CRC's share of each bandwidth gap
#   raw TCP/UDP qperf tcp_bw / tcp_lat / udp_bw (and its msg_rate) / udp_lat,
#               iperf3, and a UDP and a TCP ping-pong that spin on their
#               sockets (bench/sock_lat.c: median and p99, 8 B)
#   UCX on TCP  ucx_perftest ucp_am_lat (8 B) and ucp_put_bw (UCX_TLS=tcp)
# and writes results.csv (metric,size,value,unit), ratios.md (each target
# of issue 12 with its ratio and PASS/MISS), ratios.txt and bench.png.
# Absolute numbers on a shared 2-core machine drift; ratios measured in the
# same run hold.  Benchmarks are not tests: nothing here fails a build.
# BENCH_SECONDS (default 3) per bandwidth run, BENCH_ITERS (default 5000)
# per latency run.  BENCH_REPEAT=N (default 1) measures everything N times,
# one whole round after the other, and results.csv holds each number's
# median (with min, max and n; every sample in samples.csv): one sample of a
# run on a shared machine can be off by 1.5x.
# Beside it: bench/middleware.sh (UCX, Open MPI), bench/iwarp.sh
# (Soft-iWARP) and bench/storage.sh (iSER with tgtd and libiscsi beside
# iSCSI over TCP; `make bench-storage`).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
B=${SR_BUILD_DIR:-$here/build}
out=${1:-$here/bench/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
roce_conf=$out/lo.conf
iwarp_conf=$out/iwarp.conf
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = lo\n' > "$roce_conf"
printf 'crc = on\n[siw0]\ntype = iwarp\nnetdev = lo\n' > "$iwarp_conf"
# the same devices with CRCs off (softrdma-cfg crc disable): how much of a
# bandwidth gap to raw UDP/TCP is the ICRC or MPA CRC
roce_nocrc_conf=$out/lo-nocrc.conf
iwarp_nocrc_conf=$out/iwarp-nocrc.conf
printf 'crc = off\n[rxe0]\ntype = roce\nnetdev = lo\n' > "$roce_nocrc_conf"
printf 'crc = off\n[siw0]\ntype = iwarp\nnetdev = lo\n' > "$iwarp_nocrc_conf"
RUN="$B/bin/softrdma-run"
csv=$out/results.csv
samples=$out/samples.csv
echo "metric,size,value,unit,round" > "$samples"
log=$out/log.txt
: > "$log"
DUR=${BENCH_SECONDS:-3}
ITERS=${BENCH_ITERS:-5000}
REPS=${BENCH_REPEAT:-1}
case $REPS in '' | *[!0-9]* | 0) echo "bench/run.sh: BENCH_REPEAT must be a positive integer, not '$REPS'" >&2; exit 2 ;; esac
round=1

rec() { echo "$1,$2,$3,$4,$round" >> "$samples"; printf '  %-30s %8s  %12s %s\n' "$1" "$2" "$3" "$4"; }

# server/client pair; prints the client's output.
#   pair CONF WRAP CMD ARGS...   (CONF "" = none; WRAP "" or $RUN)
pair() {
	local conf=$1 wrap=$2; shift 2
	local p; p=$(bench_port)
	SOFTRDMA_CONF=$conf timeout 120 $wrap "$@" -p "$p" >> "$log" 2>&1 &
	local s=$!
	sleep 0.7
	local o; o=$(SOFTRDMA_CONF=$conf timeout 120 $wrap "$@" -p "$p" 127.0.0.1 2>&1)
	wait $s 2>/dev/null
	{ echo "== $*"; echo "$o"; } >> "$log"
	echo "$o"
}
# perftest result columns: bw: size iters peak avg msgrate; lat: size iters
# min max typical avg stdev p99 p99.9
bw_of() { awk -v s=$1 '$1==s && NF>=5 {print $4}' | tail -1; }
rate_of() { awk -v s=$1 '$1==s && NF>=5 {print $5}' | tail -1; }
lat_line() { awk -v s=$1 '$1==s && NF>=9' | tail -1; }

measure_round() {
echo "== Soft-RoCE: RDMA WRITE/SEND/READ bandwidth by message size (perftest, ${DUR}s each)"
for op in write send read; do
	for sz in 64 1024 4096 16384 65536 262144 1048576; do
		o=$(pair "$roce_conf" "$RUN" ib_${op}_bw -x 0 -s $sz -D $DUR)
		rec "softrdma_${op}_bw" $sz "$(echo "$o" | bw_of $sz)" MB/s
		if [ $sz = 64 ]; then
			rec "softrdma_${op}_msg_rate" $sz "$(echo "$o" | rate_of $sz)" Mpps
		fi
	done
done
o=$(pair "$roce_conf" "$RUN" ib_write_bw -x 0 -s 64 -l 32 -D $DUR)
rec softrdma_write_msg_rate_l32 64 "$(echo "$o" | rate_of 64)" Mpps
o=$(pair "$roce_nocrc_conf" "$RUN" ib_write_bw -x 0 -s 65536 -D $DUR)
rec softrdma_write_bw_nocrc 65536 "$(echo "$o" | bw_of 65536)" MB/s

echo "== Soft-RoCE: latency (perftest, $ITERS iterations)"
o=$(pair "$roce_conf" "$RUN" ib_write_lat -x 0 -s 8 -n $ITERS)
line=$(echo "$o" | lat_line 8)
rec softrdma_write_lat_median 8 "$(echo "$line" | awk '{print $5}')" us
rec softrdma_write_lat_p99 8 "$(echo "$line" | awk '{print $8}')" us
rec softrdma_write_lat_p999 8 "$(echo "$line" | awk '{print $9}')" us
for op in write send read; do
	o=$(pair "$roce_conf" "$RUN" ib_${op}_lat -x 0 -s 64 -n $ITERS)
	line=$(echo "$o" | lat_line 64)
	rec "softrdma_${op}_lat_median" 64 "$(echo "$line" | awk '{print $5}')" us
	rec "softrdma_${op}_lat_p99" 64 "$(echo "$line" | awk '{print $8}')" us
done

echo "== completions by event (perftest -e: ibv_req_notify_cq + ibv_get_cq_event), 8 B"
for op in send read; do
	o=$(pair "$roce_conf" "$RUN" ib_${op}_lat -e -x 0 -s 8 -n $ITERS)
	rec "softrdma_${op}_lat_event_median" 8 "$(echo "$o" | lat_line 8 | awk '{print $5}')" us
	o=$(pair "$iwarp_conf" "$RUN" ib_${op}_lat -e -R -s 8 -n $ITERS)
	rec "iwarp_${op}_lat_event_median" 8 "$(echo "$o" | lat_line 8 | awk '{print $5}')" us
done

echo "== Soft-iWARP (perftest over rdma_cm, -R)"
for sz in 4096 65536; do
	o=$(pair "$iwarp_conf" "$RUN" ib_write_bw -R -s $sz -D $DUR)
	rec iwarp_write_bw $sz "$(echo "$o" | bw_of $sz)" MB/s
done
o=$(pair "$iwarp_nocrc_conf" "$RUN" ib_write_bw -R -s 4096 -D $DUR)
rec iwarp_write_bw_nocrc 4096 "$(echo "$o" | bw_of 4096)" MB/s
o=$(pair "$iwarp_conf" "$RUN" ib_write_bw -R -s 64 -D $DUR)
rec iwarp_write_msg_rate 64 "$(echo "$o" | rate_of 64)" Mpps
o=$(pair "$iwarp_conf" "$RUN" ib_read_bw -R -s 65536 -D $DUR)
rec iwarp_read_bw 65536 "$(echo "$o" | bw_of 65536)" MB/s
o=$(pair "$iwarp_conf" "$RUN" ib_write_lat -R -s 8 -n $ITERS)
line=$(echo "$o" | lat_line 8)
rec iwarp_write_lat_median 8 "$(echo "$line" | awk '{print $5}')" us
rec iwarp_write_lat_p99 8 "$(echo "$line" | awk '{print $8}')" us
rec iwarp_write_lat_p999 8 "$(echo "$line" | awk '{print $9}')" us

echo "== Soft-RoCE: ibv_rc_pingpong"
for sz in 4096 65536; do
	o=$(pair "$roce_conf" "$RUN" ibv_rc_pingpong -g 0 -s $sz -n 2000)
	rec softrdma_rc_pingpong_bw $sz "$(echo "$o" | awk '/Mbit\/sec/ {print $(NF-1)}')" Mbit/s
	rec softrdma_rc_pingpong_iter $sz "$(echo "$o" | awk '/usec\/iter/ {print $(NF-1)}')" us/iter
done

echo "== Soft-RoCE: CPU per GB moved (ib_write_bw 64 KiB, both processes)"
p=$(bench_port)
SOFTRDMA_CONF=$roce_conf /usr/bin/time -f "%U %S" -o "$out/cpu_srv" $RUN ib_write_bw -x 0 -s 65536 -D $DUR -p $p >> "$log" 2>&1 &
s=$!; sleep 0.7
o=$(SOFTRDMA_CONF=$roce_conf /usr/bin/time -f "%U %S" -o "$out/cpu_cli" $RUN ib_write_bw -x 0 -s 65536 -D $DUR -p $p 127.0.0.1 2>&1)
wait $s
bw=$(echo "$o" | bw_of 65536)
cpu=$(cat "$out/cpu_srv" "$out/cpu_cli" | awk '{c+=$1+$2} END {print c}')
gb=$(awk -v b="${bw:-0}" -v d=$DUR 'BEGIN {print b*d/1000}')
rec softrdma_cpu_per_gb 65536 "$(awk -v c="$cpu" -v g="$gb" 'BEGIN {if (g>0) printf "%.2f", c/g; else print 0}')" cpu-s/GB

echo "== Soft-RoCE: QPs in one process (softrdma-qpmem)"
for n in 1000 10000; do
	o=$(SOFTRDMA_CONF=$roce_conf $RUN "$B/bin/softrdma-qpmem" $n 2>&1)
	echo "$o" >> "$log"
	ok=0; echo "$o" | grep -q '^destroy:' && ok=1
	rec softrdma_qps_ok $n $ok bool
	rec softrdma_mem_per_qp $n "$(echo "$o" | awk '/per QP/ {print $(NF-1)}')" KiB
	rec softrdma_qp_create $n "$(echo "$o" | awk '/^create:/ {print $2}')" us
	rec softrdma_qp_create_cpu $n "$(echo "$o" | awk '/^create:/ {print $(NF-1)}')" us
	rec softrdma_empty_poll $n "$(echo "$o" | awk '/^poll:/ {print $2}')" us
	rec softrdma_empty_poll_cpu $n "$(echo "$o" | awk '/^poll:/ {print $(NF-1)}')" us
done

echo "== raw TCP/UDP: qperf"
qperf >> "$log" 2>&1 &
qs=$!; sleep 0.5
mbps() { awk -v k="$1" '$1==k {v=$3; if ($4 ~ /^GB/) v*=1000; if ($4 ~ /^KB/) v/=1000; print v}'; }
usec() { awk '$1=="latency" {v=$3; if ($4 ~ /^ms/) v*=1000; if ($4 ~ /^ns/) v/=1000; print v}'; }
for sz in 4096 65536; do
	rec qperf_tcp_bw $sz "$(qperf -t $DUR -m $sz 127.0.0.1 tcp_bw 2>&1 | mbps bw)" MB/s
	# a UDP datagram carries at most 65507 bytes
	usz=$sz; [ $usz -gt 65000 ] && usz=65000
	rec qperf_udp_bw $sz "$(qperf -t $DUR -m $usz 127.0.0.1 udp_bw 2>&1 | mbps recv_bw)" MB/s
done
o=$(qperf -v -t $DUR -m 64 127.0.0.1 udp_bw 2>&1)
echo "$o" >> "$log"
rec qperf_udp_msg_rate 64 "$(echo "$o" | awk '$1=="msg_rate" {v=$3; if ($4 ~ /^K/) v/=1000; if ($4 ~ /^\/sec/) v/=1e6; print v}')" Mpps
rec qperf_tcp_lat 64 "$(qperf -t $DUR -m 64 127.0.0.1 tcp_lat 2>&1 | usec)" us
rec qperf_udp_lat 64 "$(qperf -t $DUR -m 64 127.0.0.1 udp_lat 2>&1 | usec)" us
# blocking sockets, as the event-mode rows' sleepers
rec qperf_tcp_lat 8 "$(qperf -t $DUR -m 8 127.0.0.1 tcp_lat 2>&1 | usec)" us
rec qperf_udp_lat 8 "$(qperf -t $DUR -m 8 127.0.0.1 udp_lat 2>&1 | usec)" us
kill $qs 2>/dev/null; wait $qs 2>/dev/null

echo "== raw UDP/TCP: a ping-pong spinning on its sockets (bench/sock_lat.c)"
# ib_write_lat's ends spin on memory; these spin on a non-blocking recv:
# the machine's own median and tail for a polled ping-pong, beside which
# softrdma's p99 is judged
for t in udp tcp; do
	p=$(bench_port)
	timeout 120 "$B/bin/sock_lat" -t $t -s 8 -p $p >> "$log" 2>&1 &
	s=$!; sleep 0.3
	o=$(timeout 120 "$B/bin/sock_lat" -t $t -s 8 -n $((ITERS * 4)) -p $p 127.0.0.1 2>&1)
	wait $s 2>/dev/null
	echo "$o" >> "$log"
	rec sock_${t}_lat_median 8 "$(echo "$o" | awk '$1=="sock_lat" {print $5}')" us
	rec sock_${t}_lat_p99 8 "$(echo "$o" | awk '$1=="sock_lat" {print $6}')" us
	rec sock_${t}_lat_p999 8 "$(echo "$o" | awk '$1=="sock_lat" {print $7}')" us
done

if command -v ucx_perftest >/dev/null; then
	echo "== UCX over TCP: ucx_perftest (UCX_TLS=tcp)"
	# columns of the Final line: iterations, latency typical/avg/overall (us),
	# bandwidth avg/overall (MB/s), message rate avg/overall (msg/s)
	o=$(UCX_TLS=tcp pair "" "" ucx_perftest -t ucp_am_lat -s 8 -n $((ITERS * 4)))
	rec ucx_tcp_am_lat 8 "$(echo "$o" | awk '$1=="Final:" {print $3}')" us
	for sz in 4096 65536; do
		o=$(UCX_TLS=tcp pair "" "" ucx_perftest -t ucp_put_bw -s $sz -n $((ITERS * 4)))
		rec ucx_tcp_put_bw $sz "$(echo "$o" | awk '$1=="Final:" {print $7}')" MB/s
	done
fi

if command -v iperf3 >/dev/null; then
	echo "== raw TCP: iperf3"
	p=$(bench_port)
	iperf3 -s -1 -p $p >> "$log" 2>&1 &
	sleep 0.5
	v=$(iperf3 -c 127.0.0.1 -p $p -t $DUR -J 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e6)' 2>/dev/null)
	rec iperf3_tcp_bw 131072 "$(printf '%.1f' "${v:-0}")" MB/s
	wait 2>/dev/null
fi
}

for round in $(seq 1 "$REPS"); do
	[ "$REPS" -gt 1 ] && echo "==== round $round of $REPS"
	measure_round
done
python3 "$here/bench/median.py" "$samples" "$csv"

python3 "$here/bench/ratios.py" "$csv" "$out/ratios.md" > "$out/ratios.txt"
cat "$out/ratios.txt"

if command -v gnuplot >/dev/null; then
	for op in write send read; do grep "^softrdma_${op}_bw," "$csv" | cut -d, -f2,3 | tr , ' ' > "$out/$op.dat"; done
	grep "^iwarp_write_bw," "$csv" | cut -d, -f2,3 | tr , ' ' > "$out/iwarp.dat"
	grep "^qperf_tcp_bw," "$csv" | cut -d, -f2,3 | tr , ' ' > "$out/tcp.dat"
	grep "^qperf_udp_bw," "$csv" | cut -d, -f2,3 | tr , ' ' > "$out/udp.dat"
	grep "^ucx_tcp_put_bw," "$csv" | cut -d, -f2,3 | tr , ' ' > "$out/ucx.dat"
	gnuplot <<GP
set terminal png size 900,560 noenhanced
set output "$out/bench.png"
set format x "%.0b%BB"
set title "softrdma on loopback: bandwidth by message size (one run)"
set logscale x 2
set xlabel "message size (bytes)"
set ylabel "MB/s"
set key left top
plot "$out/write.dat" w lp t "Soft-RoCE ib_write_bw", "$out/send.dat" w lp t "Soft-RoCE ib_send_bw", \
     "$out/read.dat" w lp t "Soft-RoCE ib_read_bw", "$out/iwarp.dat" w lp t "Soft-iWARP ib_write_bw -R", \
     "$out/tcp.dat" w lp dt 2 t "qperf tcp_bw", "$out/udp.dat" w lp dt 2 t "qperf udp_bw", \
     "$out/ucx.dat" w lp dt 3 t "UCX-tcp ucp_put_bw"
GP
fi
echo "results: $out"
