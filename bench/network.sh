#!/usr/bin/env bash
# Soft-RoCE on a real network: loss, round-trip time and a shared
# bottleneck, beside Soft-iWARP and the kernel's TCP, in one run.
#
#   bench/network.sh [OUTDIR]    (default bench/results/network-<timestamp>)
#
# Two hosts: network namespaces A and B joined by a veth pair (MTU 1500,
# RoCE MTU 1024), as tests/conformance/lib.sh makes them (needs root).
# Every transfer goes from A to B, 64 KiB messages for BENCH_SECONDS
# (default 5):
#   Soft-RoCE  ib_write_bw and ib_read_bw (A reads from B: its data goes
#              B -> A, and its loss is at A)
#   Soft-iWARP ib_write_bw -R
#   TCP        iperf3
# and measures
#   loss       nftables in the data's receiver drops 0, 0.1, 1, 2, 5 and
#              10% of the TCP and UDP packets that reach it: goodput and
#              its fraction of the same transport's lossless goodput
#   RTT        0, 0.1, 1 and 10 ms added to the round trip: softrdma's
#              delay fault (SOFTRDMA_FAULTS delay=RTT/2 in both
#              processes); the kernel has no netem here, so TCP is not
#              measured (Soft-iWARP's delay is before its TCP socket:
#              TCP's own round trip stays the veth's)
#   bottleneck tc tbf (rate R, burst R x 256 us, limit R x 1.2 ms: tail
#              drop, as a switch port) on both veth ends, R = 1 and 10
#              Gbit/s: each transport alone, then Soft-RoCE beside one and
#              beside four TCP flows started together: each flow's share of
#              the link and Jain's fairness index
#   iSER       tgtd's iSER target on B (Soft-RoCE), sr-iscsi-io on A,
#              256 KiB sequential WRITE and READ, 16 in flight, lossless and
#              with 2% of the UDP 4791 packets dropped both ways at B
# Writes results.csv (section,transport,condition,value,unit), summary.txt
# (the tables with ratios) and network.png.  Benchmarks are not tests:
# nothing here passes or fails.  Takes about 8 minutes at 5 s a run.
# BENCH_SECTIONS (default "loss rtt bottleneck iser") picks the parts,
# BENCH_RATES (default "1000 10000", Mbit/s) the bottleneck's rates.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
[ "$(id -u)" -eq 0 ] || {
	echo "bench/network.sh needs root (network namespaces, nftables, tc)" >&2
	exit 77
}
bench_start network "bench/network.sh [OUTDIR]" "section,transport,condition,value,unit" "$@"
DUR=${BENCH_SECONDS:-5}
SECTIONS=" ${BENCH_SECTIONS:-loss rtt bottleneck iser} "
want() { case $SECTIONS in *" $1 "*) return 0 ;; esac; return 1; }

# shellcheck source=tests/conformance/lib.sh
. "$here/tests/conformance/lib.sh"
# shellcheck disable=SC2034 # read by lib.sh
SR_TEST=bench-network
SR_PRIVATE_NETNS=0
sr_need_cmd ib_write_bw ib_read_bw iperf3 nft tc python3
sr_init roce >>"$log"
sr_netns_setup >>"$log"
sr_netns_hosts iwarp
# shellcheck disable=SC2034 # used through namerefs
iw_a=("${HOST_A[@]}")
# shellcheck disable=SC2034
iw_b=("${HOST_B[@]}")
at_a() { ip netns exec "$SR_NS_A" "$@"; }
at_b() { ip netns exec "$SR_NS_B" "$@"; }

nfailed=0
# rec SECTION TRANSPORT CONDITION VALUE UNIT: empty VALUE = failed run
rec() {
	echo "$1,$2,$3,$4,$5" >>"$csv"
	[ -n "$4" ] || nfailed=$((nfailed + 1))
	printf '  %-10s %-11s %-22s %10s %s\n' "$1" "$2" "$3" "${4:-FAILED}" "$5"
}

