#!/bin/bash
# The stress mode of the test suite (`make test-stress`): Debian's RDMA
# programs (tests/conformance/stress_programs.sh: rping, ucmatose -c 10,
# perftest -R, rstream's and riostream's whole default suites, on
# Soft-RoCE and Soft-iWARP) while a CPU hog spins on every core and a
# second copy of the list runs at the same time.  A pair that stops
# exchanging packets for 60 s is a hang: its log shows every thread's
# backtrace (gdb).  Slow is not hung: on two busy cores the default
# suites' 220,000 latency-bound transfers take many minutes.
set -u

usage() {
	cat <<USAGE
usage: scripts/stress.sh [-c COPIES] [-H HOGS] [-n ROUNDS] [-s] [BUILD_DIR]
  -c COPIES  copies of the program list running at once (default 2)
  -H HOGS    CPU hogs (default: one per core, $(nproc) here)
  -n ROUNDS  run it all ROUNDS times (default 1)
  -s         bounded counts instead of the full default suites (quick)
  BUILD_DIR  the build to test (default: build)
Logs: BUILD_DIR/stress/round-R-copy-C.log.  Exit 0 when every copy of
every round passed.  Needs root for the private network namespaces that
tell a hang (no packets) from slow progress.
USAGE
}

copies=2 hogs=$(nproc) rounds=1 mode=full
while getopts "c:H:n:sh" o; do
	case $o in
	c) copies=$OPTARG ;;
	H) hogs=$OPTARG ;;
	n) rounds=$OPTARG ;;
	s) mode=short ;;
	h) usage && exit 0 ;;
	*) usage >&2 && exit 2 ;;
	esac
done
shift $((OPTIND - 1))
for v in "$copies" "$hogs" "$rounds"; do
	case $v in
	'' | *[!0-9]*) echo "stress.sh: '$v' is not a number" >&2 && usage >&2 && exit 2 ;;
	esac
done
[ $# -le 1 ] || { usage >&2 && exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" 2>/dev/null && pwd) || { echo "stress.sh: no build directory ${1:-$src/build}" >&2 && exit 2; }
[ -x "$build/bin/softrdma-run" ] || { echo "stress.sh: $build has no bin/softrdma-run: build first (make)" >&2 && exit 2; }
[ "$(id -u)" -eq 0 ] || echo "stress.sh: not root: no private network namespaces, so a slow program may be reported as hung" >&2

mkdir -p "$build/stress"
pids=()
cleanup() {
	# shellcheck disable=SC2046 # one pid per word
	[ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 "$hogs"); do
	bash -c 'while :; do :; done' &
	pids+=("$!")
done
echo "stress: $copies copies x $rounds rounds, $hogs CPU hogs, $mode suites, logs in $build/stress/"

fails=0
for r in $(seq 1 "$rounds"); do
	start=$SECONDS
	jobs=()
	for c in $(seq 1 "$copies"); do
		SR_STRESS=$mode SR_MAX_TIME=3600 SR_BUILD_DIR=$build SR_SOURCE_DIR=$src \
			bash "$src/tests/conformance/stress_programs.sh" >"$build/stress/round-$r-copy-$c.log" 2>&1 &
		jobs+=("$!")
	done
	for c in $(seq 1 "$copies"); do
		wait "${jobs[$((c - 1))]}"
		rc=$?
		log=$build/stress/round-$r-copy-$c.log
		if [ "$rc" -eq 0 ]; then
			echo "round $r copy $c: PASS ($(grep -c '^ok:' "$log") checks)"
		else
			fails=$((fails + 1))
			echo "round $r copy $c: FAIL (exit $rc):"
			grep -E '^(FAIL|ERROR|    ----- HANG)' "$log" | sed 's/^/  /'
		fi
	done
	echo "round $r: $((SECONDS - start)) s"
done
[ "$fails" -eq 0 ] && echo "stress: all passed" && exit 0
echo "stress: $fails failed runs (logs in $build/stress/)"
exit 1
