#!/bin/bash
# scripts/streak.sh (`make test-streak`: CI on a fresh clone, N times in a
# row) against a stand-in repository whose .ci/run passes, or fails from
# its third run on: the count, the stop at the first failure with that
# clone and log kept, the passed clones removed, the log lines, and its
# answers to bad arguments.
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
	[ -d "$out/b/run-3" ] && [ -f "$out/b/run-3.log" ] && sr_pass "  the failed clone and its log are kept" ||
		sr_fail "  the failed run's clone or log is missing"
	sr_expect "$out/b/streak.log" 'run 3/5 .* FAILED \(exit 1\)' "  streak.log marks the failure"
fi

sr_run_fail "RUNS must be a number" -- bash "$streak" -n x "$repo" &&
	sr_expect "$SR_OUT" "RUNS must be a positive number, not 'x'" "  and says so"
sr_run_fail "an unknown commit is refused" -- bash "$streak" -r no-such-rev -d "$out/c" "$repo" &&
	sr_expect "$SR_OUT" "no commit 'no-such-rev'" "  and named"
sr_run "-h prints the usage" -- bash "$streak" -h &&
	sr_expect "$SR_OUT" '^usage: scripts/streak.sh' "  usage line"
sr_finish
