#!/bin/bash
# The stress programs (stress_programs.sh, bounded counts) while a CPU hog
# spins on every core: scheduling-dependent lost wakeups and livelocks
# show up as hangs (no packet for SR_TIMEOUT seconds), reported with every
# thread's backtrace.  `make test-stress` runs the full default suites,
# with a second copy of the list at the same time.
. "$(dirname "$0")/lib.sh"
sr_init
hogs=()
for _ in $(seq 1 "$(nproc)"); do
	bash -c 'while :; do :; done' &
	hogs+=("$!")
done
sr_on_exit "kill ${hogs[*]} 2>/dev/null"
echo "# $(nproc) CPU hogs: ${hogs[*]}"
bash "$(dirname "$0")/stress_programs.sh"
rc=$?
[ "$rc" -eq 0 ] && sr_pass "every program passed under load" || sr_fail "stress_programs.sh failed (exit $rc)"
sr_finish