# ---- the network's conditions -----------------------------------------------

# loss NS PERMYRIAD [PROTO]: drop that many in 10,000 of the TCP and UDP
# packets (PROTO udp: only UDP 4791) arriving in NS; 0 removes the rule
loss() {
	local ns=$1 n=$2 what='meta l4proto { tcp, udp }'
	[ "${3:-}" = udp ] && what='udp dport 4791'
	ip netns exec "$ns" nft delete table inet srbench 2>/dev/null
	[ "$n" = 0 ] && return
	ip netns exec "$ns" nft -f - <<NFT
table inet srbench {
	chain in { type filter hook input priority 0; $what numgen random mod 10000 < $n drop; }
	chain out { type filter hook output priority 0; }
}
NFT
	[ "${3:-}" = udp ] && ip netns exec "$ns" nft add rule inet srbench out "$what numgen random mod 10000 < $n drop"
}

# bottleneck MBIT: tbf on both veth ends (0 removes it)
bottleneck() {
	local r=$1
	at_a tc qdisc del dev "$SR_VETH_A" root 2>/dev/null
	at_b tc qdisc del dev "$SR_VETH_B" root 2>/dev/null
	[ "$r" = 0 ] && return
	# burst: 256 us at the rate (32 KB at 1 Gbit/s); queue: 1.2 ms (150 KB)
	local burst=$((r * 32)) limit=$((r * 150))
	at_a tc qdisc add dev "$SR_VETH_A" root tbf rate "${r}mbit" burst "$burst" limit "$limit"
	at_b tc qdisc add dev "$SR_VETH_B" root tbf rate "${r}mbit" burst "$burst" limit "$limit"
}

# ---- one flow ----------------------------------------------------------------

# start_server VAR NS LISTEN CMD...: CMD in the background, waits until it
# listens (LISTEN as sr_wait_listen takes it); VAR gets its pid
start_server() {
	local -n pidv=$1
	local ns=$2 listen=$3
	shift 3
	sr_new_log "$@" >>"$log"
	timeout -k 5 $((DUR + 60)) "$@" >"$SR_OUTFILE" 2>&1 </dev/null &
	pidv=$!
	SR_PIDS+=("$pidv")
	echo "== server: $*" >>"$log"
	sr_wait_listen "$listen" "$pidv" "$ns" && return 0
	cat "$SR_OUTFILE" >>"$log"
	return 1
}

# The flows: flow_server KIND [SOFTRDMA-RUN-OPTIONS] prints the command of
# the server of a flow of KIND on B, listening on TCP port $P (perftest's
# side channel, rdma_cm's port on iWARP, iperf3's); flow_client KIND
# [OPTIONS [MORE-SECONDS]] its client's on A.
flow_server() {
	case $1 in
	roce-write) echo "${SR_AT_B[*]} ${2:-} ib_write_bw -x 0 -s 65536 -D $DUR --report_gbits -p $P" ;;
	roce-read) echo "${SR_AT_B[*]} ${2:-} ib_read_bw -x 0 -s 65536 -D $DUR --report_gbits -p $P" ;;
	iwarp-write) echo "${iw_b[*]} ${2:-} ib_write_bw -R -s 65536 -D $DUR --report_gbits -p $P" ;;
	tcp*) echo "ip netns exec $SR_NS_B iperf3 -s -1 -p $P" ;;
	esac
}
flow_client() {
	local streams=${1#tcp}
	case $1 in
	roce-write | roce-read | iwarp-write) echo "$(flow_server "$1" "${2:-}" | sed "s|${SR_NS_B}|${SR_NS_A}|; s|softrdma-b.conf|softrdma-a.conf|; s|iw-b.conf|iw-a.conf|") $SR_IP_B" ;;
	tcp*) echo "ip netns exec $SR_NS_A iperf3 -c $SR_IP_B -p $P -t $((DUR + ${3:-0})) -P ${streams:-1} -J" ;;
	esac
}
# flow_mbit KIND OUTFILE [FROM TO]: goodput in Mbit/s; for TCP between
# seconds FROM and TO of its run if given (the intervals iperf3 reports)
flow_mbit() {
	case $1 in
	tcp*)
		python3 - "$2" "${3:-}" "${4:-}" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
