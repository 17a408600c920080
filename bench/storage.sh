#!/usr/bin/env bash
# Block storage over softrdma beside iSCSI over TCP, in one run.
#
#   bench/storage.sh [OUTDIR]     (default bench/results/storage-<timestamp>)
#
# Debian's tgtd with one LUN (a file in /dev/shm, so that the disk is not
# what is measured) shown as an iSER target and as an iSCSI/TCP target;
# libiscsi initiators against it over
#   iser:// on Soft-RoCE, iser:// on Soft-iWARP, iscsi:// (TCP)
# on loopback and between two network namespaces (veth, MTU 1500; needs
# root), measuring
#   sequential READ and WRITE throughput, 256 KiB commands, 16 in flight
#     (sr-iscsi-io; READs also with Debian's iscsi-perf),
#   random 4 KiB READ and WRITE IOPS, 32 in flight (sr-iscsi-io),
# and, below the SCSI layer, fio's rdma ioengine (RDMA WRITE, 256 KiB,
# 16 deep) on each softrdma device: what the transport alone gives.
# Writes results.csv (topology,transport,metric,value,unit), ratios.txt
# (iSER over iSCSI/TCP, beside the seeds' 1.9x) and storage.png.
# BENCH_SECONDS (default 5) per measurement, about 40 of them: ~4 min.
# As root the whole run takes a network namespace of its own;
# SR_BUILD_DIR names the build (default build/).  Benchmarks are not
# tests: nothing here passes or fails.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
# as root, in a network namespace of its own (SR_PRIVATE_NETNS=0 keeps the
# caller's): its softrdmad and ports are its own
bench_start storage "bench/storage.sh [OUTDIR]" "topology,transport,metric,value,unit" "$@"
DUR=${BENCH_SECONDS:-5}

# lib.sh (the conformance tests' harness) starts and stops tgtd, makes
# the namespaces and cleans up at exit; its check lines go to the log.
# shellcheck source=tests/conformance/lib.sh
. "$here/tests/conformance/lib.sh"
# shellcheck disable=SC2034 # read by lib.sh
SR_TEST=bench-storage
# the namespace of its own, if any, was made above
SR_PRIVATE_NETNS=0
sr_need_storage
sr_need_cmd fio
sr_init roce >>"$log"
# shellcheck disable=SC2034 # read by sr_tgt_start
SR_TGT_TIMEOUT=3600

lundir=/dev/shm
[ -d "$lundir" ] && [ -w "$lundir" ] || lundir=$SR_TMP
lun=$(mktemp "$lundir/sr-bench-lun.XXXXXX")
sr_on_exit "rm -f $lun"
truncate -s 512M "$lun"
# the whole LUN written once, so that reads return data from memory
dd if=/dev/zero of="$lun" bs=1M count=512 conv=notrunc status=none

# rec TOPOLOGY TRANSPORT METRIC VALUE UNIT; an empty VALUE is a run that
# failed: recorded empty (ratios skip it), its output is in the log
nfailed=0
rec() {
	echo "$1,$2,$3,$4,$5" >>"$csv"
	[ -n "$4" ] || nfailed=$((nfailed + 1))
	printf '  %-9s %-11s %-22s %10s %s\n' "$1" "$2" "$3" "${4:-FAILED}" "$5"
}

# io AT-NAME URL ARGS...: sr-iscsi-io; prints its last "MB/s" and "IOPS"
io() {
	local -n at=$1
	local url=$2
	shift 2
	echo "== sr-iscsi-io $* $url" >>"$log"
	timeout -k 5 $((DUR + 60)) "${at[@]}" "$SR_ISCSI_IO" -i "$SR_ISCSI_INI" "$@" "$url" 2>&1 | tee -a "$log" |
		sed -n 's/.*: \([0-9.]*\) MB\/s, \([0-9]*\) IOPS.*/\1 \2/p' | tail -n 1
}

