#!/bin/bash
# iSER faults between two hosts (network namespaces; tgtd's iSER target on
# B, sr-iscsi-io on A), on Soft-RoCE and on Soft-iWARP:
#  - the initiator killed (SIGKILL) in the middle of a write run: every
#    write it had acknowledged is on the LUN, tgtd lives on and takes new
#    logins;
#  - the target killed in the middle of a write run and of a read run: the
#    initiator ends by itself with an error, not a hang; tgtd started again
#    on the same LUN has every acknowledged write;
#  - 2 % of the packets dropped in both directions at B (UDP 4791 for
#    RoCE, the iSER TCP port for iWARP) during a write run: it completes,
#    and every write it had acknowledged reads back right.
# sr-iscsi-io logs each acknowledged WRITE as it completes (-l) and later
# reads back exactly those blocks (-L).  libiscsi 1.19's iSER does not fail
# its commands when the connection goes (it ignores flushed completions),
# so the initiator's end comes from sr-iscsi-io's own stall limit (-T).
. "$(dirname "$0")/lib.sh"
sr_need_storage
sr_need_cmd nft
sr_init roce
sr_netns_setup

lun=$SR_TMP/lun.img
truncate -s 64M "$lun"

# start_io NAME ARGS...: sr-iscsi-io on A in the background (IO_PID, IO_OUT)
start_io() {
	local name=$1
	shift
	sr_new_log "$name"
	IO_OUT=$SR_OUTFILE
	timeout -k 5 120 "${a[@]}" "$SR_ISCSI_IO" -i "$SR_ISCSI_INI" "$@" >"$IO_OUT" 2>&1 </dev/null &
	IO_PID=$!
	SR_PIDS+=("$IO_PID")
}

