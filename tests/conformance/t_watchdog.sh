#!/bin/bash
# The conformance harness's hang watchdog (lib.sh: sr_watch): a command
# that stops exchanging packets is reported with every thread's backtrace
# and killed, a slow one that keeps exchanging packets is left alone.
. "$(dirname "$0")/lib.sh"
sr_need_cmd rping ib_send_bw gdb
sr_init
[ "$SR_PROGRESS" = 1 ] || sr_skip "needs a network namespace of its own (root) to count packets"

# a server nobody connects to: no packet moves, it is hung
out=$SR_TMP/hang.txt
(
	SR_TIMEOUT=3
	sr_run "rping server without a client" -- "$SR_RUN" rping -s -a 127.0.0.1 -p 7999 -C 1
) >"$out" 2>&1
rc=$?
sed 's/^/    > /' "$out"
[ "$rc" -ne 0 ] && sr_pass "the hung command fails" || sr_fail "the hung command passed"
sr_expect "$out" '^FAIL: rping server without a client: hung \(no packet for 3s' "  reported as hung"
sr_expect "$out" '^    ----- HANG: .*rping -s -a 127\.0\.0\.1' "  the hung command is named"
sr_expect "$out" '^    ----- every thread of [0-9]+ \[[^]]*\]: rping -s' "  rping's threads are listed"
sr_expect "$out" '^    \| Thread [0-9]+ .*\(LWP [0-9]+\)' "  with gdb's thread headers"
sr_expect "$out" '^    \| #[0-9]+ .* in (rdma_get_cm_event|.*poll|.*epoll_wait|.*read) ' "  and their frames"
sr_reject "$out" '^    ----- every thread of [0-9]+ \[[^]]*\]: (timeout|env|bash)' "  wrappers are skipped"
pgrep -f 'rping -s -a 127.0.0.1 -p 7999' >/dev/null && sr_fail "  the hung rping still runs" || sr_pass "  and killed"

# a command that keeps exchanging packets for longer than SR_TIMEOUT is not hung
(
	SR_TIMEOUT=2
	sr_perftest_tries sr_perftest_once "ib_send_bw -R -D 5: 5 s of traffic under a 2 s watchdog" cm: \
		ib_send_bw -D 5
) >"$out" 2>&1
rc=$?
sed 's/^/    > /' "$out"
[ "$rc" -eq 0 ] && sr_pass "a slow command that makes progress passes" || sr_fail "a slow command that makes progress failed"
sr_reject "$out" 'HANG' "  no hang reported"

sr_finish