# measure TOPOLOGY TRANSPORT AT-NAME URL
measure() {
	local topo=$1 tr=$2 atn=$3 url=$4 r v
	local -n at3=$atn
	r=$(io "$atn" "$url" -m write -t "$DUR" -b 256k -q 16 -s 7)
	rec "$topo" "$tr" seq_write_256k "${r% *}" MB/s
	r=$(io "$atn" "$url" -m read -t "$DUR" -b 256k -q 16)
	rec "$topo" "$tr" seq_read_256k "${r% *}" MB/s
	r=$(io "$atn" "$url" -m write -t "$DUR" -r -b 4k -q 32 -s 7)
	rec "$topo" "$tr" rand_write_4k_iops "${r#* }" IOPS
	r=$(io "$atn" "$url" -m read -t "$DUR" -r -b 4k -q 32)
	rec "$topo" "$tr" rand_read_4k_iops "${r#* }" IOPS
	echo "== iscsi-perf $url" >>"$log"
	# iscsi-perf prints MiB/s; its IOPS times the command size is exact
	v=$(timeout -k 5 $((DUR + 60)) "${at3[@]}" iscsi-perf -i "$SR_ISCSI_INI" -t "$DUR" -m 16 -b 512 "$url" 2>&1 |
		tee -a "$log" | tr '\r' '\n' | sed -n 's/^iops average \([0-9]*\) .*/\1/p' | tail -n 1)
	[ -n "$v" ] && v=$(awk -v i="$v" 'BEGIN { printf "%.1f", i * 262144 / 1e6 }')
	rec "$topo" "$tr" iscsi_perf_read_256k "$v" MB/s
}

# fio_rdma TOPOLOGY TRANSPORT SERVER-AT CLIENT-AT ADDR NS LISTEN-KIND
fio_rdma() {
	local topo=$1 tr=$2 ns=$6 kind=$7 port spid o
	local -n sat=$3 cat_=$4
	port=$(sr_free_port "$ns")
	echo "== fio rdma $topo $tr" >>"$log"
	timeout -k 5 $((DUR + 60)) "${sat[@]}" fio --name=server --ioengine=rdma --port="$port" --rw=read --bs=256k \
		--size=4g --iodepth=16 >>"$log" 2>&1 &
	spid=$!
	local listen=$port
	[ "$kind" = roce ] && listen=cm:$port
	if ! sr_wait_listen "$listen" "$spid" "$ns" >/dev/null; then
		echo "fio's rdma server did not listen on $listen" >>"$log"
		rec "$topo" "$tr" fio_rdma_write_256k '' MB/s
		return
	fi
	o=$(timeout -k 5 $((DUR + 60)) "${cat_[@]}" fio --name=client --ioengine=rdma --hostname="$5" --port="$port" \
		--verb=write --rw=write --bs=256k --size=4g --runtime="$DUR" --time_based --iodepth=16 2>&1)
	echo "$o" >>"$log"
	wait "$spid" 2>/dev/null
	rec "$topo" "$tr" fio_rdma_write_256k "$(echo "$o" | sed -n 's/.*WRITE: bw=[^(]*(\([0-9.]*\)\([kMG]\)B\/s).*/\1 \2/p' |
		awk '{ v = $1; if ($2 == "k") v /= 1000; if ($2 == "G") v *= 1000; printf "%.1f", v }')" MB/s
}