# wait_acks LOG N: until LOG has N lines (acknowledged writes); 1 on timeout
wait_acks() {
	local i
	for i in $(seq 1 300); do
		[ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# kill_now PID: SIGKILL the program under the timeout PID
kill_now() {
	pkill -KILL -P "$1"
}

# verify_acked DESC LOG SEED: the blocks LOG names hold their pattern
verify_acked() {
	local n
	n=$(wc -l <"$2")
	sr_run "$1 ($n acknowledged writes)" -- "${a[@]}" "$SR_ISCSI_IO" -i "$SR_ISCSI_INI" -L "$2" -s "$3" -b 64k "$iser" &&
		sr_expect "$SR_OUT" '^verify: [0-9]+ blocks match' "  every acknowledged block is on the LUN"
}

# io_ends DESC LIMIT: the background sr-iscsi-io ended by itself, with an
# error, within LIMIT seconds of the fault
io_ends() {
	local t0=$SECONDS rc
	while kill -0 "$IO_PID" 2>/dev/null && [ $((SECONDS - t0)) -le "$2" ]; do
		sleep 0.2
	done
	if kill -0 "$IO_PID" 2>/dev/null; then
		sr_fail "$1: the initiator still runs $2 s after the fault"
		sr_dump "$IO_OUT"
		kill_now "$IO_PID"
		wait "$IO_PID"
		sr_forget "$IO_PID"
		return 1
	fi
	wait "$IO_PID"
	rc=$?
	sr_forget "$IO_PID"
	if [ "$rc" -eq 2 ]; then
		sr_pass "$1: the initiator ends by itself after $((SECONDS - t0)) s, with an error"
		sr_expect "$IO_OUT" 'sr-iscsi-io: .*(failed|no command completed)' "  it says what failed"
	else
		sr_fail "$1: initiator $(sr_status_str "$rc"), expected exit 2"
		sr_dump "$IO_OUT"
	fi
}

for type in roce iwarp; do
	echo "=== $type"
	sr_netns_hosts "$type"
	a=("${HOST_A[@]}")
	b=("${HOST_B[@]}")
	tport=$(sr_free_port "$SR_NS_B")
	iport=$(sr_free_port "$SR_NS_B" 32768)
	sr_tgt_start "$type-b" "$type" "$SR_IP_B" "$tport" "$iport" "$lun" b || continue
	iser=iser://$SR_IP_B:$iport/$SR_TGT_IQN_ISER/1

	echo "--- $type: initiator killed mid-write (at ${SECONDS}s)"
	acks=$SR_TMP/$type-ack1.log
	start_io "$type-writer" -m write -t 60 -b 64k -q 16 -s 31 -l "$acks" "$iser"
	if wait_acks "$acks" 200; then
		kill_now "$IO_PID"
		wait "$IO_PID"
		sr_forget "$IO_PID"
		sr_pass "$type: initiator killed after 200+ acknowledged writes"
		verify_acked "$type: a new session reads back what the killed one wrote" "$acks" 31
		sr_run "$type: tgtd takes new logins" -- "${a[@]}" iscsi-inq -i "$SR_ISCSI_INI" "$iser"
	else
		sr_fail "$type: the writer acknowledged no writes"
		sr_dump "$IO_OUT"
	fi

	echo "--- $type: target killed mid-write (at ${SECONDS}s)"
	acks=$SR_TMP/$type-ack2.log
	start_io "$type-writer2" -m write -t 60 -b 64k -q 16 -s 32 -T 5 -l "$acks" "$iser"
	if wait_acks "$acks" 200; then
		kill_now "$SR_TGT_PID"
		io_ends "$type: target killed mid-write" 30
		sr_tgt_stop
		if sr_tgt_start "$type-b2" "$type" "$SR_IP_B" "$tport" "$iport" "$lun" b; then
			verify_acked "$type: tgtd started again has every acknowledged write" "$acks" 32
		fi
	else
		sr_fail "$type: the writer acknowledged no writes"
		sr_dump "$IO_OUT"
	fi

	echo "--- $type: target killed mid-read (at ${SECONDS}s)"
	start_io "$type-reader" -m read -t 60 -b 64k -q 16 -T 5 "$iser"
	sleep 2
	kill_now "$SR_TGT_PID"
	io_ends "$type: target killed mid-read" 30
	sr_tgt_stop
	sr_tgt_start "$type-b3" "$type" "$SR_IP_B" "$tport" "$iport" "$lun" b || continue
	verify_acked "$type: the LUN still holds the acknowledged writes" "$acks" 32

	echo "--- $type: 2% loss at B during a write run (at ${SECONDS}s)"
	# The loss starts once the session is up: libiscsi's iSER gives up on
	# any synchronous command (login, READ CAPACITY) that waits a second
	# without a completion, and a lost packet costs RoCE its retransmission
	# timeout (2 s, rdma_cm's default, as in the kernel).
	table=srloss$$$type
	if [ "$type" = roce ]; then
		match="udp dport 4791"
		match_out=$match
	else
		match="tcp dport $iport"
		match_out="tcp sport $iport"
	fi
	acks=$SR_TMP/$type-ack3.log
	start_io "$type-lossy-writer" -m write -t 8 -b 64k -q 16 -s 34 -T 60 -l "$acks" "$iser"
	if ! wait_acks "$acks" 50; then
		sr_fail "$type: the writer acknowledged no writes"
		sr_dump "$IO_OUT"
	elif ip netns exec "$SR_NS_B" nft -f - <<NFT; then
table inet $table {
	chain in { type filter hook input priority 0; $match numgen random mod 100 < 2 counter drop; }
	chain out { type filter hook output priority 0; $match_out numgen random mod 100 < 2 counter drop; }
}
NFT
		before=$(wc -l <"$acks")
		wait "$IO_PID"
		rc=$?
		sr_forget "$IO_PID"
		after=$(wc -l <"$acks")
		dropped=$(ip netns exec "$SR_NS_B" nft list table inet "$table" | sed -n 's/.*packets \([0-9]*\).*/\1/p' |
			awk '{ s += $1 } END { print s + 0 }')
		ip netns exec "$SR_NS_B" nft delete table inet "$table"
		if [ "$rc" -eq 0 ] && [ "$after" -gt "$before" ]; then
			sr_pass "$type: the write run completes under 2% loss ($((after - before)) writes acknowledged under loss)"
		else
			sr_fail "$type: write run under loss: $(sr_status_str "$rc"), $((after - before)) writes acknowledged under loss"
			sr_dump "$IO_OUT"
		fi
		[ "$dropped" -gt 0 ] && sr_pass "  the rules dropped $dropped packets" || sr_fail "  nothing was dropped"
		verify_acked "$type: after the loss, a new session reads back every acknowledged write" "$acks" 34
	else
		sr_fail "$type: nftables cannot add the loss rules"
	fi
	sr_tgt_stop
done
sr_finish
