#!/bin/bash
# UD multicast (ibv_attach_mcast) through softrdmad, in network namespaces:
#  - test_mcast (errno, limits, delivery, Q_Key, detach) on lo in a
#    namespace set up as README's troubleshooting says (lo multicast on,
#    224.0.0.0/4 routed to lo);
#  - the daemon's MCAST_JOIN / MCAST_LEAVE protocol spoken directly
#    (daemon_mcast_test.py: errors, references, per-interface fan-out);
#  - daemon fan-out: one sender process, two receiver processes on one
#    host, each receiving every datagram; the daemon's membership goes
#    when the receivers detach, and when a receiver is killed;
#  - two hosts (veth between two namespaces), IPv4 and IPv6 groups: a
#    sender on A, receivers on B (two processes) and on A itself;
#  - mckey (rdmacm-utils, if installed) on one host and between two.
# The receivers and the sender are test_mcast's helper modes ("recv" and
# "send"), which check every datagram's payload and order.
. "$(dirname "$0")/lib.sh"
sr_init
[ "$(id -u)" -eq 0 ] || sr_skip "needs root to create network namespaces"
command -v ip >/dev/null 2>&1 || sr_skip "ip (iproute2) is not installed"
T=$SR_BUILD_DIR/tests/test_mcast
CFG=$SR_BUILD_DIR/bin/softrdma-cfg
[ -x "$T" ] || sr_die "$T not found: build the tests first"

QKEY=0x1e2d3c4b
N=30

# recv_start OUTVAR READYFILE AT-PREFIX-NAME GROUP: starts a receiver in
# the background; sets OUTVAR to its pid and SR_RECV_OUT to its output.
recv_start() {
	local -n pidvar=$1
	local ready=$2 group=$4
	local -n at=$3
	rm -f "$ready"
	sr_new_log "${at[@]}" "$T" recv "$group" "$N" "$QKEY" "$ready"
	SR_RECV_OUT=$SR_OUTFILE
	timeout -k 5 "$SR_TIMEOUT" "${at[@]}" "$T" recv "$group" "$N" "$QKEY" "$ready" >"$SR_RECV_OUT" 2>&1 </dev/null &
	pidvar=$!
	SR_PIDS+=("$pidvar")
}

