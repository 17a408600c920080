#!/bin/bash
# RDMA-CM over Soft-iWARP (siw0 on lo, then between two network
# namespaces): Debian's unmodified rdmacm-utils, rsocket tools and
# perftest -R through softrdma's librdmacm.so.1, each connection a TCP
# connection on the rdma_cm port begun by an MPA Request/Reply exchange.
#
#  - rping (data compared between client and server), ucmatose, cmtime,
#    rdma_server/rdma_client, riostream and rstream, perftest -R (write,
#    read, send bandwidth; write, send latency); ten client processes at
#    once;
#  - the MPA variants: CRC off, MPA revision 1, RFC 6581 peer-to-peer mode
#    with each ready-to-receive message (SOFTRDMA_IW_RTR);
#  - no softrdmad is started: iWARP needs none;
#  - error paths: no listener (REJECTED, -ECONNREFUSED), a TCP
#    peer that speaks no MPA (the listener carries on), a server killed
#    mid-connection (the client ends, no hang);
#  - two hosts: the same programs across a veth pair (MTU 1500).
. "$(dirname "$0")/lib.sh"
sr_need_cmd rping ucmatose rdma_server rdma_client riostream rstream cmtime ib_write_bw ib_read_bw ib_send_bw \
	ib_write_lat ib_send_lat python3
sr_init iwarp
# no daemon of another test may answer for us: ours would be named here
export SOFTRDMA_DAEMON_SOCK=softrdma-test-$$-$RANDOM

# rping_pair DESC SIZE COUNT [ENV...]: rping on one host, data compared
rping_pair() {
	local desc=$1 size=$2 count=$3
	shift 3
	P=$(sr_free_port)
	if sr_pair "$desc" "$P" -- "${ERRTO[@]}" "$SR_TMP/rs.err" env "$@" "$SR_RUN" rping -s -a 127.0.0.1 -p "$P" \
		-S "$size" -C "$count" -v \
		-- "${ERRTO[@]}" "$SR_TMP/rc.err" env "$@" "$SR_RUN" rping -c -a 127.0.0.1 -p "$P" -S "$size" -C "$count" -v; then
		sr_rping_data_match "$count"
	fi
}

# ---- one host ------------------------------------------------------------

rping_pair "rping -C 1000 -v" 64 1000
rping_pair "rping -S 65535 -C 100 -v (messages of two FPDUs)" 65535 100
rping_pair "rping -S 23 -C 200 (odd sizes: MPA pad bytes)" 23 200
printf 'crc = off\n[siw0]\ntype = iwarp\nnetdev = lo\n' >"$SR_TMP/nocrc.conf"
rping_pair "rping with MPA CRC off (crc = off)" 4096 200 SOFTRDMA_CONF="$SR_TMP/nocrc.conf"
rping_pair "rping over MPA revision 1 (no RFC 6581 block)" 4096 100 SOFTRDMA_IW_MPA_REV=1
for rtr in write read send; do
	if rping_pair "rping in peer-to-peer mode, $rtr as the ready-to-receive message" 4096 100 \
		SOFTRDMA_IW_RTR=$rtr SOFTRDMA_CM_DEBUG=1; then
		n=$(grep -c "RTR [123])" "$SR_TMP/rc.err" "$SR_TMP/rs.err" | awk -F: '{s += $2} END {print s}')
		[ "$n" -ge 2 ] && sr_pass "  both ends agreed on an RTR message" ||
			sr_fail "  the CM logs show no RTR agreed ($n)"
	fi
done

P=$(sr_free_port)
sr_pair "ucmatose: 10 connections, 100 x 4000-byte messages" "$P" -- "$SR_RUN" ucmatose -p "$P" -c 10 -C 100 -S 4000 \
	-- "$SR_RUN" ucmatose -s 127.0.0.1 -p "$P" -c 10 -C 100 -S 4000
P=$(sr_free_port)
sr_pair "ucmatose -m (rdma_migrate_id)" "$P" -- "$SR_RUN" ucmatose -p "$P" -m \
	-- "$SR_RUN" ucmatose -s 127.0.0.1 -p "$P" -m
P=$(sr_free_port)
sr_pair "rdma_server / rdma_client (rdma_create_ep, synchronous ids)" "$P" -- "$SR_RUN" rdma_server -p "$P" \
	-- "$SR_RUN" rdma_client -s 127.0.0.1 -p "$P"