a, b = sys.argv[2], sys.argv[3]
if a:
    iv = [i["sum"] for i in j.get("intervals", []) if i["sum"]["start"] >= float(a) - 0.01 and i["sum"]["end"] <= float(b) + 0.01]
    if iv:
        print(f'{sum(x["bytes"] for x in iv) * 8 / sum(x["seconds"] for x in iv) / 1e6:.0f}')
else:
    print(f'{j["end"]["sum_received"]["bits_per_second"] / 1e6:.0f}')
PY
		;;
	*) awk '$1 == 65536 && NF >= 5 { printf "%.0f\n", $4 * 1000 }' "$2" | tail -n 1 ;;
	esac
}
# flow_streams OUTFILE FROM TO: each TCP stream's Mbit/s over that time
flow_streams() {
	python3 - "$1" "$2" "$3" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
a, b = float(sys.argv[2]), float(sys.argv[3])
per = {}
for i in j.get("intervals", []):
    for s in i["streams"]:
        if s["start"] >= a - 0.01 and s["end"] <= b + 0.01:
            t = per.setdefault(s["socket"], [0, 0])
            t[0] += s["bytes"]
            t[1] += s["seconds"]
print(" ".join(f"{v[0] * 8 / v[1] / 1e6:.0f}" for v in per.values() if v[1]))
PY
}

# one KIND [FAULTS]: one flow alone; prints its Mbit/s (empty if it failed)
one() {
	local kind=$1 faults=${2:-} spid cout
	local fs=""
	[ -n "$faults" ] && fs="--faults $faults"
	P=$(sr_free_port "$SR_NS_B")
	# shellcheck disable=SC2046 # the commands are word lists
	start_server spid "$SR_NS_B" "$P" $(flow_server "$kind" "$fs") || {
		sr_reap "$spid"
		return
	}
	sr_new_log client >>"$log"
	cout=$SR_OUTFILE
	echo "== client: $(flow_client "$kind" "$fs")" >>"$log"
	# shellcheck disable=SC2046
	timeout -k 5 $((DUR + 60)) $(flow_client "$kind" "$fs") >"$cout" 2>&1 </dev/null
	wait "$spid" 2>/dev/null
	sr_forget "$spid"
	cat "$cout" >>"$log"
	flow_mbit "$kind" "$cout"
}

# ---- loss ----------------------------------------------------------------------

want loss && echo "== loss: drop in the data's receiver, $DUR s a run"
declare -A base
want loss && for rate in 0 0.1 1 2 5 10; do
	n=$(awk -v r="$rate" 'BEGIN { printf "%d", r * 100 }')
	for kind in roce-write roce-read iwarp-write tcp; do
		ns=$SR_NS_B
		[ "$kind" = roce-read ] && ns=$SR_NS_A
		loss "$ns" "$n"
		v=$(one "$kind")
		loss "$ns" 0
		[ "$rate" = 0 ] && base[$kind]=$v
		rec loss "$kind" "$rate%" "$v" Mbit/s
		if [ "$rate" != 0 ] && [ -n "$v" ] && [ -n "${base[$kind]}" ]; then
			rec loss-ratio "$kind" "$rate%" "$(awk -v a="$v" -v b="${base[$kind]}" 'BEGIN { printf "%.3f", a / b }')" "of 0%"
		fi
	done
done

# ---- round-trip time -------------------------------------------------------------