# wait_ready FILE PID OUT: 0 once the receiver attached (FILE exists).
wait_ready() {
	for _ in $(seq 1 150); do
		[ -e "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	sr_fail "receiver $2 did not attach"
	sr_dump "$3" receiver
	return 1
}

# recv_finish PID OUT DESC: the receiver exits 0 having got all N.
recv_finish() {
	local rc
	wait "$1"
	rc=$?
	sr_forget "$1"
	if [ "$rc" -eq 0 ] && grep -q "received all $N datagrams" "$2" && grep -Eq ' 0 failed' "$2"; then
		sr_pass "$3"
		return 0
	fi
	sr_fail "$3: $(sr_status_str "$rc")"
	sr_dump "$2" receiver
	return 1
}

# status_wait AT-PREFIX-NAME ERE DESC: the daemon's status matches ERE
# within 5 s.
status_wait() {
	local -n at=$1
	for _ in $(seq 1 50); do
		if "${at[@]}" "$CFG" status 2>/dev/null | grep -Eq -- "$2"; then
			sr_pass "$3"
			return 0
		fi
		sleep 0.1
	done
	sr_fail "$3: the daemon's status never matched /$2/"
	"${at[@]}" "$CFG" status 2>&1 | sed 's/^/    | /'
	return 1
}

# ---- one host: lo with multicast on ----------------------------------------

id=$(printf '%03x%03x' $(($$ % 4096)) $((RANDOM % 4096)))
NS=sr-$id-mc
sr_netns_add "$NS"
if ! { ip -n "$NS" link set lo multicast on &&
	ip -n "$NS" route add 224.0.0.0/4 dev lo; }; then
	sr_die "cannot set up multicast on lo"
fi
# shellcheck disable=SC2034 # used through namerefs
AT=(ip netns exec "$NS" env SOFTRDMA_CONF="$SR_CONF")

sr_run "test_mcast on lo (multicast on, 224.0.0.0/4 routed to lo)" -- "${AT[@]}" "$T" &&
	sr_expect "$SR_OUT" '^test_mcast: [0-9]+ passed, 0 failed' "  ran every check (not skipped)"

G=239.78.$((RANDOM % 256)).$((RANDOM % 256))
if command -v python3 >/dev/null 2>&1; then
	# a second interface, so that a membership on it can be told apart
	other=
	ip -n "$NS" link add mcv0 type veth peer name mcv1 2>/dev/null &&
		ip -n "$NS" link set mcv0 up && ip -n "$NS" link set mcv1 up && other=mcv0
	if sr_run "the daemon is running" -- "${AT[@]}" "$CFG" start; then
		sr_run "the daemon's multicast protocol (daemon_mcast_test.py)" -- \
			ip netns exec "$NS" python3 "$SR_SOURCE_DIR/tests/conformance/daemon_mcast_test.py" "$G" $other
	fi
else
	echo "note: python3 is not installed: the protocol checks are left out"
fi

echo "--- fan-out on one host: 2 receiver processes, group $G"
recv_start R1 "$SR_TMP/r1.ready" AT "$G"
R1_OUT=$SR_RECV_OUT
recv_start R2 "$SR_TMP/r2.ready" AT "$G"
R2_OUT=$SR_RECV_OUT
if wait_ready "$SR_TMP/r1.ready" "$R1" "$R1_OUT" && wait_ready "$SR_TMP/r2.ready" "$R2" "$R2_OUT"; then
	status_wait AT "^ *mcast group ::ffff:$G ifindex 1 clients 2 " "  the daemon joined $G for 2 clients"
	sr_run "sender process: $N datagrams to $G" -- "${AT[@]}" "$T" send "$G" "$N" "$QKEY"
	recv_finish "$R1" "$R1_OUT" "receiver 1 got all $N datagrams, in order"
	recv_finish "$R2" "$R2_OUT" "receiver 2 got all $N datagrams, in order"
	status_wait AT "^ *mcast groups 0$" "  the daemon left the group after both detached"
	if "${AT[@]}" "$CFG" status >"$SR_TMP/status.out" 2>&1; then
		sr_expect "$SR_TMP/status.out" "no_mcast_member=0( |$)" "  no multicast datagram dropped for want of a member"
	fi
fi

echo "--- a receiver killed while attached"
recv_start R3 "$SR_TMP/r3.ready" AT "$G"
R3_OUT=$SR_RECV_OUT
if wait_ready "$SR_TMP/r3.ready" "$R3" "$R3_OUT"; then
	status_wait AT "^ *mcast group ::ffff:$G ifindex 1 clients 1 " "  the daemon joined $G for the receiver"
	# $R3 is timeout's pid: kill the receiver itself, by the pid it printed
	R3_PID=$(sed -n 's/^test_mcast recv: starting (pid \([0-9]*\)).*/\1/p' "$R3_OUT")
	[ -n "$R3_PID" ] || sr_die "no pid in the receiver's output"
	kill -KILL "$R3_PID" 2>/dev/null
	wait "$R3" 2>/dev/null
	sr_forget "$R3"
	status_wait AT "^ *mcast groups 0$" "  the daemon left the group when the receiver died"
	sr_run "a datagram to the abandoned group is sent" -- "${AT[@]}" "$T" send "$G" 1 "$QKEY"
	status_wait AT "no_mcast_member=0( |$)" "  the kernel no longer lets it in (not even to the daemon)"
fi

# mckey (rdmacm-utils): rdma_join_multicast on top of ibv_attach_mcast.
# mckey_pair DESC AT-RECV-NAME BIND-RECV AT-SEND-NAME BIND-SEND GROUP
mckey_pair() {
	local desc=$1 group=$6 pid rc joined
	local -n atr=$2 ats=$4
	echo "--- $desc"
	sr_new_log "${atr[@]}" "$SR_RUN" mckey -m "$group" -b "$3" -C 10
	local rout=$SR_OUTFILE
	timeout -k 5 "$SR_TIMEOUT" "${atr[@]}" "$SR_RUN" mckey -m "$group" -b "$3" -C 10 >"$rout" 2>&1 </dev/null &
	pid=$!
	SR_PIDS+=("$pid")
	# mckey's stdout is a buffered file: ask its daemon instead
	joined=0
	for _ in $(seq 1 100); do
		if "${atr[@]}" "$CFG" status 2>/dev/null |
			grep -q "^ *mcast group ::ffff:$group ifindex [0-9]* clients 1 "; then
			joined=1
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ "$joined" -eq 0 ]; then
		sr_fail "$desc: the mckey receiver did not join"
		sr_reap "$pid"
		sr_dump "$rout" receiver
		return 1
	fi
	sr_run "$desc: sender" -- "${ats[@]}" "$SR_RUN" mckey -m "$group" -b "$5" -s -C 10
	wait "$pid"
	rc=$?
	sr_forget "$pid"
	if [ "$rc" -eq 0 ] && grep -q 'data transfers complete' "$rout"; then
		sr_pass "$desc: receiver got the 10 messages"
	else
		sr_fail "$desc: receiver $(sr_status_str "$rc")"
		sr_dump "$rout" receiver
	fi
}
if command -v mckey >/dev/null 2>&1; then
	mckey_pair "mckey on one host" AT 127.0.0.1 AT 127.0.0.1 "239.80.$((RANDOM % 256)).$((RANDOM % 256))"
