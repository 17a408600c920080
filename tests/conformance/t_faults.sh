#!/bin/bash
# Fault injection (SOFTRDMA_FAULTS, softrdma-run --faults) under Debian's
# unmodified RDMA programs, on one host, no root needed.  One process gets
# the faults, its peer none: what it sends is dropped, duplicated,
# reordered or corrupted.  (With both ends at 20% loss RC's retry_cnt of 7
# would now and then run out, as on any RoCE NIC, which is not what these
# tests are about.)
#
#  RoCE (rxe0 on lo):
#  - ib_write_bw, 64 KiB writes, at 0, 1, 5, 10 and 20% loss: every run
#    completes, goodput in a table beside the fault-free run and, at 1, 5
#    and 10%, at least a floor's share of it; fault_drop counted
#    (softrdma-cfg statistic);
#  - rping -V (each ping's data validated) under dup, reorder, corrupt,
#    drop and delay: the data the two ends print match, the fault counted,
#    the delay's time taken;
#  - a corrupt=100% client whose ICRC the server checks: nothing gets
#    through, crc_err counts every one.
#  iWARP (siw0 on lo), where TCP loses nothing and drop is a stall:
#  - rping -V under drop=5% (rto=50ms): intact, the stalls counted;
#  - rping -V under delay=20ms,jitter=5ms: intact, and no quicker than the delay;
#  - ib_write_bw -R at 0 and 2% drop: goodput;
#  - corrupt, reset and truncate at 100%: the first FPDU is damaged, the
#    peer's MPA CRC check (or framing) sends a Terminate or sees the reset,
#    and both ends end with an error, in well under a second.
. "$(dirname "$0")/lib.sh"
sr_need_cmd rping ib_write_bw ibv_devinfo
sr_init
# counters of this test's processes only (device totals include exited ones)
export SOFTRDMA_RUNTIME_DIR=$SR_TMP/run
export SOFTRDMA_DAEMON_SOCK=softrdma-test-$$-$RANDOM
CFG=$SR_BUILD_DIR/bin/softrdma-cfg

# counter NAME: the device total of NAME (every device, live and exited
# processes of this test)
counter() {
	"$CFG" statistic show 2>/dev/null |
		awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) s += $(i + 1) } END { print s + 0 }'
}

# injected NAME BEFORE DESC: the counter grew since BEFORE
injected() {
	local now
	now=$(counter "$1")
	if [ "$now" -gt "$2" ]; then
		sr_pass "  $3: $1 $((now - $2))"
	else
		sr_fail "  $3: $1 did not grow ($2 -> $now)"
	fi
}

# ---- the knob itself -----------------------------------------------------------
sr_run_fail "softrdma-run --faults drop=5x: refused before the program runs" -- "$SR_RUN" --faults drop=5x true &&
	sr_expect "$SR_OUT" "^softrdma-run: --faults 'drop=5x': drop=5x: expected a percentage" "  and says why"
sr_run "softrdma-cfg faults --check gives the canonical form" -- "$CFG" faults --check " duplicate=0.50 drop=5" &&
	sr_expect "$SR_OUT" '^drop=5%,dup=0.5%,seed=0$' "  drop=5%,dup=0.5%,seed=0"
sr_run_fail "SOFTRDMA_FAULTS=drop=5x: the program gets no device" -- env SOFTRDMA_FAULTS=drop=5x "$SR_RUN" ibv_devinfo &&
	sr_expect "$SR_OUT" "SOFTRDMA_FAULTS='drop=5x'" "  and the library says why"

# ---- RoCE: loss matrix with ib_write_bw ------------------------------------
# perftest ends with a barrier over its TCP side channel, after every
# completion: a peer never leaves while the other still waits for an ACK.
# (ibv_rc_pingpong does not: its last ACK lost, the other end retries at a
# process that is gone and fails with RETRY_EXC_ERR, as on any lossy RoCE
# network.)  Data integrity under loss: rping -V below, verbs/test_faults.