want rtt && echo "== added round-trip time (softrdma's delay fault, RTT/2 in each process)"
want rtt && for rtt in 0 0.1 1 10; do
	half=$(awk -v r="$rtt" 'BEGIN { printf "%dus", r * 500 }')
	for kind in roce-write roce-read iwarp-write; do
		if [ "$rtt" = 0 ]; then
			v=$(one "$kind")
		else
			v=$(one "$kind" "delay=$half")
		fi
		rec rtt "$kind" "+${rtt}ms" "$v" Mbit/s
	done
done

# ---- bottleneck --------------------------------------------------------------

# share RATE NTCP: Soft-RoCE WRITE beside NTCP TCP flows at RATE Mbit/s
share() {
	local r=$1 ntcp=$2 rpid tpid rcout tcout roce tcp streams
	local pr pt
	P=$(sr_free_port "$SR_NS_B")
	pr=$P
	# shellcheck disable=SC2046
	start_server rpid "$SR_NS_B" "$pr" $(flow_server roce-write) || return
	P=$(sr_free_port "$SR_NS_B")
	pt=$P
	# shellcheck disable=SC2046
	start_server tpid "$SR_NS_B" "$pt" $(flow_server tcp) || return
	sr_new_log tcp-client >>"$log"
	tcout=$SR_OUTFILE
	sr_new_log roce-client >>"$log"
	rcout=$SR_OUTFILE
	# TCP runs 3 s longer, started first: its intervals 1..DUR+1 are
	# while the RDMA flow measures (perftest sets up, then counts DUR s)
	P=$pt
	# shellcheck disable=SC2046
	timeout -k 5 $((DUR + 60)) $(flow_client "tcp$ntcp" "" 3) >"$tcout" 2>&1 </dev/null &
	local tc=$!
	P=$pr
	# shellcheck disable=SC2046
	timeout -k 5 $((DUR + 60)) $(flow_client roce-write) >"$rcout" 2>&1 </dev/null
	wait "$tc" "$rpid" "$tpid" 2>/dev/null
	sr_forget "$rpid"
	sr_forget "$tpid"
	cat "$rcout" "$tcout" >>"$log"
	roce=$(flow_mbit roce-write "$rcout")
	tcp=$(flow_mbit tcp "$tcout" 1 $((DUR + 1)))
	streams=$(flow_streams "$tcout" 1 $((DUR + 1)))
	rec bottleneck "roce+${ntcp}tcp" "${r}M roce" "$roce" Mbit/s
	rec bottleneck "roce+${ntcp}tcp" "${r}M tcp" "$tcp" Mbit/s
	rec bottleneck "roce+${ntcp}tcp" "${r}M tcp streams" "${streams// /;}" Mbit/s
	if [ -n "$roce" ] && [ -n "$tcp" ]; then
		rec bottleneck "roce+${ntcp}tcp" "${r}M roce share" "$(awk -v a="$roce" -v r="$r" 'BEGIN { printf "%.3f", a / r }')" "of link"
		rec bottleneck "roce+${ntcp}tcp" "${r}M tcp share" "$(awk -v a="$tcp" -v r="$r" 'BEGIN { printf "%.3f", a / r }')" "of link"
		# Jain's index over every flow: (sum x)^2 / (n sum x^2)
		rec bottleneck "roce+${ntcp}tcp" "${r}M jain" "$(echo "$roce $streams" | awk '{ s = 0; q = 0; for (i = 1; i <= NF; i++) { s += $i; q += $i * $i } printf "%.3f", s * s / (NF * q) }')" index
	fi
}

want bottleneck && echo "== bottleneck: tbf on both veth ends"
want bottleneck && for r in ${BENCH_RATES:-1000 10000}; do
	bottleneck "$r"
	for kind in roce-write roce-read iwarp-write tcp; do
		v=$(one "$kind")
		rec bottleneck "$kind" "${r}M alone" "$v" Mbit/s
		[ -n "$v" ] && rec bottleneck "$kind" "${r}M alone share" "$(awk -v a="$v" -v r="$r" 'BEGIN { printf "%.3f", a / r }')" "of link"
	done
	share "$r" 1
	share "$r" 4
	bottleneck 0
