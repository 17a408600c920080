#!/bin/bash
# softrdma-cfg's rdma-tool style commands: `link add/delete/show` (rxe and
# siw types, JSON with -j, errors) and `statistic` with the counters the
# library keeps per process: packets and bytes after ibv_rc_pingpong, per-QP
# counters of live processes (pid, comm, lqpn), device counters kept after
# the processes exit or are killed, CRC errors and retransmissions from a
# peer whose ICRC is off.  The counter files go to a private directory
# (SOFTRDMA_RUNTIME_DIR).
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_rc_pingpong python3
sr_init
CFG=$SR_BUILD_DIR/bin/softrdma-cfg
export SOFTRDMA_RUNTIME_DIR=$SR_TMP/run
mkdir -m 700 "$SOFTRDMA_RUNTIME_DIR"

# ---- link ----
LC=$SR_TMP/link.conf
printf '[rxe0]\ntype = roce\nnetdev = lo\n' >"$LC"
cfgc() { SOFTRDMA_CONF=$LC "$CFG" "$@"; }
CFGC=(env SOFTRDMA_CONF="$LC" "$CFG")
sr_run "link add siw0 type siw netdev lo" -- "${CFGC[@]}" link add siw0 type siw netdev lo
cfgc link add rxe1 type rxe netdev lo >/dev/null 2>&1; [ $? -eq 1 ] &&
	sr_pass "  ... exit 1 (one RoCE device per interface)" || sr_fail "  a second rxe on lo was not refused"
sr_run "link show" -- "${CFGC[@]}" link show &&
	sr_expect "$SR_OUT" '^link rxe0/1 state ACTIVE physical_state LINK_UP netdev lo$' "  rxe0 line as rdma prints it" &&
	sr_expect "$SR_OUT" '^link siw0/1 state ACTIVE physical_state LINK_UP netdev lo$' "  siw0 line"
sr_run "link show siw0/1" -- "${CFGC[@]}" link show siw0/1 &&
	[ "$(wc -l <"$SR_OUT")" = 1 ] && sr_pass "  one line" || sr_fail "  link show siw0/1 printed $(wc -l <"$SR_OUT") lines"
