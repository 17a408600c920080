#!/usr/bin/env bash
# Ceph's rados bench over softrdma beside async+posix (TCP), in one run.
#
#   bench/ceph.sh [OUTDIR]     (default bench/results/ceph-<timestamp>)
#
# One single-host cluster per messenger, as t_ceph builds it (1 mon, 1 mgr,
# 3 OSDs on memstore, a pool of 16 PGs and 3 replicas, auth none; every
# process under softrdma-run):
#   rdma-roce     async+rdma on Soft-RoCE, Ceph's native connection set-up
#   rdma-roce-cm  async+rdma on Soft-RoCE through rdma_cm
#   rdma-iwarp    async+rdma on Soft-iWARP (rdma_cm)
#   posix         async+posix: TCP on lo
# and on each `rados bench` write, seq and rand, 4 MiB and 4 KiB objects,
# 16 in flight, BENCH_SECONDS (default 5) each: about 6 minutes.
# Writes results.csv (messenger,object,mode,mbs,iops,lat_ms), summary.txt
# (the table, each RDMA set-up over posix) and ceph.png.  As root the run
# takes a network namespace of its own; SR_BUILD_DIR names the build
# (default build/).  Benchmarks are not tests: nothing here passes or fails.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
bench_start ceph "bench/ceph.sh [OUTDIR]" "messenger,object,mode,mbs,iops,lat_ms" "$@"
DUR=${BENCH_SECONDS:-5}

# shellcheck source=tests/conformance/lib.sh
. "$here/tests/conformance/lib.sh"
# shellcheck disable=SC2034 # read by lib.sh
SR_TEST=bench-ceph
SR_PRIVATE_NETNS=0
SR_MAX_TIME=600
sr_init roce >>"$log"
# shellcheck source=tests/conformance/ceph_lib.sh
. "$here/tests/conformance/ceph_lib.sh"
ceph_need
export SOFTRDMA_RUNTIME_DIR=$SR_TMP/run
mkdir -m 700 "$SOFTRDMA_RUNTIME_DIR"

nfailed=0
# bench MESSENGER OBJECT MODE ARGS...: one rados bench; a row of the CSV
bench() {
	local ms=$1 obj=$2 mode=$3 f mbs iops lat
	shift 3
	f=$SR_TMP/$ms-$obj-$mode.out
	echo "== $ms $obj rados bench $DUR $mode $*" >>"$log"
	timeout -k 5 $((DUR + 120)) "${CLIENT_AT[@]}" rados -c "$CONF" -p p bench "$DUR" "$mode" -t 16 "$@" >"$f" 2>&1
	grep -v verify_prereq "$f" | tail -n 25 >>"$log"
	mbs=$(sed -n 's/^Bandwidth (MB\/sec): *//p' "$f")
	iops=$(sed -n 's/^Average IOPS: *//p' "$f")
	lat=$(sed -n 's/^Average Latency(s): *//p' "$f" | awk '{ printf "%.2f", $1 * 1000 }')
	grep -q 'is not correct' "$f" && mbs= # a read that did not match what was written
	[ -n "$mbs" ] || nfailed=$((nfailed + 1))
	echo "$ms,$obj,$mode,$mbs,$iops,$lat" >>"$csv"
	printf '  %-13s %-5s %-6s %9s MB/s %7s IOPS %8s ms\n' "$ms" "$obj" "$mode" "${mbs:-FAILED}" "$iops" "$lat"
}

# measure MESSENGER TYPE DEVICE CONF-LINE...: a cluster, its benches, gone
measure() {
	local ms=$1 type=$2 dev=$3
	shift 3
	echo "=== $ms" | tee -a "$log"
	export SOFTRDMA_CONF=$SR_TMP/$type.conf
	sr_write_conf "$SOFTRDMA_CONF" lo "$type"
	# shellcheck disable=SC2034 # read by ceph_lib.sh
	MON_AT=("$SR_RUN") OSD_AT_0=("$SR_RUN") OSD_AT_1=("$SR_RUN") OSD_AT_2=("$SR_RUN") CLIENT_AT=("$SR_RUN")
	if ceph_make "$ms" 127.0.0.1 127.0.0.0/8 "$@" >>"$log" && ceph_start "$ms" >>"$log"; then
		# memstore keeps objects in memory: at most 600 MiB of 4 MiB objects
		bench "$ms" 4M write -b 4M --max-objects 150 --no-cleanup
		bench "$ms" 4M seq
		bench "$ms" 4M rand
		timeout 120 "${CLIENT_AT[@]}" rados -c "$CONF" -p p cleanup >>"$log" 2>&1
		bench "$ms" 4K write -b 4K --max-objects 50000 --no-cleanup
		bench "$ms" 4K seq
		bench "$ms" 4K rand
	else
		echo "  the $ms cluster did not come up: see $log"
		nfailed=$((nfailed + 1))
	fi
	[ "$dev" != - ] && "$SR_BUILD_DIR/bin/softrdma-cfg" statistic show link "$dev" >>"$log" 2>&1
	ceph_stop_all
}