P=$(sr_free_port)
sr_pair "riostream: the default suite (riomap/riowrite, 64 B..1 MiB)" "$P" -- "$SR_RUN" riostream -p "$P" \
	-- "$SR_RUN" riostream -s 127.0.0.1 -p "$P"
P=$(sr_free_port)
sr_pair "riostream -T v: 1 MB x 50, verified" "$P" -- "$SR_RUN" riostream -p "$P" -T v -S 1000000 -C 50 \
	-- "$SR_RUN" riostream -s 127.0.0.1 -p "$P" -T v -S 1000000 -C 50
P=$(sr_free_port)
sr_pair "rstream -T v: 64 KiB x 500, verified" "$P" -- "$SR_RUN" rstream -p "$P" -T v -S 65536 -C 500 \
	-- "$SR_RUN" rstream -s 127.0.0.1 -p "$P" -T v -S 65536 -C 500

# perftest -R on one host (and from host A to host B below);
# sr_perftest_tries runs them again while they fail only by perftest's own
# faults
for t in "ib_write_bw -s 65536 -n 2000" "ib_read_bw -s 65536 -n 1000" "ib_send_bw -s 65536 -n 2000" \
	"ib_write_lat -s 64 -n 2000" "ib_send_lat -s 64 -n 2000" "ib_write_bw -s 4096 -n 5000 -q 4"; do
	set -- $t
	sr_perftest_tries sr_perftest_once "$1 -R ${*:2}" "" "$@" &&
		sr_expect "$SR_CLIENT_OUT" '^ *[0-9]+ +[0-9]+ +[0-9.]+' "  results reported"
done

P=$(sr_free_port)
sr_cm_cmtime "$P" "$P"

P=$(sr_free_port)
sr_cm_ten_clients "$P" "$P"

# iWARP is plain TCP: nothing of the above needed the per-host daemon
if "$SR_BUILD_DIR/bin/softrdma-cfg" status 2>&1 | grep -qi 'daemon.*not running'; then
	sr_pass "no softrdmad was started for iWARP"
else
	sr_fail "softrdmad runs after iWARP-only traffic"
	"$SR_BUILD_DIR/bin/softrdma-cfg" status 2>&1 | sed 's/^/    /'
fi

# connecting to a port nobody listens on: REJECTED with -ECONNREFUSED once
# the short retry (that absorbs a peer about to listen) is over, and the
# QP flushed, so that rping's completion thread ends too
P=$(sr_free_port)
start=$SECONDS
if sr_run_fail "rping to a port with no listener fails" -- "$SR_RUN" rping -c -a 127.0.0.1 -p "$P" -C 1; then
	sr_expect "$SR_OUT" 'RDMA_CM_EVENT_REJECTED, error -111' "  REJECTED, status -ECONNREFUSED"
	[ $((SECONDS - start)) -le 5 ] && sr_pass "  within 5 s" || sr_fail "  took $((SECONDS - start)) s"
fi

# a TCP peer that is no MPA peer: garbage, a wrong key, a truncated
# Request, silence.  The listener must survive them and serve a real client.
P=$(sr_free_port)
echo "--- a listener fed garbage, then a real client"
sr_new_log rping-garbage-server
gsrv=$SR_OUTFILE
timeout -k 5 "$SR_TIMEOUT" env SOFTRDMA_IW_MPA_TIMEOUT_MS=2000 "$SR_RUN" rping -s -a 127.0.0.1 -p "$P" -C 10 -v \
	>"$gsrv" 2>&1 </dev/null &
spid=$!
SR_PIDS+=("$spid")
if sr_wait_listen "$P" "$spid"; then
	python3 - "$P" <<'PY' >"$SR_TMP/garbage.out" 2>&1
import socket, sys, time
port = int(sys.argv[1])
def peer(data, linger=0.2):
    s = socket.create_connection(("127.0.0.1", port))
    if data:
        s.sendall(data)
    time.sleep(linger)
    s.settimeout(3)
    try:
        got = s.recv(64)
    except Exception:
        got = b""
    s.close()
    return got
