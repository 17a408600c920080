#!/usr/bin/env bash
# The software people run on RDMA, over softrdma beside the same program
# over TCP, on the same machine in one run.
#
#   bench/consumers.sh [--quick] [OUTDIR]
#                     (default bench/results/consumers-<timestamp>)
#
# On loopback and between two network namespaces (veth, MTU 1500; needs
# root), each row beside its own TCP mode:
#   mpi       Open MPI (tests/mpi/mpi_check): ping-pong 8 B, 64 KiB and
#             1 MiB (half round trip) and allreduce 1 MiB (per call), 2
#             and 4 ranks (across namespaces: half the ranks on each
#             host), pml ucx over Soft-RoCE (UCX_TLS=rc_v,self) beside pml
#             ob1 with the TCP btl (btl tcp,self: no shared memory either)
#             and pml ucx over UCX's TCP transport (tcp-ucx: UCX_TLS=tcp,self)
#   ucx       ucx_perftest am_lat and tag_lat (8 B), put_bw and get_bw
#             (64 KiB) over UCX_TLS=rc_v (rc_verbs, ud_verbs to wire up)
#             and ud_v on Soft-RoCE beside UCX_TLS=tcp
#   perftest  completions by event: ib_send_lat -e and ib_read_lat -e 8 B,
#             ib_send_bw -e 64 KiB (perftest has no -e for WRITE) on
#             Soft-RoCE and Soft-iWARP (-R),
#             beside qperf tcp_lat 8 B and tcp_bw 64 KiB (blocking sockets)
#   iser      bench/storage.sh (tgtd + libiscsi, iSER on Soft-RoCE and
#             Soft-iWARP beside iSCSI/TCP; 256 KiB sequential and 4 KiB
#             random READ and WRITE), run as a part of this run
#   ceph      bench/ceph.sh OUTDIR, if it is there (rados bench, async+rdma
#             beside async+posix); its results.csv is folded in when it has
#             this script's columns
# UCX and Open MPI do not use iWARP devices: those rows have no Soft-iWARP
# column.  Writes results.csv (topology,program,transport,metric,size,
# value,unit), ratios.txt and ratios.md (bench/consumers_ratios.py:
# softrdma over TCP, >= 1 is at least as fast, for latency too) and
# consumers.png.
# --quick: fewer iterations and 1 s bandwidth runs (about 6 minutes, the
# default about 12).  BENCH_SECTIONS (default "mpi ucx perftest iser ceph")
# picks parts, BENCH_TOPOLOGIES (default "loopback netns") the topologies.
# As root the whole run takes a network namespace of its own; SR_BUILD_DIR
# names the build (default build/).  Benchmarks are not tests: nothing
# here passes or fails.
set -uo pipefail
quick=${BENCH_QUICK:-0}
[ "${1:-}" = --quick ] && quick=1 && shift
export BENCH_QUICK=$quick
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
bench_start consumers "bench/consumers.sh [--quick] [OUTDIR]" "topology,program,transport,metric,size,value,unit" "$@"
SECTIONS=" ${BENCH_SECTIONS:-mpi ucx perftest iser ceph} "
want() { case $SECTIONS in *" $1 "*) return 0 ;; esac; return 1; }
TOPOS=${BENCH_TOPOLOGIES:-loopback netns}
if [ "$quick" = 1 ]; then
	DUR=1 LAT_ITERS=2000 BW_ITERS=500 MPI_SCALE=1
else
	DUR=${BENCH_SECONDS:-3} LAT_ITERS=${BENCH_ITERS:-10000} BW_ITERS=2000 MPI_SCALE=4
fi

# shellcheck source=tests/conformance/lib.sh
. "$here/tests/conformance/lib.sh"
# shellcheck disable=SC2034 # read by lib.sh
SR_TEST=bench-consumers
SR_PRIVATE_NETNS=0
sr_need_cmd python3
sr_init roce >>"$log"
MPI_CHECK=$SR_BUILD_DIR/tests/mpi_check

nfailed=0
# rec TOPOLOGY PROGRAM TRANSPORT METRIC SIZE VALUE UNIT; an empty VALUE is
# a run that failed: recorded empty (ratios skip it), its output in the log
rec() {
	echo "$1,$2,$3,$4,$5,$6,$7" >>"$csv"
	[ -n "$6" ] || nfailed=$((nfailed + 1))
	printf '  %-8s %-8s %-13s %-12s %8s %10s %s\n' "$1" "$2" "$3" "$4" "$5" "${6:-FAILED}" "$7"
}