measure rdma-roce roce rxe0 "ms_type = async+rdma" "ms_async_rdma_device_name = rxe0"
measure rdma-roce-cm roce rxe0 "ms_type = async+rdma" "ms_async_rdma_device_name = rxe0" \
	"ms_async_rdma_cm = true" "ms_async_rdma_type = iwarp"
measure rdma-iwarp iwarp siw0 "ms_type = async+rdma" "ms_async_rdma_device_name = siw0" \
	"ms_async_rdma_cm = true" "ms_async_rdma_type = iwarp"
measure posix roce - "ms_type = async+posix"

python3 - "$csv" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" "$DUR" >"$out/summary.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
d = {(r["messenger"], r["object"], r["mode"]): r for r in rows}
ms = ["rdma-roce", "rdma-roce-cm", "rdma-iwarp", "posix"]
print("rados bench, 3 OSDs on memstore on one host, 16 in flight, %s s each; %s CPUs, load %s before, %s after"
      % (sys.argv[5], sys.argv[4], sys.argv[2], sys.argv[3]))
print()
print("| object, mode | " + " | ".join(ms) + " |")
print("|---|" + "---|" * len(ms))
for obj in ("4M", "4K"):
    for mode in ("write", "seq", "rand"):
        cells = []
        for m in ms:
            r = d.get((m, obj, mode))
            if not r or not r["mbs"]:
                cells.append("failed")
                continue
            if obj == "4M":
                cells.append("%.0f MB/s" % float(r["mbs"]))
            else:
                cells.append("%s IOPS" % r["iops"])
        print("| %s %s | %s |" % (obj, mode, " | ".join(cells)))
print()
for m in ms[:3]:
    for obj, key in (("4M", "mbs"), ("4K", "iops")):
        for mode in ("write", "seq", "rand"):
            a, b = d.get((m, obj, mode)), d.get(("posix", obj, mode))
            if a and b and a[key] and b[key] and float(b[key]):
                print("%-13s %s %-5s over posix: %.2fx" % (m, obj, mode, float(a[key]) / float(b[key])))
PY
cat "$out/summary.txt"

if command -v gnuplot >/dev/null; then
	for obj in 4M 4K; do
		for mode in write seq rand; do
			printf '%s' "$mode"
			for m in rdma-roce rdma-roce-cm rdma-iwarp posix; do
				col=4
				[ "$obj" = 4K ] && col=5
				v=$(awk -F, -v m="$m" -v o="$obj" -v md="$mode" -v c=$col '$1 == m && $2 == o && $3 == md { print $c }' "$csv")
				printf ' %s' "${v:-0}"
			done
			echo
		done >"$out/$obj.dat"
	done
	gnuplot <<GP 2>>"$log" || echo "gnuplot failed: see $log"
set terminal png size 1280,560 noenhanced
set output "$out/ceph.png"
set multiplot layout 1,2 title "rados bench, 3 OSDs (memstore) on one host, 16 in flight: async+rdma on softrdma beside async+posix ($(date +%F))"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set key top center horizontal
set yrange [0:*]
set offsets 0, 0, graph 0.15, 0
set title "4 MiB objects"
set ylabel "MB/s"
plot "$out/4M.dat" using 2:xtic(1) t "Soft-RoCE", "" using 3 t "Soft-RoCE, rdma_cm", "" using 4 t "Soft-iWARP", "" using 5 t "posix (TCP)"
set title "4 KiB objects"
set ylabel "IOPS"
plot "$out/4K.dat" using 2:xtic(1) t "Soft-RoCE", "" using 3 t "Soft-RoCE, rdma_cm", "" using 4 t "Soft-iWARP", "" using 5 t "posix (TCP)"
unset multiplot
GP
else
	echo "gnuplot is not installed: no ceph.png"
fi
[ "$nfailed" -eq 0 ] || echo "$nfailed measurements failed (empty in results.csv): see $log"
echo "results: $out"
