#!/usr/bin/env bash
# Middleware over softrdma beside the same programs over TCP, in one run.
#
#   bench/middleware.sh [OUTDIR]     (default bench/results/middleware-<timestamp>)
#
# On loopback:
#   UCX ucx_perftest ucp_put_bw (64 KiB) and ucp_am_lat (8 B) over
#     softrdma Soft-RoCE (UCX_TLS=rc_v) and over UCX's own TCP transport
#     (UCX_TLS=tcp);
#   an MPI ping-pong (tests/mpi/mpi_check --pingpong, 8 B and 64 KiB) with
#     Open MPI's pml ucx over softrdma Soft-RoCE and with its TCP btl
#     (pml ob1, btl tcp,self on lo).
# Soft-iWARP has no column: UCX does not use iWARP devices (on the
# kernel's siw neither), and Debian's Open MPI has no rdma_cm connection
# method in its openib btl, which iWARP needs.
# Writes results.csv (metric,transport,size,value,unit), ratios.txt and
# bench.png (gnuplot).  BENCH_ITERS (default 20000) per latency run.
# Benchmarks are not tests: nothing here passes or fails.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
B=${SR_BUILD_DIR:-$here/build}
out=${1:-$here/bench/results/middleware-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
RUN="$B/bin/softrdma-run"
ITERS=${BENCH_ITERS:-20000}
MPI_CHECK=$B/tests/mpi_check
csv=$out/results.csv
log=$out/log.txt
echo "metric,transport,size,value,unit" > "$csv"
: > "$log"
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = lo\n' > "$out/roce.conf"
export SOFTRDMA_CONF=$out/roce.conf

rec() { echo "$1,$2,$3,$4,$5" >> "$csv"; printf '  %-12s %-14s %6s  %10s %s\n' "$1" "$2" "$3" "$4" "$5"; }

# shellcheck source=tests/conformance/lib.sh
. "$here/tests/conformance/lib.sh" # sr_free_port, sr_wait_listen for bench_ucx
# shellcheck disable=SC2034 # used through a nameref
at_run=("$RUN")
# ucx TLS TEST SIZE ITERS: a ucx_perftest pair on loopback; its Final line
ucx() { bench_ucx "$log" at_run at_run '' 127.0.0.1 "$1" rxe0:1,lo "$2" "$3" "$4"; }

echo "== UCX"
for tls in rc_v tcp; do
	name=softrdma-roce; [ $tls = tcp ] && name=ucx-tcp
	# Final: iterations, lat 50%, lat avg, lat overall, bw avg, bw overall, ...
	rec put_bw "$name" 65536 "$(ucx "$tls" ucp_put_bw 65536 $((ITERS / 4)) | awk '{print $7}')" MB/s
	rec am_lat "$name" 8 "$(ucx "$tls" ucp_am_lat 8 "$ITERS" | awk '{print $3}')" us
done

echo "== Open MPI ping-pong"
mpi() {
	local o; o=$(timeout 300 "$RUN" mpirun --allow-run-as-root -np 2 "$@" 2>&1)
	{ echo "== mpirun $*"; echo "$o"; } >> "$log"
	echo "$o" | grep '^pingpong,'
}
for sz in 8 65536; do
	n=$ITERS; [ $sz -gt 8 ] && n=$((ITERS / 4))
	l=$(mpi --mca pml ucx -x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=rxe0:1 "$MPI_CHECK" --pingpong $sz $n)
	rec mpi_lat softrdma-roce $sz "$(echo "$l" | cut -d, -f4)" us
	[ $sz -gt 8 ] && rec mpi_bw softrdma-roce $sz "$(echo "$l" | cut -d, -f5)" MB/s
	l=$(mpi --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo "$MPI_CHECK" --pingpong $sz $n)
	rec mpi_lat ompi-tcp-btl $sz "$(echo "$l" | cut -d, -f4)" us
	[ $sz -gt 8 ] && rec mpi_bw ompi-tcp-btl $sz "$(echo "$l" | cut -d, -f5)" MB/s
done

python3 - "$csv" > "$out/ratios.txt" <<'PY'
import csv, sys
d = {}
for r in csv.DictReader(open(sys.argv[1])):
    try: d[(r["metric"], r["transport"], r["size"])] = float(r["value"])
    except (TypeError, ValueError): pass
rows = [("UCX ucp_put_bw 64 KiB (MB/s)", "put_bw", "65536", "ucx-tcp", True),
        ("UCX ucp_am_lat 8 B (us)", "am_lat", "8", "ucx-tcp", False),
        ("MPI ping-pong 8 B, half round trip (us)", "mpi_lat", "8", "ompi-tcp-btl", False),
        ("MPI ping-pong 64 KiB, half round trip (us)", "mpi_lat", "65536", "ompi-tcp-btl", False),
        ("MPI ping-pong 64 KiB (MB/s)", "mpi_bw", "65536", "ompi-tcp-btl", True)]
print(f"{'':44s}{'softrdma RoCE':>14s}{'TCP':>10s}  softrdma vs TCP")
for label, m, s, alt, higher in rows:
    a, b = d.get((m, "softrdma-roce", s)), d.get((m, alt, s))
    if a is None or b is None:
        print(f"{label:44s}{'n/a':>14s}{'n/a':>10s}"); continue
    ratio = a / b if higher else b / a
    print(f"{label:44s}{a:14.1f}{b:10.1f}  {ratio:.2f}x {'faster' if ratio >= 1 else 'slower'}")
PY
cat "$out/ratios.txt"

if command -v gnuplot >/dev/null; then
	awk -F, 'NR>1 && $1=="am_lat"  {print $2, $4}' "$csv" > "$out/am_lat.dat"
	awk -F, 'NR>1 && $1=="put_bw"  {print $2, $4}' "$csv" > "$out/put_bw.dat"
	awk -F, 'NR>1 && $1=="mpi_lat" && $3==8 {print $2, $4}' "$csv" > "$out/mpi_lat.dat"
	awk -F, 'NR>1 && $1=="mpi_bw"  {print $2, $4}' "$csv" > "$out/mpi_bw.dat"
	gnuplot <<GP 2>>"$log"
set terminal png size 1200,800
set output "$out/bench.png"
set multiplot layout 2,2 title "softrdma (Soft-RoCE, lo) vs TCP, one run"
set style data histograms
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
set title "UCX ucp_put_bw 64 KiB (MB/s)"
plot "$out/put_bw.dat" using 2:xtic(1) notitle
set title "UCX ucp_am_lat 8 B (us)"
plot "$out/am_lat.dat" using 2:xtic(1) notitle
set title "MPI ping-pong 8 B (us, half round trip)"
plot "$out/mpi_lat.dat" using 2:xtic(1) notitle
set title "MPI ping-pong 64 KiB (MB/s)"
plot "$out/mpi_bw.dat" using 2:xtic(1) notitle
unset multiplot
GP
fi
echo "results: $out"