sr_run "-j link show is JSON" -- sh -c "SOFTRDMA_CONF='$LC' '$CFG' -j link show | python3 -c '
import json, sys
l = json.load(sys.stdin)
assert [(d[\"ifname\"], d[\"port\"], d[\"type\"], d[\"netdev\"]) for d in l] == [(\"rxe0\", 1, \"rxe\", \"lo\"), (\"siw0\", 1, \"siw\", \"lo\")], l
'"
sr_run "ibv_devinfo sees the siw device" -- env SOFTRDMA_CONF="$LC" "$SR_RUN" ibv_devinfo -d siw0 &&
	sr_expect "$SR_OUT" 'transport:.*iWARP' "  siw0 is an iWARP device"
for bad in "link add x type foo netdev lo" "link add x netdev lo" "link add x type rxe netdev" \
	"link show rxe0/2" "link frob" "statistic qp frob" "statistic link" "statistic qp show pid x"; do
	# shellcheck disable=SC2086 # one word per argument
	cfgc $bad >/dev/null 2>&1
	[ $? -eq 2 ] && sr_pass "'$bad': usage error (2)" || sr_fail "'$bad' did not exit 2"
done
cfgc link show nosuch >/dev/null 2>&1
[ $? -eq 1 ] && sr_pass "link show of an unknown device: exit 1" || sr_fail "link show nosuch"
sr_run "link delete siw0" -- "${CFGC[@]}" link delete siw0 &&
	! cfgc link show | grep -q siw0 && sr_pass "  siw0 is gone" || sr_fail "  siw0 still shown"
cfgc link delete lo >/dev/null 2>&1
[ $? -eq 1 ] && sr_pass "link delete takes device names only (lo refused)" || sr_fail "link delete lo"

# ---- statistic ----
# ctr FIELD [LINK]: a device counter from `statistic show`
ctr() { "$CFG" statistic show link "${2:-rxe0}" | tr ' ' '\n' | sed -n "/^$1\$/{n;p}"; }
sr_run "statistic with no traffic yet" -- "$CFG" statistic &&
	sr_expect "$SR_OUT" '^link rxe0/1 sent_pkts 0 rcvd_pkts 0 sent_bytes 0 rcvd_bytes 0 retransmits 0 ' "  rxe0 all zero"
port=$(sr_free_port)
if sr_pair "ibv_rc_pingpong 4 KiB x 100" "$port" -- "$SR_RUN" ibv_rc_pingpong -g 0 -n 100 -p "$port" \
	-- "$SR_RUN" ibv_rc_pingpong -g 0 -n 100 -p "$port" 127.0.0.1; then
	s=$(ctr sent_pkts) r=$(ctr rcvd_pkts) sb=$(ctr sent_bytes) rb=$(ctr rcvd_bytes)
	# 200 messages of one 4 KiB packet each, plus ACKs
	[ "$s" -ge 200 ] && [ "$r" -ge 200 ] && sr_pass "exited processes' packets kept: sent $s, received $r" ||
		sr_fail "sent_pkts '$s' rcvd_pkts '$r', expected >= 200"
	[ "$sb" -ge $((200 * 4096)) ] && [ "$rb" -ge $((200 * 4096)) ] && sr_pass "  bytes: sent $sb, received $rb" ||
		sr_fail "  sent_bytes '$sb' rcvd_bytes '$rb', expected >= 819200"
	[ "$(ctr crc_err)" = 0 ] && [ "$(ctr retransmits)" = 0 ] && sr_pass "  no CRC error, no retransmission" ||
		sr_fail "  crc_err $(ctr crc_err) retransmits $(ctr retransmits) on a clean loopback"
	[ -z "$(ls "$SOFTRDMA_RUNTIME_DIR"/*.stats 2>/dev/null)" ] && sr_pass "  exited processes left no counter file" ||
		sr_fail "  counter files left: $(ls "$SOFTRDMA_RUNTIME_DIR")"
fi

# live QPs: a long ping-pong, looked at while it runs, then killed
before=$(ctr sent_pkts)
port=$(sr_free_port)
"$SR_RUN" ibv_rc_pingpong -g 0 -n 100000000 -p "$port" >"$SR_TMP/srv.out" 2>&1 &
srv=$!
SR_PIDS+=("$srv")
sr_wait_listen "$port" "$srv" || sr_fail "ping-pong server did not listen"
"$SR_RUN" ibv_rc_pingpong -g 0 -n 100000000 -p "$port" 127.0.0.1 >"$SR_TMP/cli.out" 2>&1 &
cli=$!
SR_PIDS+=("$cli")
for _ in $(seq 50); do
	[ "$("$CFG" statistic qp show | grep -c 'qp-type RC')" -ge 2 ] && break
	sleep 0.1
done
sleep 0.3
sr_run "statistic qp show" -- "$CFG" statistic qp show &&
	sr_expect "$SR_OUT" "^link rxe0/1 lqpn [0-9]+ qp-type RC pid $srv comm ibv_rc_pingpong sent_pkts [1-9]" \
		"  the server's RC QP, with its pid, comm and traffic" &&
	sr_expect "$SR_OUT" "^link rxe0/1 lqpn [0-9]+ qp-type RC pid $cli comm ibv_rc_pingpong sent_pkts [1-9]" \
		"  the client's"
lqpn=$(sed -n "s/^link rxe0\/1 lqpn \([0-9]*\) qp-type RC pid $cli .*/\1/p" "$SR_OUT" | head -1)
sr_run "statistic qp show pid $cli lqpn $lqpn" -- "$CFG" statistic qp show pid "$cli" lqpn "${lqpn:-0}" &&
	[ "$(wc -l <"$SR_OUT")" = 1 ] && sr_pass "  exactly that QP" || sr_fail "  $(wc -l <"$SR_OUT") lines"
sr_run "-j statistic qp show is JSON" -- sh -c "'$CFG' -j statistic qp show | python3 -c '
import json, sys
l = json.load(sys.stdin)
assert any(q[\"pid\"] == $cli and q[\"qp-type\"] == \"RC\" and q[\"rcvd_pkts\"] > 0 for q in l), l
'"
live=$(ctr sent_pkts)
[ "$live" -gt "$before" ] && sr_pass "device counters include live QPs ($before -> $live)" ||
	sr_fail "device sent_pkts did not grow with live traffic ($before -> $live)"
kill -KILL "$srv" "$cli" 2>/dev/null
wait "$srv" "$cli" 2>/dev/null
after=$(ctr sent_pkts)
[ "$after" -ge "$live" ] && sr_pass "killed processes' counters stay in the device's ($live -> $after)" ||
	sr_fail "device sent_pkts went back from $live to $after after the kill"
[ -z "$("$CFG" statistic qp show)" ] && sr_pass "  and their QPs are gone from qp show" || sr_fail "  QPs of dead processes shown"

# CRC errors: the client sends without ICRC (crc off), the server drops
# every packet and the client retransmits until it gives up
printf 'crc = off\n[rxe0]\ntype = roce\nnetdev = lo\n' >"$SR_TMP/nocrc.conf"
port=$(sr_free_port)
"$SR_RUN" ibv_rc_pingpong -g 0 -n 10 -p "$port" >"$SR_TMP/srv2.out" 2>&1 &
srv=$!
SR_PIDS+=("$srv")
sr_wait_listen "$port" "$srv" || sr_fail "ping-pong server did not listen"
sr_run_fail "a client with ICRC off fails against one with it on" -- \
	env SOFTRDMA_CONF="$SR_TMP/nocrc.conf" "$SR_RUN" ibv_rc_pingpong -g 0 -n 10 -p "$port" 127.0.0.1
kill -KILL "$srv" 2>/dev/null
wait "$srv" 2>/dev/null
c=$(ctr crc_err) rt=$(ctr retransmits)
[ "$c" -ge 1 ] && sr_pass "crc_err counted: $c" || sr_fail "crc_err is '$c'"
[ "$rt" -ge 1 ] && sr_pass "retransmits counted: $rt" || sr_fail "retransmits is '$rt'"
sr_finish
