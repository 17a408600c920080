#!/bin/bash
# A peer dies (SIGKILL) in the middle of a transfer: the survivor must get
# an error completion or event by itself, in a time the protocol bounds.
# Each case prints the time measured from the kill to the survivor's exit.
#
#  RoCE, verbs only (ib_write_bw without -R: no CM, nobody tells the
#  survivor): its outstanding writes are retransmitted retry_cnt (7) times
#  after each QP timeout, then fail with RETRY_EXC_ERR (status 12): 8
#  timeouts after the last ACK.  Checked at the default timeout 14 (67 ms:
#  0.54 s) and at 12 (16.8 ms: 0.13 s).  The survivor runs with
#  SOFTRDMA_DEBUG=1, which logs each timeout with the retries left: its
#  last 8 must count down 7..0 (no retry skipped), and the time from the
#  kill must be at least (7 - K) timeouts, K being the timeouts logged
#  before the kill (a server slowed by load may have stopped acknowledging
#  a timeout or more before it died: the last ACK, not the kill, starts
#  the count).
#  RoCE, rdma_cm (rping): softrdmad sends the DREQ the dead process left
#  it (its "CM will"); the survivor gets DISCONNECTED at once.
#  iWARP, rdma_cm (rping, ib_write_bw -R): the kernel closes the dead
#  process's TCP connections; the survivor sees the FIN or reset and gets
#  DISCONNECTED and flushed work.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ib_write_bw rping stdbuf
sr_init
export SOFTRDMA_DAEMON_SOCK=softrdma-test-$$-$RANDOM

# ms_since T0: milliseconds since T0 (an $EPOCHREALTIME)
ms_since() {
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'
}

# survive DESC LISTEN READY MIN_MS MAX_MS EXPECT -- SERVER... -- CLIENT...:
# starts the server, then the client; once the client's output matches
# READY (it is moving data: perftest's header of results, line-buffered
# by stdbuf; rping's first ping) and half a second more, kills the server
# (SIGKILL) and times the client's end, which must come by itself between
# MIN_MS and MAX_MS, its output matching EXPECT
survive() {
	local desc=$1 listen=$2 ready=$3 min=$4 max=$5 expect=$6 spid cpid t0 ms rc i
	local -a srv=() cli=()
	shift 6
	[ "$1" = -- ] && shift
	while [ "$1" != -- ]; do
		srv+=("$1")
		shift
	done
	shift
	cli=("$@")
	echo "--- $desc"
	sr_new_log "${srv[@]}"
	"${srv[@]}" >"$SR_OUTFILE" 2>&1 </dev/null &
	spid=$!
	SR_PIDS+=("$spid")
	if ! sr_wait_listen "$listen" "$spid"; then
		sr_fail "$desc: the server did not listen"
		sr_dump "$SR_OUTFILE" server
		sr_reap "$spid"
		return
	fi
	sr_new_log "${cli[@]}"
	timeout -k 5 "$SR_TIMEOUT" "${cli[@]}" >"$SR_OUTFILE" 2>&1 </dev/null &
	cpid=$!
	SR_PIDS+=("$cpid")
	for ((i = 0; i < 300; i++)); do
		grep -Eq -- "$ready" "$SR_OUTFILE" && break
		sleep 0.1
	done
	sleep 0.5
	if ! kill -0 "$cpid" 2>/dev/null || ! grep -Eq -- "$ready" "$SR_OUTFILE"; then
		sr_fail "$desc: the client ended, or never got going, before the server was killed"
		sr_dump "$SR_OUTFILE" client
		sr_reap "$spid"
		return
	fi
	kill -KILL "$spid"
	t0=$EPOCHREALTIME
	if [ -n "${RETRY_T_MS:-}" ]; then
		# timeouts already logged (one logged just after the kill counts
		# here too: that only lowers the bound)
		local k0
		k0=$(grep -c 'retries left' "$SR_OUTFILE")
		min=$(awk -v t="$RETRY_T_MS" -v k="$k0" 'BEGIN { n = 7 - k; if (n < 0) n = 0; printf "%d", n * t }')
	fi
	wait "$cpid"
	rc=$?
	ms=$(ms_since "$t0")
	wait "$spid" 2>/dev/null
	sr_forget "$spid"
	sr_forget "$cpid"
	if [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ "$ms" -ge "$min" ] && [ "$ms" -le "$max" ]; then
		sr_pass "$desc: the survivor ended ${ms} ms after the kill (bound ${min}..${max} ms)"
		sr_expect "$SR_OUTFILE" "$expect" "  it saw: $expect"
		if [ -n "${RETRY_T_MS:-}" ]; then
			local left
			left=$(grep -o '[0-9]* retries left' "$SR_OUTFILE" | tail -8 | awk '{printf "%s ", $1}')
			if [ "$left" = "7 6 5 4 3 2 1 0 " ]; then
				sr_pass "  its last 8 timeouts counted down the retries: $left"
			else
				sr_fail "  its last 8 timeouts should count down the retries 7..0: $left"
				sr_dump "$SR_OUTFILE" client
			fi
		fi
	else
		sr_fail "$desc: the survivor ended $(sr_status_str "$rc") ${ms} ms after the kill (bound ${min}..${max} ms)"
		sr_dump "$SR_OUTFILE" client
	fi
}