print("garbage:", peer(b"\xff" * 300))
print("wrong key:", peer(b"MPA ID Req Fram\x00" + b"\x40\x02\x00\x00"))
print("truncated:", peer(b"MPA ID Req Frame\x40\x02\x00\x40" + b"x" * 10))
print("markers:", peer(b"MPA ID Req Frame\x80\x01\x00\x00"))
print("oversized private data:", peer(b"MPA ID Req Frame\x40\x01\xff\xff"))
print("silence:", peer(b"", linger=3))
PY
	sed 's/^/    /' "$SR_TMP/garbage.out"
	grep -q '^markers: b.MPA ID Rep Frame' "$SR_TMP/garbage.out" &&
		sr_pass "  a Request asking for markers gets a Reply with the Reject bit" ||
		sr_fail "  no Reject Reply to a Request asking for markers"
	if kill -0 "$spid" 2>/dev/null; then
		sr_pass "  the server survived six bad peers"
		sr_run "  ...and a real client then connects" -- "$SR_RUN" rping -c -a 127.0.0.1 -p "$P" -C 10 -v
	else
		sr_fail "  the server died"
	fi
	wait "$spid" && sr_pass "  the server ends normally" || { sr_fail "  server failed"; sr_dump "$gsrv" server; }
	sr_forget "$spid"
else
	sr_fail "rping server did not listen"
	sr_reap "$spid"
fi

# a server killed in the middle of a connection: the kernel closes its TCP
# connection, the client's QP sees the stream end and the client ends
P=$(sr_free_port)
sr_cm_killed_server "$P" "$P" 'DISCONNECT EVENT|error|failed'

# ---- two hosts -------------------------------------------------------------

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1; then
	echo "# two-host part skipped: needs root and ip netns"
	sr_finish
fi
sr_netns_setup iwarp

# ns_pair DESC -- SERVER (on B) -- CLIENT (on A); TCP port $P in B
ns_pair() {
	local desc=$1
	shift
	sr_pair --ns "$SR_NS_B" "$desc" "$P" "$@"
}

P=$(sr_free_port "$SR_NS_B")
if ns_pair "two hosts: rping -C 1000 -v, A -> B" \
	-- "${ERRTO[@]}" "$SR_TMP/nrs.err" "${SR_AT_B[@]}" rping -s -a "$SR_IP_B" -p "$P" -C 1000 -v \
	-- "${ERRTO[@]}" "$SR_TMP/nrc.err" "${SR_AT_A[@]}" rping -c -a "$SR_IP_B" -p "$P" -C 1000 -v; then
	sr_rping_data_match 1000
fi
P=$(sr_free_port "$SR_NS_B")
if ns_pair "two hosts: rping -S 65535 -C 100 -v" \
	-- "${ERRTO[@]}" "$SR_TMP/nrs.err" "${SR_AT_B[@]}" rping -s -a "$SR_IP_B" -p "$P" -S 65535 -C 100 -v \
	-- "${ERRTO[@]}" "$SR_TMP/nrc.err" "${SR_AT_A[@]}" rping -c -a "$SR_IP_B" -p "$P" -S 65535 -C 100 -v; then
	sr_rping_data_match 100
fi
P=$(sr_free_port "$SR_NS_B")
ns_pair "two hosts: ucmatose, 10 connections x 100 messages" -- "${SR_AT_B[@]}" ucmatose -p "$P" -c 10 -C 100 \
	-- "${SR_AT_A[@]}" ucmatose -s "$SR_IP_B" -p "$P" -c 10 -C 100
P=$(sr_free_port "$SR_NS_B")
ns_pair "two hosts: rdma_server / rdma_client" -- "${SR_AT_B[@]}" rdma_server -p "$P" \
	-- "${SR_AT_A[@]}" rdma_client -s "$SR_IP_B" -p "$P"
P=$(sr_free_port "$SR_NS_B")
ns_pair "two hosts: riostream -T v, 100 kB x 300" -- "${SR_AT_B[@]}" riostream -p "$P" -T v -S 100000 -C 300 \
	-- "${SR_AT_A[@]}" riostream -s "$SR_IP_B" -p "$P" -T v -S 100000 -C 300
for t in "ib_write_bw -s 65536 -n 2000" "ib_read_bw -s 65536 -n 1000" "ib_send_bw -s 65536 -n 2000" \
	"ib_write_lat -s 64 -n 2000"; do
	set -- $t
	sr_perftest_tries sr_perftest_ns_once "two hosts: $1 -R ${*:2}" "" "$@" &&
		sr_expect "$SR_CLIENT_OUT" '^ *[0-9]+ +[0-9]+ +[0-9.]+' "  results reported"
done

sr_finish