# The hosts of a topology: SRV and CLI (arrays) run a command through
# softrdma-run with a Soft-RoCE device, SRV_IW and CLI_IW with a
# Soft-iWARP one, SRV_NS where the server runs, ADDR its address, NETDEV
# the netdev both devices are on.
# shellcheck disable=SC2034 # the arrays are used through namerefs
hosts() {
	if [ "$1" = loopback ]; then
		SRV=("$SR_RUN") CLI=("$SR_RUN") SRV_NS='' ADDR=127.0.0.1 NETDEV=lo
		sr_write_conf "$SR_TMP/iw-lo.conf" lo iwarp
		SRV_IW=(env SOFTRDMA_CONF="$SR_TMP/iw-lo.conf" "$SR_RUN") CLI_IW=("${SRV_IW[@]}")
		PLAIN_SRV=() PLAIN_CLI=()
	else
		# shellcheck disable=SC2119 # RoCE, the default
		[ -n "${SR_NS_A:-}" ] || sr_netns_setup >>"$log"
		sr_netns_hosts iwarp
		SRV=("${SR_AT_B[@]}") CLI=("${SR_AT_A[@]}") SRV_NS=$SR_NS_B ADDR=$SR_IP_B NETDEV=$SR_VETH_A
		SRV_IW=("${HOST_B[@]}") CLI_IW=("${HOST_A[@]}")
		PLAIN_SRV=(ip netns exec "$SR_NS_B") PLAIN_CLI=(ip netns exec "$SR_NS_A")
	fi
}

# ---- Open MPI ------------------------------------------------------------------

# mpi_job TOPOLOGY NP TRANSPORT: one mpirun of every timed mpi_check run
mpi_job() {
	local topo=$1 np=$2 tr=$3 o l sz m v
	local -a how host
	local pp_small=$((LAT_ITERS / 2)) pp_64k=$((BW_ITERS * MPI_SCALE / 4)) pp_1m=$((BW_ITERS * MPI_SCALE / 40))
	local ar=$((BW_ITERS * MPI_SCALE / 40))
	# shellcheck disable=SC2054 # the commas are Open MPI's
	case $tr in
	softrdma-roce) how=(--mca pml ucx -x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=rxe0:1) ;;
	tcp) how=(--mca pml ob1 --mca btl tcp,self) ;;
	tcp-ucx) how=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=tcp,self) ;;
	esac
	if [ "$topo" = loopback ]; then
		host=(--host "localhost:$np")
		[ "$tr" = tcp ] && how+=(--mca btl_tcp_if_include lo)
		[ "$tr" = tcp-ucx ] && how+=(-x UCX_NET_DEVICES=lo)
		o=$(timeout -k 5 300 "$SR_RUN" mpirun --allow-run-as-root -np "$np" "${host[@]}" "${how[@]}" "$MPI_CHECK" \
			--pingpong 8 "$pp_small" --pingpong 65536 "$pp_64k" --pingpong 1048576 "$pp_1m" \
			--allreduce 1048576 "$ar" 2>&1)
	else
		local subnet=${SR_IP_A%.*}.0/24
		[ -x "$SR_TMP/mpi-agent.sh" ] || sr_mpi_agent "$SR_TMP/mpi-agent.sh"
		host=(--host "$SR_IP_A:$((np / 2)),$SR_IP_B:$((np / 2))" --mca plm_rsh_agent "$SR_TMP/mpi-agent.sh"
			--mca oob_tcp_if_include "$subnet")
		[ "$tr" = tcp ] && how+=(--mca btl_tcp_if_include "$subnet")
		[ "$tr" = tcp-ucx ] && how+=(-x UCX_NET_DEVICES="$SR_VETH_A,$SR_VETH_B")
		o=$(timeout -k 5 300 "${SR_AT_A[@]}" mpirun --allow-run-as-root -np "$np" "${host[@]}" "${how[@]}" \
			"$MPI_CHECK" --pingpong 8 "$pp_small" --pingpong 65536 "$pp_64k" --pingpong 1048576 "$pp_1m" \
			--allreduce 1048576 "$ar" 2>&1)
	fi
	{
		echo "== mpirun $topo -np $np $tr"
		echo "$o"
	} >>"$log"
	for m in pingpong,8 pingpong,65536 pingpong,1048576 allreduce,1048576; do
		l=$(echo "$o" | grep "^$m,")
		sz=${m#*,}
		v=$(echo "$l" | cut -d, -f4)
		rec "$topo" "mpi-np$np" "$tr" "${m%,*}_lat" "$sz" "$v" us
		[ "$sz" -gt 8 ] && rec "$topo" "mpi-np$np" "$tr" "${m%,*}_bw" "$sz" "$(echo "$l" | cut -d, -f5)" MB/s
	done
}

mpi_section() {
	local np tr
	[ -x "$MPI_CHECK" ] && command -v mpirun >/dev/null || {
		echo "  (no mpirun or mpi_check: MPI skipped)"
		return
	}
	for np in 2 4; do
		for tr in softrdma-roce tcp tcp-ucx; do
			mpi_job "$1" "$np" "$tr"
		done
	done
}

