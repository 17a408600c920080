#!/bin/bash
# scripts/streak.sh (`make test-streak`: CI on a fresh clone, N times in a
# row) against a stand-in repository whose .ci/run passes, or fails from
# its third run on: the count, the stop at the first failure with that
# clone and log kept, the passed clones removed, the log lines, following
# HEAD (-f) against a fixed commit, the pause file, logs that a second
# streak in the same directory does not overwrite, and its answers to bad
# arguments.
. "$(dirname "$0")/../conformance/lib.sh"
sr_init
sr_need_cmd git
streak=$SR_SOURCE_DIR/scripts/streak.sh
repo=$SR_TMP/repo
out=$SR_TMP/out
export STANDIN_COUNT=$SR_TMP/count STANDIN_FAIL=$SR_TMP/fail

mkdir -p "$repo/.ci"
cat >"$repo/.ci/run" <<'RUN'
#!/bin/bash
n=$(($(cat "$STANDIN_COUNT") + 1))
echo "$n" >"$STANDIN_COUNT"
git rev-parse HEAD >>"$STANDIN_COUNT.heads"
# STANDIN_ADVANCE: the first run commits to the origin, as a developer
# pushing while the streak runs
if [ -n "${STANDIN_ADVANCE:-}" ] && [ "$n" = 1 ]; then
	echo "$n" >>"$STANDIN_ADVANCE/moved" && git -C "$STANDIN_ADVANCE" add moved &&
		git -C "$STANDIN_ADVANCE" -c user.name=t -c user.email=t@t commit -qm moved
fi
[ -e "$STANDIN_FAIL" ] && [ "$n" -ge 3 ] && { echo "0% tests passed, 1 tests failed out of 1"; exit 1; }
echo "100% tests passed, 0 tests failed out of 1"
RUN
git -C "$repo" init -q &&
	git -C "$repo" add -A &&
	git -C "$repo" -c user.name=t -c user.email=t@t commit -qm standin ||
	sr_fail "a stand-in repository"

echo 0 >"$STANDIN_COUNT"
if sr_run "three passing runs in a row" -- bash "$streak" -n 3 -d "$out/a" "$repo"; then
	sr_expect "$SR_OUT" '3 clean runs in a row' "  it says how many"
	[ "$(grep -c ' passed in ' "$out/a/streak.log")" = 3 ] && sr_pass "  three lines in streak.log" ||
		sr_fail "  streak.log: $(cat "$out/a/streak.log")"
	[ "$(cat "$STANDIN_COUNT")" = 3 ] && sr_pass "  .ci/run ran three times" || sr_fail "  .ci/run ran $(cat "$STANDIN_COUNT") times"
	ls -d "$out"/a/run-[0-9] >/dev/null 2>&1 && sr_fail "  passed clones were left behind" || sr_pass "  passed clones removed"
fi

echo 0 >"$STANDIN_COUNT"
: >"$STANDIN_FAIL"
if sr_run_fail "a failing third run stops the streak" -- bash "$streak" -n 5 -d "$out/b" "$repo"; then
	sr_expect "$SR_OUT" 'run 3 failed after 2 clean runs in a row' "  it names the run and the streak"
	[ "$(cat "$STANDIN_COUNT")" = 3 ] && sr_pass "  no fourth run" || sr_fail "  .ci/run ran $(cat "$STANDIN_COUNT") times"
	[ -d "$out/b/run-3" ] && ls "$out"/b/run-3-*.log >/dev/null 2>&1 && sr_pass "  the failed clone and its log are kept" ||
		sr_fail "  the failed run's clone or log is missing"
	sr_expect "$out/b/streak.log" 'run 3/5 .* FAILED \(exit 1\)' "  streak.log marks the failure"
fi

# -f: the second run tests the commit the first one made; -r: it does not
heads() { sort -u "$STANDIN_COUNT.heads" | wc -l; }
rm -f "$STANDIN_FAIL" "$STANDIN_COUNT.heads"
echo 0 >"$STANDIN_COUNT"
if STANDIN_ADVANCE=$repo sr_run "-f follows HEAD" -- bash "$streak" -f -n 2 -d "$out/d" "$repo"; then
	[ "$(heads)" = 2 ] && sr_pass "  two runs, two commits" || sr_fail "  the runs tested $(heads) commit(s)"
	sr_expect "$SR_OUT" '2 clean runs in a row, following HEAD' "  it says it followed"
fi
rm -f "$STANDIN_COUNT.heads"
echo 0 >"$STANDIN_COUNT"
if STANDIN_ADVANCE=$repo sr_run "without -f, one commit" -- bash "$streak" -n 2 -d "$out/d" "$repo"; then
	[ "$(heads)" = 1 ] && sr_pass "  two runs, one commit" || sr_fail "  the runs tested $(heads) commits"
	[ "$(find "$out/d" -name 'run-1-*.log' | wc -l)" = 2 ] && sr_pass "  the first streak's logs are still there" ||
		sr_fail "  logs in $out/d: $(ls "$out/d")"
fi

# the pause file holds the next run back until it goes
echo 0 >"$STANDIN_COUNT"
: >"$out/d/pause"
bash "$streak" -n 1 -d "$out/d" "$repo" >"$SR_TMP/paused.out" 2>&1 &
spid=$!
sleep 2
[ "$(cat "$STANDIN_COUNT")" = 0 ] && sr_pass "a paused streak starts no run" || sr_fail "a run started despite the pause file"
rm -f "$out/d/pause"
if wait "$spid"; then
	sr_pass "  and runs once the file is gone"
	sr_expect "$SR_TMP/paused.out" 'paused before run 1' "  it said it was paused"
else
	sr_fail "  the streak failed after the pause: $(cat "$SR_TMP/paused.out")"
fi

sr_run_fail "RUNS must be a number" -- bash "$streak" -n x "$repo" &&
	sr_expect "$SR_OUT" "RUNS must be a positive number, not 'x'" "  and says so"
sr_run_fail "an unknown commit is refused" -- bash "$streak" -r no-such-rev -d "$out/c" "$repo" &&
	sr_expect "$SR_OUT" "no commit 'no-such-rev'" "  and named"
sr_run "-h prints the usage" -- bash "$streak" -h &&
	sr_expect "$SR_OUT" '^usage: scripts/streak.sh' "  usage line"
sr_finish
