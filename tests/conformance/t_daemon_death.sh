#!/bin/bash
# softrdmad killed under running programs (issue 15 item 7): nothing may
# hang.  The verbs contexts that used it get IBV_EVENT_DEVICE_FATAL, their
# QPs go to error and outstanding work completes with WR_FLUSH_ERR; rdma_cm
# ids on RoCE get RDMA_CM_EVENT_DEVICE_REMOVAL.  So a UD and an RC
# ping-pong in the middle of their exchange, an rping pair and an rping
# server waiting for a client all end, with an error, within 10 s (the
# time each took is printed); and programs started afterwards work with
# the daemon the library starts again.  Runs in a network namespace of its
# own, so the daemon it kills is its own; skips (77) without root.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || sr_skip "needs root (a network namespace of its own)"
sr_need_cmd unshare ip stdbuf ibv_ud_pingpong ibv_rc_pingpong rping
sr_init
[ -n "${SR_IN_PRIVATE_NETNS:-}" ] || sr_skip "needs a network namespace of its own (sr_init makes one as root)"
B=$SR_BUILD_DIR/bin
export SOFTRDMA_DAEMON_LOG=$SR_TMP/daemon.log
LIMIT_MS=10000

daemon_pid() {
	"$B/softrdma-cfg" status 2>/dev/null | sed -n 's/^Daemon: running (pid \([0-9]*\)).*/\1/p'
}
start_daemon() {
	"$B/softrdma-cfg" start --idle-exit 120 >/dev/null 2>&1 || sr_die "softrdma-cfg start failed"
	DPID=$(daemon_pid)
	[ -n "$DPID" ] || sr_die "no daemon after softrdma-cfg start"
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# bg NAME CMD...: runs CMD in the background, output in $SR_TMP/NAME.out;
# its pid in BG_PID
bg() {
	local name=$1
	shift
	sr_new_log "$@"
	timeout -k 5 120 "$@" >"$SR_TMP/$name.out" 2>&1 </dev/null &
	BG_PID=$!
	SR_PIDS+=("$BG_PID")
}

# ends_by_itself DESC KILLED_MS PID...: each PID ends within LIMIT_MS of
# KILLED_MS, with a status other than 0 (it saw the error) and other than
# the timeout's.  Prints the time each took.
ends_by_itself() {
	local desc=$1 killed=$2 pid rc t all_ok=1 times=""
	shift 2
	for pid in "$@"; do
		while kill -0 "$pid" 2>/dev/null && [ $(($(now_ms) - killed)) -lt "$LIMIT_MS" ]; do
			sleep 0.05
		done
		t=$(($(now_ms) - killed))
		if kill -0 "$pid" 2>/dev/null; then
			all_ok=0
			times="$times still running after ${t} ms;"
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
		else
			wait "$pid"
			rc=$?
			times="$times $(sr_status_str "$rc") after ${t} ms;"
			case $rc in 0 | 124 | 137) all_ok=0 ;; esac
		fi
		sr_forget "$pid"
	done
	if [ $all_ok = 1 ]; then
		sr_pass "$desc: ended with an error:$times"
	else
		sr_fail "$desc:$times"
	fi
	[ $all_ok = 1 ]
}

# (the daemon is not our child: whoever reaps it may take its time, so
# "dead" is a zombie too)
kill_daemon() {
	kill -KILL "$DPID"
	KILLED=$(now_ms)
	while kill -0 "$DPID" 2>/dev/null && ! grep -q '^[^)]*) [ZX]' "/proc/$DPID/stat" 2>/dev/null; do
		sleep 0.01
	done
}

# wait_for FILE ERE: up to 20 s for a line of FILE to match
wait_for() {
	for _ in $(seq 200); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# --- ping-pongs in the middle of their exchange ---
for prog in ibv_ud_pingpong ibv_rc_pingpong; do
	start_daemon
	port=$(sr_free_port)
	# stdbuf: the client's "remote address" line must show before it ends
	bg "$prog-server" stdbuf -oL "$SR_RUN" $prog -g 0 -s 1024 -n 100000000 -p "$port"
	spid=$BG_PID
	sr_wait_listen "$port" "$spid" || sr_fail "$prog server did not listen"
	bg "$prog-client" stdbuf -oL "$SR_RUN" $prog -g 0 -s 1024 -n 100000000 -p "$port" 127.0.0.1
	cpid=$BG_PID
	wait_for "$SR_TMP/$prog-client.out" 'remote address' || sr_fail "$prog client did not connect"
	sleep 1
	kill_daemon
	if ends_by_itself "$prog pair when softrdmad is killed" "$KILLED" "$spid" "$cpid"; then
		sr_expect "$SR_TMP/$prog-client.out" 'Failed status|Completion was found|poll CQ failed' \
			"  the client saw error completions"
	else
		sr_dump "$SR_TMP/$prog-client.out" client
	fi
done

# --- rping: a connected pair, and a server waiting for a client ---
start_daemon
port=$(sr_free_port)
bg rping-server "$SR_RUN" rping -s -a 127.0.0.1 -p "$port" -C 100000000
spid=$BG_PID
sr_wait_listen "cm:$port" "$spid" || sr_fail "rping server did not listen"
bg rping-client stdbuf -oL "$SR_RUN" rping -c -a 127.0.0.1 -p "$port" -C 100000000 -v
cpid=$BG_PID
wait_for "$SR_TMP/rping-client.out" '^ping data' || sr_fail "rping client exchanged no data"
sleep 0.5
kill_daemon
ends_by_itself "rping pair when softrdmad is killed" "$KILLED" "$spid" "$cpid" ||
	sr_dump "$SR_TMP/rping-client.out" client

start_daemon
port=$(sr_free_port)
bg rping-waiting "$SR_RUN" rping -s -a 127.0.0.1 -p "$port"
spid=$BG_PID
sr_wait_listen "cm:$port" "$spid" || sr_fail "rping server did not listen"
kill_daemon
if ends_by_itself "rping server waiting for a client when softrdmad is killed" "$KILLED" "$spid"; then
	sr_expect "$SR_TMP/rping-waiting.out" 'device removal' "  it saw RDMA_CM_EVENT_DEVICE_REMOVAL"
else
	sr_dump "$SR_TMP/rping-waiting.out" server
fi

# --- afterwards: the library starts a daemon again ---
port=$(sr_free_port)
sr_pair "ibv_rc_pingpong after the kills (the library starts softrdmad again)" "$port" \
	-- "$SR_RUN" ibv_rc_pingpong -g 0 -c -n 100 -p "$port" \
	-- "$SR_RUN" ibv_rc_pingpong -g 0 -c -n 100 -p "$port" 127.0.0.1
port=$(sr_free_port)
sr_pair "rping after the kills" "cm:$port" \
	-- "$SR_RUN" rping -s -a 127.0.0.1 -p "$port" -C 10 -V \
	-- "$SR_RUN" rping -c -a 127.0.0.1 -p "$port" -C 10 -V
DPID=$(daemon_pid)
[ -n "$DPID" ] && kill "$DPID"
sr_finish