# ---- UCX -----------------------------------------------------------------------

ucx_section() {
	local topo=$1 tls tr dev f
	command -v ucx_perftest >/dev/null || return
	for tls in rc_v ud_v tcp; do
		tr=softrdma-$tls dev=rxe0:1
		[ "$tls" = tcp ] && tr=tcp dev=$NETDEV
		[ "$topo" = netns ] && [ "$tls" = tcp ] && dev=$SR_VETH_A,$SR_VETH_B
		f=$(bench_ucx "$log" SRV CLI "$SRV_NS" "$ADDR" "$tls" "$dev" ucp_am_lat 8 "$LAT_ITERS")
		rec "$topo" ucx "$tr" am_lat 8 "$(echo "$f" | awk '{print $3}')" us
		f=$(bench_ucx "$log" SRV CLI "$SRV_NS" "$ADDR" "$tls" "$dev" tag_lat 8 "$LAT_ITERS")
		rec "$topo" ucx "$tr" tag_lat 8 "$(echo "$f" | awk '{print $3}')" us
		f=$(bench_ucx "$log" SRV CLI "$SRV_NS" "$ADDR" "$tls" "$dev" ucp_put_bw 65536 "$BW_ITERS")
		rec "$topo" ucx "$tr" put_bw 65536 "$(echo "$f" | awk '{print $7}')" MB/s
		f=$(bench_ucx "$log" SRV CLI "$SRV_NS" "$ADDR" "$tls" "$dev" ucp_get 65536 "$BW_ITERS")
		rec "$topo" ucx "$tr" get_bw 65536 "$(echo "$f" | awk '{print $7}')" MB/s
	done
}

# ---- perftest by event, qperf ---------------------------------------------------

# pt SERVER-AT CLIENT-AT LISTEN-KIND TOOL ARGS...: one perftest pair on a
# free port (LISTEN-KIND cm: for an rdma_cm listen on RoCE, '' for a TCP
# port); prints the client's output
pt() {
	local -n pt_s=$1 pt_c=$2
	local kind=$3 p s o
	shift 3
	p=$(sr_free_port "$SRV_NS")
	timeout -k 5 120 "${pt_s[@]}" "$@" -p "$p" >>"$log" 2>&1 </dev/null &
	s=$!
	# perftest without -R listens on its TCP side channel, with -R through rdma_cm
	sr_wait_listen "$kind$p" "$s" "$SRV_NS" || echo "$1 did not listen on $kind$p" >>"$log"
	o=$(timeout -k 5 120 "${pt_c[@]}" "$@" -p "$p" "$ADDR" 2>&1 </dev/null)
	wait "$s" 2>/dev/null
	{
		echo "== $*"
		echo "$o"
	} >>"$log"
	echo "$o"
}
# perftest columns: lat: size iters min max typical avg stdev p99 p99.9;
# bw: size iters peak avg msgrate
typical() { awk -v s="$1" '$1 == s && NF >= 9 { print $5 }' | tail -n 1; }
bw_avg() { awk -v s="$1" '$1 == s && NF >= 5 { print $4 }' | tail -n 1; }
qperf_val() {
	awk '$1 == "latency" || $1 == "bw" { v = $3; if ($4 ~ /^ms/) v *= 1000; if ($4 ~ /^ns/) v /= 1000;
		if ($4 ~ /^GB/) v *= 1000; if ($4 ~ /^KB/) v /= 1000; print v }'
}

perftest_section() {
	local topo=$1 tr kind s qp o
	# perftest has no duration mode with events: a count
	local -a lat=(-s 8 -n "$LAT_ITERS") bw=(-s 65536 -n $((BW_ITERS * 10)))
	for tr in softrdma-roce softrdma-iwarp; do
		if [ "$tr" = softrdma-roce ]; then
			o=(SRV CLI "" -x 0)
		else
			o=(SRV_IW CLI_IW "" -R)
		fi
		rec "$topo" perftest "$tr" send_lat_ev 8 "$(pt "${o[@]:0:3}" ib_send_lat "${o[@]:3}" -e "${lat[@]}" | typical 8)" us
		rec "$topo" perftest "$tr" read_lat_ev 8 "$(pt "${o[@]:0:3}" ib_read_lat "${o[@]:3}" -e "${lat[@]}" | typical 8)" us
		rec "$topo" perftest "$tr" send_bw_ev 65536 "$(pt "${o[@]:0:3}" ib_send_bw "${o[@]:3}" -e "${bw[@]}" |
			bw_avg 65536)" MB/s
	done
	# the polling figure beside the event one: what the wake-up costs
	rec "$topo" perftest softrdma-roce send_lat_poll 8 "$(pt SRV CLI "" ib_send_lat -x 0 "${lat[@]}" | typical 8)" us
	qp=$(sr_free_port "$SRV_NS")
	"${PLAIN_SRV[@]}" qperf -lp "$qp" >>"$log" 2>&1 &
	s=$!
	sr_wait_listen "$qp" "$s" "$SRV_NS"
	rec "$topo" perftest tcp send_lat_ev 8 "$("${PLAIN_CLI[@]}" qperf -lp "$qp" -t "$DUR" -m 8 "$ADDR" tcp_lat 2>>"$log" |
		qperf_val)" us
	rec "$topo" perftest tcp read_lat_ev 8 "$(awk -F, -v t="$topo" '$1 == t && $2 == "perftest" && $3 == "tcp" &&
		$4 == "send_lat_ev" { print $6 }' "$csv")" us
	rec "$topo" perftest tcp send_bw_ev 65536 "$("${PLAIN_CLI[@]}" qperf -lp "$qp" -t "$DUR" -m 65536 "$ADDR" tcp_bw \
		2>>"$log" | qperf_val)" MB/s
	kill "$s" 2>/dev/null
	wait "$s" 2>/dev/null
}