# topology TOPO ADDR AT-B-ROCE AT-B-IWARP AT-A-ROCE AT-A-IWARP NS
topology() {
	local topo=$1 addr=$2 ns=$7 tport iport
	echo "== $topo"
	for tr in iser-roce iser-iwarp; do
		local kind=${tr#iser-} bn=$3 an=$5
		[ "$kind" = iwarp ] && bn=$4 an=$6
		tport=$(sr_free_port "$ns")
		iport=$(sr_free_port "$ns" 32768)
		sr_tgt_start "$topo-$kind" "$kind" "$addr" "$tport" "$iport" "$lun" "$bn" >>"$log" || continue
		measure "$topo" "$tr" "$an" "iser://$addr:$iport/$SR_TGT_IQN_ISER/1"
		# the same tgtd's TCP target, once, with the RoCE configuration
		[ "$kind" = roce ] && measure "$topo" iscsi-tcp "$an" "iscsi://$addr:$tport/$SR_TGT_IQN_TCP/1"
		sr_tgt_stop
		fio_rdma "$topo" "rdma-$kind" "$bn" "$an" "$addr" "$ns" "$kind"
	done
}

conf_iw=$SR_TMP/iwarp.conf
sr_write_conf "$conf_iw" lo iwarp
# shellcheck disable=SC2034 # used through namerefs
lo_roce=(env SOFTRDMA_CONF="$SR_CONF" "$SR_RUN")
# shellcheck disable=SC2034
lo_iwarp=(env SOFTRDMA_CONF="$conf_iw" "$SR_RUN")
topology loopback 127.0.0.1 lo_roce lo_iwarp lo_roce lo_iwarp ''

if [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1; then
	sr_netns_setup >>"$log"
	sr_write_conf "$SR_TMP/iw-a.conf" "$SR_VETH_A" iwarp
	sr_write_conf "$SR_TMP/iw-b.conf" "$SR_VETH_B" iwarp
	# shellcheck disable=SC2034
	b_iwarp=(ip netns exec "$SR_NS_B" env SOFTRDMA_CONF="$SR_TMP/iw-b.conf" "$SR_RUN")
	# shellcheck disable=SC2034
	a_iwarp=(ip netns exec "$SR_NS_A" env SOFTRDMA_CONF="$SR_TMP/iw-a.conf" "$SR_RUN")
	topology netns "$SR_IP_B" SR_AT_B b_iwarp SR_AT_A a_iwarp "$SR_NS_B"
else
	echo "== two namespaces skipped (needs root and ip netns)"
fi

python3 - "$csv" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" >"$out/ratios.txt" <<'PY'
import csv, sys
d = {}
for r in csv.DictReader(open(sys.argv[1])):
    try:
        d[(r["topology"], r["transport"], r["metric"])] = float(r["value"])
    except (TypeError, ValueError):
        pass
print("iSER over softrdma / iSCSI over TCP, same tgtd, same LUN, same run (seeds: SRP/iSER on")
print("InfiniBand 580 MB/s vs iSCSI over IPoIB 300 MB/s = 1.9x)")
print(f"load average {sys.argv[2]} at the start, {sys.argv[3]} at the end, {sys.argv[4]} CPUs")
for topo in ("loopback", "netns"):
    for m, unit in (("seq_read_256k", "MB/s"), ("seq_write_256k", "MB/s"), ("iscsi_perf_read_256k", "MB/s"),
                    ("rand_read_4k_iops", "IOPS"), ("rand_write_4k_iops", "IOPS")):
        t = d.get((topo, "iscsi-tcp", m))
        if not t:
            continue
        for tr in ("iser-roce", "iser-iwarp"):
            v = d.get((topo, tr, m))
            if v is not None:
                print(f"{topo:9s} {m:22s} {tr:11s} {v:9.1f} / {t:9.1f} {unit:4s} = {v / t:5.2f}x")
    for tr in ("rdma-roce", "rdma-iwarp"):
        v = d.get((topo, tr, "fio_rdma_write_256k"))
        if v is not None:
            print(f"{topo:9s} {'fio_rdma_write_256k':22s} {tr:11s} {v:9.1f} MB/s (the transport alone, no SCSI)")
PY
cat "$out/ratios.txt"

# storage.png: throughput (left) and 4 KiB IOPS (right), one cluster of
# bars per topology and measure, one bar per transport (0: failed)
bars() {
	local topo m tr v
	for topo in loopback netns; do
		for m in "$@"; do
			grep -q "^$topo," "$csv" || continue
			for tr in iser-roce iser-iwarp iscsi-tcp; do
				v=$(awk -F, -v t=$topo -v m="$m" -v r=$tr '$1 == t && $2 == r && $3 == m { print $4 }' "$csv")
				echo "${v:-0}"
			done | paste -sd' ' | sed "s/^/$topo:${m%_256k} /"
		done
	done
}
if command -v gnuplot >/dev/null; then
	bars seq_read_256k seq_write_256k iscsi_perf_read_256k >"$out/mbs.dat"
	bars rand_read_4k_iops rand_write_4k_iops | sed 's/_4k_iops / /' >"$out/iops.dat"
	gnuplot <<GP 2>>"$log" || echo "gnuplot failed: see $log"
set terminal png size 1280,560 noenhanced
set output "$out/storage.png"
set multiplot layout 1,2 title "tgtd + libiscsi, one LUN in memory: iSER on softrdma beside iSCSI/TCP ($(date +%F))"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30 font ",9"
set key top center horizontal
set yrange [0:*]
set offsets 0, 0, graph 0.15, 0
set title "sequential, 256 KiB commands, 16 in flight"
set ylabel "MB/s"
plot "$out/mbs.dat" using 2:xtic(1) t "iSER, Soft-RoCE", "" using 3 t "iSER, Soft-iWARP", "" using 4 t "iSCSI, TCP"
set title "random 4 KiB, 32 in flight"
set ylabel "IOPS"
plot "$out/iops.dat" using 2:xtic(1) t "iSER, Soft-RoCE", "" using 3 t "iSER, Soft-iWARP", "" using 4 t "iSCSI, TCP"
unset multiplot
GP
else
	echo "gnuplot is not installed: no storage.png"
fi
[ "$nfailed" -eq 0 ] || echo "$nfailed measurements failed (empty in results.csv): see $log"
echo "results: $out"
