#!/bin/bash
# Long fuzzing runs: every target (or the ones named), one after the other,
# with a corpus that grows across runs; reports executions and coverage.
#
#   tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...]      default 60 s each, all
#
# Targets: roce_parse iwarp_parse cm_mad mpa conf rsocket rs_dgram daemon iwarp_rx (see
# tests/fuzz/targets.cmake and the comment at the top of each fuzz_*.c).
# Environment:
#   SR_FUZZ_DIR   work directory (default build-fuzz in the source tree):
#                 programs, seeds/, corpus/TARGET (kept across runs) and
#                 artifacts/TARGET (crashes, leaks, timeouts)
#   SR_FUZZ_JOBS  parallel fuzzing processes per target (default 1)
#   CC            clang by default
# The output ends with one line per target: executions, executions per
# second, edges covered of the instrumented total, corpus size, and
# FAILED with the artifact when the target crashed.  A "timeout" artifact
# on a loaded machine is more often a starved process than a slow input:
# time it with build/tests/fuzz/fuzz_TARGET_replay FILE.
set -uo pipefail

secs=${1:-60}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${SR_FUZZ_DIR:-$root/build-fuzz}
jobs=${SR_FUZZ_JOBS:-1}
cc=${CC:-clang}
samples=${SR_WIRE_SAMPLES:-$root/tests/data/wire-samples}

mkdir -p "$work"
cmake -S "$here" -B "$work" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build "$work" -j"$(nproc)" >/dev/null || exit 1
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for b in "$work"/fuzz_*; do
		# fuzz_seeds (built below) writes the seed corpora: not a target
		[ -x "$b" ] && [ "${b##*/}" != fuzz_seeds ] && targets+=("${b##*/fuzz_}")
	done
fi
if [ ${#targets[@]} -eq 0 ]; then
	echo "run_fuzz: no fuzz programs were built (is clang's libFuzzer runtime installed?)" >&2
	exit 1
fi
"$cc" -std=gnu11 -O1 -D_GNU_SOURCE -I"$root/src" "$here/fuzz_seeds.c" -o "$work/fuzz_seeds" || exit 1
"$work/fuzz_seeds" "$samples" "$work/seeds" >/dev/null || exit 1

maxlen() {
	sed -n "s/^set(SR_FUZZ_MAXLEN_$1 \([0-9]*\))/\1/p" "$here/targets.cmake"
}

report=()
status=0
for t in "${targets[@]}"; do
	bin=$work/fuzz_$t
	[ -x "$bin" ] || { echo "run_fuzz: no program for target $t" >&2; status=1; continue; }
	mkdir -p "$work/corpus/$t" "$work/artifacts/$t"
	log=$work/$t.log
	dirs=("$work/corpus/$t")
	[ -d "$work/seeds/$t" ] && dirs+=("$work/seeds/$t")
	[ -d "$here/regress/$t" ] && dirs+=("$here/regress/$t")
	echo "== fuzz_$t for ${secs}s (log: $log)"
	extra=()
	if [ "$jobs" -gt 1 ]; then
		extra=(-jobs="$jobs" -workers="$jobs")
	fi
	(cd "$work/artifacts/$t" && "$bin" -max_total_time="$secs" -timeout=120 -rss_limit_mb=2048 \
		-max_len="$(maxlen "$t")" -print_final_stats=1 -close_fd_mask=3 \
		-artifact_prefix="$work/artifacts/$t/" "${extra[@]}" "${dirs[@]}") >"$log" 2>&1
	rc=$?
	[ "$jobs" -gt 1 ] && cat "$work/artifacts/$t"/fuzz-*.log >>"$log" 2>/dev/null
	edges=$(sed -n 's/.*Loaded [0-9]* modules *(\([0-9]*\) inline 8-bit counters).*/\1/p' "$log" | head -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | cut -d' ' -f2 | sort -n | tail -1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{s+=$1} END {print s+0}')
	corp=$(find "$work/corpus/$t" -type f | wc -l)
	pct=$(awk -v c="${cov:-0}" -v e="${edges:-0}" 'BEGIN { if (e) printf "%.1f", 100 * c / e; else print "?" }')
	line=$(printf '%-12s %12s execs %8s/s  cov %5s of %5s edges (%s%%)  corpus %5s' "$t" "$execs" \
		"$((execs / (secs > 0 ? secs * jobs : 1)))" "${cov:-?}" "${edges:-?}" "$pct" "$corp")
	if [ $rc -ne 0 ]; then
		line="$line  FAILED: $(ls "$work/artifacts/$t" | grep -E '^(crash|leak|timeout|oom)-' | head -3 | tr '\n' ' ')"
		status=1
	fi
	report+=("$line")
done
echo
echo "target             executions     per s    coverage                       corpus"
printf '%s\n' "${report[@]}"
exit $status
