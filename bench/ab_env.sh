#!/bin/bash
# bench/ab_env.sh ROUNDS VAR[=VALUE] PERFTEST-ARGS...: one of softrdma's
# switches to compare (VAR: SOFTRDMA_CRC_FOLD, SOFTRDMA_TX_HOLD,
# SOFTRDMA_ACK_HOLD, SOFTRDMA_POLL_DRIVE, SOFTRDMA_GSO,
# SOFTRDMA_RX_COALESCE_US) set to VALUE
# (default 0: off) and unset (the default),
# alternately, ROUNDS times each, on one perftest pair over Soft-RoCE on
# lo.  Prints each run's bandwidth and the CPU seconds (user + system) of
# server and client, then the means.  CPU time per run is steadier than
# bandwidth on a shared machine.
#   bench/ab_env.sh 4 SOFTRDMA_CRC_FOLD ib_write_bw -x 0 -s 65536 -n 20000
#   bench/ab_env.sh 4 SOFTRDMA_CRC_FOLD=256 ib_write_bw -s 65536 -n 20000
set -uo pipefail
[ $# -ge 3 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rounds=$1 var=${2%%=*} val=0
case $2 in *=*) val=${2#*=} ;; esac
shift 2
case $rounds in '' | *[!0-9]*) echo "ab_env.sh: ROUNDS must be a number, not '$rounds'" >&2; exit 2 ;; esac
case $var in SOFTRDMA_*) ;; *) echo "ab_env.sh: VAR must be a SOFTRDMA_* switch, not '$var'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
RUN=${SR_BUILD_DIR:-$here/build}/bin/softrdma-run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = lo\n' > "$tmp/lo.conf"
export SOFTRDMA_CONF=$tmp/lo.conf

for _ in $(seq "$rounds"); do
	for v in off on; do
		if [ $v = off ]; then export "$var=$val"; else unset "$var"; fi
		p=$(bench_port)
		/usr/bin/time -f "%U %S" -o "$tmp/srv.t" timeout 120 "$RUN" "$@" -p $p > "$tmp/srv.out" 2>&1 &
		sleep 0.7
		/usr/bin/time -f "%U %S" -o "$tmp/cli.t" timeout 120 "$RUN" "$@" -p $p 127.0.0.1 > "$tmp/cli.out" 2>&1
		wait
		bw=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $4 } END { print v }' "$tmp/cli.out")
		echo "$var=$([ $v = off ] && echo "$val" || echo unset) bw ${bw:-?} MB/s cpu server $(tail -1 "$tmp/srv.t" | awk '{ print $1 + $2 }') s client $(tail -1 "$tmp/cli.t" | awk '{ print $1 + $2 }') s"
	done
done | tee "$tmp/runs"
awk '{ n[$1]++; bw[$1] += $3; s[$1] += $7; c[$1] += $10 }
     END { for (k in n) printf "mean %s: bw %.1f MB/s cpu server %.3f s client %.3f s\n", k, bw[k] / n[k], s[k] / n[k], c[k] / n[k] }' "$tmp/runs"
