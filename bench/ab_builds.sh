#!/bin/bash
# bench/ab_builds.sh ROUNDS BUILD-A BUILD-B [OUTDIR]: two builds of
# softrdma's libraries compared on the small-message paths, alternately
# (A, B, A, B, ...) ROUNDS times each, on lo in one softrdmad, with the
# TCP figure of each case measured in the same round:
#   ucx   ucx_perftest am_lat and tag_lat 8 B, UCX_TLS=rc_v and tcp
#   ev    ib_send_lat -e -s 8 and ib_read_lat -e -s 8 (completions by
#         event), qperf tcp_lat 8 B (blocking sockets)
#   poll  ib_write_lat -s 8 and ib_write_bw -s 65536 (polling)
# BUILD-A and BUILD-B are build directories (bin/softrdma-run and
# lib/softrdma/ in each); the daemon is BUILD-A's.  Writes runs.csv
# (round,build,case,value,unit) and prints the median of each case and
# build, and the median of the per-round ratio softrdma / TCP (latency:
# below 1 is faster than TCP).  BENCH_CASES (default "ucx ev poll") picks
# parts, BENCH_ITERS the latency iterations (default 5000).  Benchmarks
# are not tests: nothing here passes or fails.
set -uo pipefail
[ $# -ge 3 ] || {
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}
rounds=$1 A=$(cd "$2" && pwd) B=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
out=${4:-$here/bench/results/ab-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
. "$here/bench/lib.sh"
bench_own_netns "$0" "$@"
CASES=" ${BENCH_CASES:-ucx ev poll} "
want() { case $CASES in *" $1 "*) return 0 ;; esac; return 1; }
ITERS=${BENCH_ITERS:-5000}
export SR_SOURCE_DIR=$here SR_BUILD_DIR=$A
# shellcheck source=tests/conformance/lib.sh
. "$here/tests/conformance/lib.sh"
# shellcheck disable=SC2034 # read by lib.sh
SR_TEST=bench-ab-builds
SR_PRIVATE_NETNS=0
log=$out/log.txt
csv=$out/runs.csv
: >"$log"
echo "round,build,case,value,unit" >"$csv"
sr_init roce >>"$log"

rec() { echo "$1,$2,$3,$4,$5" >>"$csv"; }
# perftest's latency columns: size iters min max typical ...; bandwidth: size iters peak avg
typical() { awk '$1 == 8 && NF >= 9 { v = $5 } END { print v }'; }
bw_avg() { awk '$1 == 65536 && NF >= 5 { v = $4 } END { print v }'; }

# pair RUN TOOL ARGS...: a perftest server and client through RUN on lo
pair() {
	local runner=$1 p s
	shift
	p=$(sr_free_port "")
	timeout -k 5 120 "$runner" "$@" -p "$p" >>"$log" 2>&1 </dev/null &
	s=$!
	sr_wait_listen "$p" "$s" "" || echo "$1 did not listen on $p" >>"$log"
	timeout -k 5 120 "$runner" "$@" -p "$p" 127.0.0.1 2>&1 </dev/null | tee -a "$log"
	wait "$s" 2>/dev/null
}

# one_round ROUND NAME BUILD
one_round() {
	local r=$1 n=$2 runner=$3/bin/softrdma-run t tls dev f
	# shellcheck disable=SC2034 # used through bench_ucx's namerefs
	local -a at=("$runner") plain=()
	if want ucx; then
		for t in ucp_am_lat tag_lat; do
			for tls in rc_v tcp; do
				dev=rxe0:1
				[ $tls = tcp ] && dev=lo
				if [ $tls = tcp ]; then
					f=$(bench_ucx "$log" plain plain "" 127.0.0.1 $tls $dev $t 8 "$ITERS")
				else
					f=$(bench_ucx "$log" at at "" 127.0.0.1 $tls $dev $t 8 "$ITERS")
				fi
				rec "$r" "$n" "ucx-$t-$tls" "$(echo "$f" | awk '{print $3}')" us
			done
		done
	fi
	if want ev; then
		rec "$r" "$n" send_lat_ev "$(pair "$runner" ib_send_lat -x 0 -e -s 8 -n "$ITERS" | typical)" us
		rec "$r" "$n" read_lat_ev "$(pair "$runner" ib_read_lat -x 0 -e -s 8 -n "$ITERS" | typical)" us
		p=$(sr_free_port "")
		qperf -lp "$p" >>"$log" 2>&1 &
		s=$!
		sr_wait_listen "$p" "$s" ""
		rec "$r" "$n" tcp_lat "$(qperf -lp "$p" -t 2 -m 8 127.0.0.1 tcp_lat 2>>"$log" |
			awk '$1 == "latency" { v = $3; if ($4 ~ /^ms/) v *= 1000; if ($4 ~ /^ns/) v /= 1000; print v }')" us
		kill "$s" 2>/dev/null
		wait "$s" 2>/dev/null
	fi
	if want poll; then
		rec "$r" "$n" write_lat "$(pair "$runner" ib_write_lat -x 0 -s 8 -n "$ITERS" | typical)" us
		rec "$r" "$n" write_bw "$(pair "$runner" ib_write_bw -x 0 -s 65536 -n 20000 | bw_avg)" MB/s
	fi
}

echo "# A $A, B $B, $rounds rounds, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
for r in $(seq "$rounds"); do
	one_round "$r" A "$A" >/dev/null
	one_round "$r" B "$B" >/dev/null
	echo "round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
python3 - "$csv" <<'EOF' | tee "$out/summary.txt"
import csv, statistics, sys
v = {}
for r in csv.DictReader(open(sys.argv[1])):
    try:
        v.setdefault((r["case"], r["build"]), {})[r["round"]] = float(r["value"])
    except ValueError:
        pass
tcp = {"ucx-ucp_am_lat-rc_v": "ucx-ucp_am_lat-tcp", "ucx-tag_lat-rc_v": "ucx-tag_lat-tcp",
       "send_lat_ev": "tcp_lat", "read_lat_ev": "tcp_lat"}
cases = sorted({c for c, _ in v})
print("%-22s %10s %10s %8s   %s" % ("case", "A median", "B median", "B/A", "softrdma/TCP per round, median: A, B"))
for c in cases:
    a, b = v.get((c, "A"), {}), v.get((c, "B"), {})
    ma = statistics.median(a.values()) if a else float("nan")
    mb = statistics.median(b.values()) if b else float("nan")
    line = "%-22s %10.2f %10.2f %8.2f" % (c, ma, mb, mb / ma if ma else float("nan"))
    if c in tcp:
        rs = []
        for k in ("A", "B"):
            t = v.get((tcp[c], k), {})
            x = [v[(c, k)][r] / t[r] for r in v.get((c, k), {}) if r in t and t[r]]
            rs.append("%.2f" % statistics.median(x) if x else "-")
        line += "   " + ", ".join(rs)
    print(line)
EOF
