#!/bin/bash
# A short libFuzzer run of one target: the fuzz/smoke_* CTest tests.
#
#   smoke.sh TARGET BINDIR SEEDS REGRESS ARTIFACTS SECONDS MAXLEN
#
# Runs BINDIR/fuzz_TARGET for SECONDS on a scratch corpus started from the
# seeds (tests/fuzz/fuzz_seeds.c) and the regression inputs, and prints
# the executions and coverage.  A crash, leak, sanitizer report or broken
# invariant fails the test; the input that did it is kept in ARTIFACTS
# and printed in base64.  Exit 77 (skip) when the program was not built:
# clang's libFuzzer runtime was missing at build time.
#
# The mutations follow a fixed seed (SR_FUZZ_SEED, default 1; "random" for
# libFuzzer's own), so that `make test` explores the same inputs each time
# and a red run is a regression, not a new finding by chance: finding new
# bugs is tests/fuzz/run_fuzz.sh's work (long runs, a growing corpus).
set -u
t=$1 bindir=$2 seeds=$3 regress=$4 artifacts=$5 secs=$6 maxlen=$7
bin=$bindir/fuzz_$t

if [ ! -x "$bin" ]; then
	echo "skip: $bin was not built: clang with its libFuzzer runtime (Debian: clang," \
		"libclang-rt-dev; scripts/install-deps.sh installs both) was not found"
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/sr-fuzz-$t.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
dirs=("$work/corpus")
[ -d "$seeds" ] && dirs+=("$seeds")
[ -d "$regress" ] && dirs+=("$regress")

seed=${SR_FUZZ_SEED:-1}
seedopt=()
[ "$seed" = random ] || seedopt=(-seed="$seed")
"$bin" "${seedopt[@]}" -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -max_len="$maxlen" \
	-print_final_stats=1 -close_fd_mask=3 -artifact_prefix="$work/" "${dirs[@]}" >"$work/log" 2>&1
rc=$?
edges=$(sed -n 's/.*Loaded [0-9]* modules *(\([0-9]*\) inline 8-bit counters).*/\1/p' "$work/log" | head -1)
cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
echo "fuzz_$t: ${execs:-?} executions in ${secs}s (seed $seed), coverage ${cov:-?} of ${edges:-?} edges"
if [ $rc -ne 0 ]; then
	echo "fuzz_$t FAILED (exit $rc); the end of its output:"
	tail -n 60 "$work/log"
	mkdir -p "$artifacts"
	for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
		[ -e "$a" ] || continue
		cp "$a" "$artifacts/"
		echo "input kept as $artifacts/$(basename "$a") (base64: $(base64 -w0 "$a"))"
		echo "replay it: $bin $artifacts/$(basename "$a")"
	done
	exit 1
fi