echo "--- RoCE: ib_write_bw -s 65536 (QP timeout 67 ms), faults in the client"
declare -a rows
base=
# floor RATE: the least goodput at drop=RATE% as a fraction of the same
# run's fault-free goodput.  Recovery in round trips keeps several times
# these on a loaded machine and under ASan; go-back-N on the QP's timeout
# alone did not reach them.
floor() {
	case $1 in
	1) echo 0.10 ;;
	5) echo 0.02 ;;
	10) echo 0.006 ;;
	*) echo 0 ;;
	esac
}
# above_floor MBS: goodput MBS at drop=$rate% keeps floor's share of base
above_floor() {
	local min
	min=$(floor "$rate")
	[ -n "$base" ] && [ "$min" != 0 ] || return 0
	if awk -v a="$1" -v b="$base" -v m="$min" 'BEGIN { exit !(b > 0 && a >= m * b) }'; then
		sr_pass "  drop=$rate%: $1 MB/s, at least $min of the fault-free $base"
	else
		sr_fail "  drop=$rate%: $1 MB/s, below $min of the fault-free $base"
	fi
}
# write_once: one pair at $faults, $iters writes (sr_perftest_tries runs
# it again if perftest fails by itself)
write_once() {
	P=$(sr_free_port)
	before=$(counter fault_drop)
	sr_pair "$(sr_try_desc "ib_write_bw, client at drop=$rate%")" "$P" \
		-- "$SR_RUN" ib_write_bw -x 0 -s 65536 -n "$iters" -p "$P" \
		-- "$SR_RUN" --faults "$faults" ib_write_bw -x 0 -s 65536 -n "$iters" -p "$P" 127.0.0.1
}
for rate in 0 1 5 10 20; do
	# runs long enough for steady ratios where there are floors
	iters=1000
	[ "$rate" -ge 10 ] && iters=200
	faults=off
	[ "$rate" = 0 ] || faults="drop=$rate%,seed=$rate"
	if sr_perftest_tries write_once; then
		mbs=$(awk '$1 == 65536 { print $4 }' "$SR_CLIENT_OUT")
		[ "$rate" = 0 ] && base=$mbs
		injected_n=$(($(counter fault_drop) - before))
		[ "$rate" = 0 ] || injected fault_drop "$before" "drop=$rate%"
		[ "$rate" = 0 ] || above_floor "$mbs"
		rows+=("$(printf '  %5s%%  %10s MB/s  %6s x  %5s dropped' "$rate" "$mbs" \
			"$(awk -v a="$mbs" -v b="$base" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')" "$injected_n")")
	fi
done
echo "  loss    goodput (perftest's average)   ratio to 0%"
printf '%s\n' "${rows[@]}"

# ---- RoCE: each fault kind under rping -V -----------------------------------

# rping_faults DESC FAULTS COUNTER SIZE COUNT LISTEN [MIN_MS]: rping with
# validation, the client under FAULTS; COUNTER "-" for none; with MIN_MS,
# the client took at least that long (what delay= must cost)
rping_faults() {
	local desc=$1 faults=$2 ctr=$3 size=$4 count=$5 listen=$6 min_ms=${7:-} before t0 ms
	P=$(sr_free_port)
	before=$(counter "$ctr")
	t0=$EPOCHREALTIME
	[ "$listen" = cm ] && listen=cm:$P || listen=$P
	echo "--- $desc"
	# sr_pair waits for LISTEN: the TCP port, or cm:PORT (softrdmad's table)
	if sr_pair "$desc" "$listen" \
		-- "${ERRTO[@]}" "$SR_TMP/rs.err" "$SR_RUN" rping -s -a 127.0.0.1 -p "$P" -S "$size" -C "$count" -v -V \
		-- "${ERRTO[@]}" "$SR_TMP/rc.err" "$SR_RUN" --faults "$faults" rping -c -a 127.0.0.1 -p "$P" \
		-S "$size" -C "$count" -v -V; then
		sr_rping_data_match "$count"
		sr_reject "$SR_TMP/rc.err" 'mismatch|error|fail' "  client: no data mismatch, no error"
		sr_reject "$SR_TMP/rs.err" 'mismatch|error|fail' "  server: no data mismatch, no error"
		[ "$ctr" = - ] || injected "$ctr" "$before" "$faults"
		if [ -n "$min_ms" ]; then
			ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
			[ "$ms" -ge "$min_ms" ] && sr_pass "  $count pings took $ms ms (at least $min_ms: the delay)" ||
				sr_fail "  $count pings took $ms ms, less than the delay allows ($min_ms)"
		fi
	fi
}

rping_faults "RoCE rping -V, client at dup=10%" "dup=10%" fault_dup 4000 40 cm
rping_faults "RoCE rping -V, client at reorder=10%" "reorder=10%" fault_reorder 4000 40 cm
rping_faults "RoCE rping -V, client at corrupt=3%" "corrupt=3%,seed=5" fault_corrupt 4000 40 cm
rping_faults "RoCE rping -V, client at drop=3%" "drop=3%,seed=5" fault_drop 4000 40 cm
# a ping waits in turn for three of the client's messages (its two Sends and
# its Read Response), each delayed 15 ms at least: 20 take 900 ms or more
rping_faults "RoCE rping -V, client at delay=20ms,jitter=5ms,drop=1%" "delay=20ms,jitter=5ms,drop=1%" - 4000 20 cm 900

echo "--- RoCE: every datagram corrupted: none gets through, the ICRC check counts them"
before=$(counter crc_err)
bc=$(counter fault_corrupt)
P=$(sr_free_port)
# perftest's own retry: 7 retries of 67 ms, then RETRY_EXC_ERR
sr_new_log ib_write_bw-server
timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" ib_write_bw -x 0 -n 5 -p "$P" >"$SR_OUTFILE" 2>&1 </dev/null &
spid=$!
SR_PIDS+=("$spid")
if sr_wait_listen "$P" "$spid"; then
	sr_run_fail "ib_write_bw client at corrupt=100% fails (retry exhausted)" -- \
		"$SR_RUN" --faults corrupt=100% ib_write_bw -x 0 -n 5 -p "$P" 127.0.0.1 &&
		sr_expect "$SR_OUT" 'Failed status 12' "  with status 12 (transport retry counter exceeded)"
	crc=$(($(counter crc_err) - before))
	cor=$(($(counter fault_corrupt) - bc))
	# the server checks each datagram that reaches its QP; a flipped
	# destination QP number sends a datagram elsewhere
	[ "$crc" -gt 0 ] && [ "$crc" -le "$cor" ] && sr_pass "  server's crc_err $crc of $cor corrupted" ||
		sr_fail "  server's crc_err $crc, fault_corrupt $cor"
fi
sr_reap "$spid"

# ---- iWARP -------------------------------------------------------------------

IW_CONF=$SR_TMP/siw.conf
sr_write_conf "$IW_CONF" lo iwarp
export SOFTRDMA_CONF=$IW_CONF

rping_faults "iWARP rping -V, client at drop=5% (a 50 ms stall each)" "drop=5%,rto=50ms" fault_drop 4000 40 tcp
rping_faults "iWARP rping -V, client at delay=20ms,jitter=5ms" "delay=20ms,jitter=5ms" - 4000 20 tcp 900

echo "--- iWARP: ib_write_bw -R, 64 KiB, client at 0% and drop=2% (200 ms stalls)"
write_r_once() {
	P=$(sr_free_port)
	sr_pair "$(sr_try_desc "ib_write_bw -R, client faults $faults")" "$P" \
		-- "$SR_RUN" ib_write_bw -R -s 65536 -n 300 -p "$P" \
		-- "$SR_RUN" --faults "$faults" ib_write_bw -R -s 65536 -n 300 -p "$P" 127.0.0.1
}
for faults in off drop=2%; do
	if sr_perftest_tries write_r_once; then
		echo "  $faults: $(awk '$1 == 65536 { print $4 " MB/s average" }' "$SR_CLIENT_OUT")"
	fi
done

# iw_fatal KIND EXPECT-SERVER EXPECT-CLIENT: every FPDU of the client
# faulted; both ends must end, each with its error, within 5 s of the
# first one
iw_fatal() {
	local kind=$1 exp_s=$2 exp_c=$3 before spid cpid t0 rc
	P=$(sr_free_port)
	before=$(counter "fault_$kind")
	echo "--- iWARP: client at $kind=100%"
	sr_new_log "rping-server-$kind"
	local sout=$SR_OUTFILE
	SOFTRDMA_DEBUG=1 timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" rping -s -a 127.0.0.1 -p "$P" -C 1000 -V \
		>"$sout" 2>&1 </dev/null &
	spid=$!
	SR_PIDS+=("$spid")
	if ! sr_wait_listen "$P" "$spid"; then
		sr_fail "rping server did not listen"
		return
	fi
	sr_new_log "rping-client-$kind"
	local cout=$SR_OUTFILE
	t0=$EPOCHREALTIME
	SOFTRDMA_DEBUG=1 timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" --faults "$kind=100%" rping -c -a 127.0.0.1 -p "$P" \
		-C 1000 -V >"$cout" 2>&1 </dev/null &
	cpid=$!
	wait "$cpid"
	rc=$?
	wait "$spid"
	sr_forget "$spid"
	local ms
	ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
	if [ "$rc" -ne 124 ] && [ "$ms" -lt 5000 ]; then
		sr_pass "both ends ended ${ms} ms after the client started"
	else
		sr_fail "$kind=100%: client $(sr_status_str "$rc") after $ms ms"
		sr_dump "$cout" client
		sr_dump "$sout" server
	fi
	sr_expect "$sout" "$exp_s" "  server: $exp_s"
	sr_expect "$cout" "$exp_c" "  client: $exp_c"
	sr_reject "$cout" '^ping data' "  no ping completed"
	injected "fault_$kind" "$before" "$kind=100%"
}

# the flipped bit may fall in the CRC-covered payload (an MPA CRC error)
# or in the DDP/RDMAP header (that layer's error): a Terminate either way
iw_fatal corrupt 'Terminate: ' 'Terminate received'
# the reset may reach the server before its rdma_accept is through
iw_fatal reset 'receive failed|connection ended \(4\)|rdma_accept' 'fault: resetting the connection'
iw_fatal truncate 'Terminate: .*(TCP|LLP|lost)' 'fault: stream ended'

sr_finish