done

# ---- iSER ------------------------------------------------------------------------

if ! want iser; then
	:
elif command -v tgtd >/dev/null && [ -x "$SR_BUILD_DIR/bin/sr-iscsi-io" ]; then
	echo "== iSER (tgtd on B, sr-iscsi-io on A), 2% of UDP 4791 dropped both ways at B"
	sr_need_storage
	lun=$(mktemp /dev/shm/sr-bench-net-lun.XXXXXX)
	sr_on_exit "rm -f $lun"
	truncate -s 256M "$lun"
	dd if=/dev/zero of="$lun" bs=1M count=256 conv=notrunc status=none
	tport=$(sr_free_port "$SR_NS_B")
	iport=$(sr_free_port "$SR_NS_B" 32768)
	# shellcheck disable=SC2034 # read by sr_tgt_start
	SR_TGT_TIMEOUT=3600
	if sr_tgt_start net-roce roce "$SR_IP_B" "$tport" "$iport" "$lun" SR_AT_B >>"$log"; then
		url=iser://$SR_IP_B:$iport/$SR_TGT_IQN_ISER/1
		for rate in 0 2; do
			loss "$SR_NS_B" $((rate * 100)) udp
			for m in write read; do
				v=$(timeout -k 5 $((DUR + 120)) "${SR_AT_A[@]}" "$SR_ISCSI_IO" -i "$SR_ISCSI_INI" -m "$m" -t "$DUR" \
					-b 256k -q 16 -s 7 "$url" 2>&1 | tee -a "$log" |
					sed -n 's/.*: \([0-9.]*\) MB\/s, \([0-9]*\) IOPS.*/\1/p' | tail -n 1)
				rec iser "iser-roce" "seq_$m $rate%" "$v" MB/s
			done
			loss "$SR_NS_B" 0
		done
		sr_tgt_stop
	fi
else
	echo "== iSER skipped (tgtd or sr-iscsi-io missing)"
fi

# ---- summary and plot ------------------------------------------------------------

python3 - "$csv" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" "$(git -C "$here" rev-parse --short HEAD 2>/dev/null)" \
	>"$out/summary.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
d = {(r["section"], r["transport"], r["condition"]): r["value"] for r in rows}
print(f"bench/network.sh at {sys.argv[5]}: load average {sys.argv[2]} at the start, {sys.argv[3]} at the end, {sys.argv[4]} CPUs")
kinds = ["roce-write", "roce-read", "iwarp-write", "tcp"]
def cell(sec, k, c, ratio=None):
    v = d.get((sec, k, c), "")
    if not v:
        return f"{'-':>16}"
    r = d.get((ratio, k, c)) if ratio else None
    return f"{float(v):8.0f}" + (f" ({float(r):5.3f})" if r else "        ")
print("\nloss (drop in the data's receiver), Mbit/s (fraction of the same transport's 0%)")
print(f"{'loss':>6} " + " ".join(f"{k:>16}" for k in kinds))
for rate in ("0%", "0.1%", "1%", "2%", "5%", "10%"):
    print(f"{rate:>6} " + " ".join(cell("loss", k, rate, "loss-ratio") for k in kinds))
print("\nadded RTT (delay fault), Mbit/s")
print(f"{'rtt':>6} " + " ".join(f"{k:>16}" for k in kinds[:3]))
for rtt in ("+0ms", "+0.1ms", "+1ms", "+10ms"):
    print(f"{rtt:>6} " + " ".join(cell("rtt", k, rtt) for k in kinds[:3]))