else
	echo "note: mckey is not installed (rdmacm-utils): its checks are left out"
fi

# ---- two hosts: veth between two namespaces --------------------------------

sr_netns_setup
sub6=$((RANDOM % 65536))
IP6_A=fd5e:$(printf %x "$sub6")::1
IP6_B=fd5e:$(printf %x "$sub6")::2
if ! { ip -n "$SR_NS_A" addr add "$IP6_A/64" dev "$SR_VETH_A" nodad &&
	ip -n "$SR_NS_B" addr add "$IP6_B/64" dev "$SR_VETH_B" nodad; }; then
	sr_die "cannot add IPv6 addresses"
fi

for G in "239.79.$((RANDOM % 256)).$((RANDOM % 256))" "ff0e::5e:$(printf %x $((RANDOM % 65536)))"; do
	echo "--- two hosts, group $G: sender on A, receivers on B (2) and A (1)"
	recv_start B1 "$SR_TMP/b1.ready" SR_AT_B "$G"
	B1_OUT=$SR_RECV_OUT
	recv_start B2 "$SR_TMP/b2.ready" SR_AT_B "$G"
	B2_OUT=$SR_RECV_OUT
	recv_start A1 "$SR_TMP/a1.ready" SR_AT_A "$G"
	A1_OUT=$SR_RECV_OUT
	if wait_ready "$SR_TMP/b1.ready" "$B1" "$B1_OUT" && wait_ready "$SR_TMP/b2.ready" "$B2" "$B2_OUT" &&
		wait_ready "$SR_TMP/a1.ready" "$A1" "$A1_OUT"; then
		sr_run "sender on A: $N datagrams to $G" -- "${SR_AT_A[@]}" "$T" send "$G" "$N" "$QKEY"
		recv_finish "$B1" "$B1_OUT" "receiver 1 on B got all $N datagrams"
		recv_finish "$B2" "$B2_OUT" "receiver 2 on B got all $N datagrams"
		recv_finish "$A1" "$A1_OUT" "receiver on A (the sender's host) got all $N datagrams"
	else
		for p in "$B1" "$B2" "$A1"; do
			sr_reap "$p"
		done
	fi
done
if command -v mckey >/dev/null 2>&1; then
	mckey_pair "mckey between two hosts (receiver on B, sender on A)" SR_AT_B "$SR_IP_B" SR_AT_A "$SR_IP_A" \
		"239.81.$((RANDOM % 256)).$((RANDOM % 256))"
fi

sr_finish