# ---- iSER (bench/storage.sh), Ceph (bench/ceph.sh) -----------------------------

# fold FILE PROGRAM: a part's results.csv (topology,transport,metric,
# value,unit) into ours; its TCP transport (iscsi-tcp, async-posix) is "tcp"
fold() {
	[ -f "$1" ] || return
	awk -F, -v p="$2" 'NR > 1 { tr = $2; if (tr == "iscsi-tcp" || tr ~ /posix/) tr = "tcp";
		printf "%s,%s,%s,%s,,%s,%s\n", $1, p, tr, $3, $4, $5 }' "$1" >>"$csv"
}

iser_section() {
	echo "== iSER beside iSCSI/TCP: bench/storage.sh (its own log in $out/storage/)"
	SR_PRIVATE_NETNS=0 BENCH_SECONDS=$DUR bash "$here/bench/storage.sh" "$out/storage" | sed 's/^/  /'
	fold "$out/storage/results.csv" iscsi
}

# The Ceph hook: bench/ceph.sh OUTDIR (rados bench over async+rdma beside
# async+posix) when it exists; BENCH_SECONDS is passed on.
ceph_section() {
	if [ ! -f "$here/bench/ceph.sh" ]; then
		echo "== Ceph: no bench/ceph.sh here: skipped"
		return
	fi
	echo "== Ceph: bench/ceph.sh (its own log in $out/ceph/)"
	SR_PRIVATE_NETNS=0 BENCH_SECONDS=$DUR bash "$here/bench/ceph.sh" "$out/ceph" | sed 's/^/  /'
	head -n 1 "$out/ceph/results.csv" 2>/dev/null | grep -q '^topology,transport,metric,value,unit' &&
		fold "$out/ceph/results.csv" ceph
}

for topo in $TOPOS; do
	if [ "$topo" = netns ] && ! { [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1; }; then
		echo "== netns skipped (needs root and ip netns)"
		continue
	fi
	hosts "$topo"
	want mpi && echo "== $topo: Open MPI" && mpi_section "$topo"
	want ucx && echo "== $topo: UCX ucx_perftest" && ucx_section "$topo"
	want perftest && echo "== $topo: perftest by event, qperf" && perftest_section "$topo"
done
want iser && iser_section
want ceph && ceph_section

python3 "$here/bench/consumers_ratios.py" "$csv" "$out" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" \
	>"$out/ratios.txt"
cat "$out/ratios.txt"

if command -v gnuplot >/dev/null && [ -s "$out/ratios.dat" ]; then
	gnuplot <<GP 2>>"$log" || echo "gnuplot failed: see $log"
set terminal png size 1400,$((300 + 14 * $(wc -l <"$out/ratios.dat"))) noenhanced
set output "$out/consumers.png"
set title "softrdma / TCP, same run ($(date +%F), load $load0): right of 1.0 is at least as fast"
set style fill solid 0.7
set yrange [-1:*] reverse
set ytics font ",8"
set xlabel "softrdma vs TCP (latency: TCP / softrdma)"
set logscale x 2
set grid x
set arrow from 1, graph 0 to 1, graph 1 nohead lw 2 lc rgb "red"
plot "$out/ratios.dat" using (1):0:(\$2 < 1 ? \$2 : 1):(\$2 < 1 ? 1 : \$2):(\$0 - 0.4):(\$0 + 0.4):ytic(1) \\
	with boxxyerror notitle
GP
fi
[ "$nfailed" -eq 0 ] || echo "$nfailed measurements failed (empty in results.csv): see $log"
echo "results: $out"