print("\nbottleneck (tbf), Mbit/s and share of the link")
for r in ("1000M", "10000M"):
    print("  " + r + " alone: " + ", ".join(f"{k} {d.get(('bottleneck', k, r + ' alone'), '-')} ({d.get(('bottleneck', k, r + ' alone share'), '-')})" for k in kinds))
    for n in ("1", "4"):
        t = f"roce+{n}tcp"
        print(f"  {r} Soft-RoCE beside {n} TCP: roce {d.get(('bottleneck', t, r + ' roce'), '-')} "
              f"({d.get(('bottleneck', t, r + ' roce share'), '-')}), tcp {d.get(('bottleneck', t, r + ' tcp'), '-')} "
              f"({d.get(('bottleneck', t, r + ' tcp share'), '-')}; streams {d.get(('bottleneck', t, r + ' tcp streams'), '-')}), "
              f"Jain {d.get(('bottleneck', t, r + ' jain'), '-')}")
w0, w2 = d.get(("iser", "iser-roce", "seq_write 0%")), d.get(("iser", "iser-roce", "seq_write 2%"))
r0, r2 = d.get(("iser", "iser-roce", "seq_read 0%")), d.get(("iser", "iser-roce", "seq_read 2%"))
if w0 or r0:
    print("\niSER on Soft-RoCE, MB/s: lossless, 2% loss both ways (fraction)")
    for m, a, b in (("seq_write", w0, w2), ("seq_read", r0, r2)):
        frac = f"{float(b) / float(a):.3f}" if a and b else "-"
        print(f"  {m}: {a or '-'}, {b or '-'} ({frac})")
PY
cat "$out/summary.txt"

if command -v gnuplot >/dev/null; then
	for kind in roce-write roce-read iwarp-write tcp; do
		awk -F, -v k="$kind" '$1 == "loss-ratio" && $2 == k { sub("%", "", $3); print $3, $4 }' "$csv" >"$out/loss-$kind.dat"
		awk -F, -v k="$kind" '$1 == "rtt" && $2 == k && $4 != "" { gsub("[+ms]", "", $3); print $3 + 0.01, $4 }' "$csv" >"$out/rtt-$kind.dat"
	done
	awk -F, '$1 == "bottleneck" && $3 ~ / share$/ && $3 !~ /alone/ { print $2 "-" $3, $4 }' "$csv" |
		sed 's/ share / /; s/ /_/' >"$out/share.dat"
	gnuplot <<GP 2>>"$log" || echo "gnuplot failed: see $log"
set terminal png size 1500,500 noenhanced
set output "$out/network.png"
set multiplot layout 1,3 title "Soft-RoCE, Soft-iWARP and TCP between two network namespaces (veth, MTU 1500), $(date +%F)"
set title "goodput under loss / lossless goodput"
set xlabel "packets dropped in the receiver (%)"
set logscale x
set yrange [0:1.1]
set key bottom left
plot "$out/loss-roce-write.dat" w lp t "Soft-RoCE WRITE", "$out/loss-roce-read.dat" w lp t "Soft-RoCE READ", \
     "$out/loss-iwarp-write.dat" w lp t "Soft-iWARP WRITE", "$out/loss-tcp.dat" w lp t "TCP (iperf3)"
set title "goodput by added round trip (delay fault)"
set xlabel "added RTT (ms, +0.01)"
set ylabel "Mbit/s"
set yrange [0:*]
set key top right
plot "$out/rtt-roce-write.dat" w lp t "Soft-RoCE WRITE", "$out/rtt-roce-read.dat" w lp t "Soft-RoCE READ", \
     "$out/rtt-iwarp-write.dat" w lp t "Soft-iWARP WRITE"
unset logscale x
unset xlabel
set title "share of a tbf bottleneck (Soft-RoCE beside TCP)"
set ylabel "fraction of the link"
set yrange [0:1.1]
set style data histogram
set style fill solid 0.8 border -1
set xtics rotate by -30 font ",8"
unset key
plot "$out/share.dat" using 2:xtic(1)
unset multiplot
GP
else
	echo "gnuplot is not installed: no network.png"
fi
[ "$nfailed" -eq 0 ] || echo "$nfailed measurements failed (empty in results.csv): see $log"
echo "results: $out"