# ---- RoCE, verbs only: retry exhaustion --------------------------------------
# 7 and 8 QP timeouts (sr_timeout_ns: 4.096 us << timeout), plus 1.5 s for
# a loaded machine to get round to it
for u in 14 12; do
	t_ms=$(awk -v u="$u" 'BEGIN { printf "%.1f", 4.096 * 2 ^ u / 1000 }')
	lo=$(awk -v u="$u" 'BEGIN { printf "%d", 7 * 4.096 * 2 ^ u / 1000 }')
	hi=$(awk -v u="$u" 'BEGIN { printf "%d", 8 * 4.096 * 2 ^ u / 1000 + 1500 }')
	P=$(sr_free_port)
	RETRY_T_MS=$t_ms survive "RoCE verbs: ib_write_bw -u $u (timeout $t_ms ms, retry_cnt 7), server killed" "$P" \
		'#bytes' "$lo" "$hi" 'Failed status 12' \
		-- "$SR_RUN" ib_write_bw -x 0 -s 4096 -D 30 -u "$u" -p "$P" \
		-- env SOFTRDMA_DEBUG=1 stdbuf -oL "$SR_RUN" ib_write_bw -x 0 -s 4096 -D 30 -u "$u" -p "$P" 127.0.0.1
done

# ---- RoCE, rdma_cm: the dead process's DREQ ----------------------------------
P=$(sr_free_port)
survive "RoCE rdma_cm: rping, server killed" "cm:$P" '^ping data' 0 1500 'DISCONNECT EVENT' \
	-- "$SR_RUN" rping -s -a 127.0.0.1 -p "$P" \
	-- "$SR_RUN" rping -c -a 127.0.0.1 -p "$P" -v

# ---- iWARP: FIN / reset from the dead process's kernel -----------------------
sr_write_conf "$SR_TMP/siw.conf" lo iwarp
export SOFTRDMA_CONF=$SR_TMP/siw.conf
P=$(sr_free_port)
survive "iWARP rdma_cm: rping, server killed" "$P" '^ping data' 0 1500 'DISCONNECT EVENT' \
	-- "$SR_RUN" rping -s -a 127.0.0.1 -p "$P" \
	-- "$SR_RUN" rping -c -a 127.0.0.1 -p "$P" -v
P=$(sr_free_port)
survive "iWARP: ib_write_bw -R, server killed" "$P" '#bytes' 0 1500 'Completion with error|Failed status|error' \
	-- "$SR_RUN" ib_write_bw -R -s 65536 -D 30 -p "$P" \
	-- stdbuf -oL "$SR_RUN" ib_write_bw -R -s 65536 -D 30 -p "$P" 127.0.0.1
sr_finish
