#!/bin/bash
# Datagram rsockets: Debian's unmodified udpong (rdmacm-utils) through
# softrdma's librdmacm.so.1 on one host (rxe0), and between two network
# namespaces when run as root.  udpong's server serves until stopped: each
# run passes if the client exits 0 having printed its result line and the
# server is still serving (sr_pair --server-stays).  A bandwidth run's
# transfer count is what the server received (UD drops what finds no
# receive posted, as UDP would); a latency (echo) run's is every round
# trip.  Covered: non-blocking (the default), blocking (-T b),
# rpoll-driven (-T a) and both, echo (-T e), bandwidth, IPv6, and a client
# with no server failing cleanly (the ICMP port unreachable its connected
# UDP socket gets is the next send's ECONNREFUSED).
. "$(dirname "$0")/lib.sh"
sr_need_cmd udpong
sr_init

# up_pair DESC ADDR 'SERVER-ARGS' 'CLIENT-ARGS' [RESULT-ERE]
up_pair() {
	local desc=$1 addr=$2 sargs=$3 cargs=$4 ere=${5:-'^custom +[0-9]+ +[0-9.]+[km]? '} p
	p=$(sr_free_port)
	# shellcheck disable=SC2086 # ARGS are several options
	if sr_pair --server-stays "$desc" "udp:$p" -- "$SR_RUN" udpong -b "$addr" -p "$p" $sargs \
		-- "$SR_RUN" udpong -s "$addr" -p "$p" $cargs; then
		up_results "$ere"
	fi
}

up_results() {
	sr_expect "$SR_CLIENT_OUT" "$1" "  client printed its result" &&
		sr_reject "$SR_CLIENT_OUT" 'rrecv|rsend|rconnect|rpoll' "  client: no errors" &&
		sr_reject "$SR_SERVER_OUT" 'rrecv|rsend|rbind' "  server: no errors" &&
		grep -E "$1" "$SR_CLIENT_OUT" | sed 's/^/#   /'
}

# The echo runs count every round trip: 2 x the count, none lost.  They
# are kept to 200 round trips: udpong's client resends after a 1 ms rpoll
# timeout and reads one datagram per try, so each round trip slower than
# that leaves a stale echo queued for good and every later round trip
# costs one exchange more.  On a busy machine that runs away: under
# ASan with two CPU hogs, 1000 round trips of -T e -T a -T b took 15 s or
# did not end in 200 s (2 runs of 3), 200 took 0.2-2 s (see the note at
# the end and docs/rsockets.md, "Datagram sockets").
up_pair "udpong -T e: 1000 B echoed x 200" 127.0.0.1 '' '-T e -C 200 -S 1000' '^custom +1000 +400 '
up_pair "udpong -T e -T b: blocking calls, 64 B echoed x 200" 127.0.0.1 '-T b' '-T e -T b -C 200 -S 64' '^custom +64 +400 '
up_pair "udpong -T e -T a: rpoll then non-blocking calls, 512 B x 200" 127.0.0.1 '-T a' '-T e -T a -C 200 -S 512' '^custom +512 +400 '
up_pair "udpong -T e -T a -T b: rpoll then blocking calls, 256 B x 200" 127.0.0.1 '-T a -T b' '-T e -T a -T b -C 200 -S 256' '^custom +256 +400 '
up_pair "udpong: bandwidth, 1000 B x 20000 (the server counts what it got)" 127.0.0.1 '' '-C 20000 -S 1000'
up_pair "udpong -T b: bandwidth with blocking calls, 200 B x 20000" 127.0.0.1 '-T b' '-T b -C 20000 -S 200'
up_pair "udpong -T e over IPv6 (::1), 1000 B x 200" ::1 '' '-T e -C 200 -S 1000' '^custom +1000 +400 '
# Not run: udpong's default suite (20000 round trips per size, then
# bursts of 100000 datagrams).  On a quiet machine it takes 5 s here, but
# its 20000 round trips a size run away on a busy one (above;
# docs/rsockets.md).
# ---- errors ----------------------------------------------------------------------

p=$(sr_free_port)
sr_run_fail "udpong client with no server fails (ECONNREFUSED)" -- "$SR_RUN" udpong -s 127.0.0.1 -p "$p" -C 10 -S 100
sr_expect "$SR_OUT" 'rsend: Connection refused' "  it says why"
# Soft-iWARP has no UD QPs (as the kernel's siw): the first rconnect fails
sr_write_conf "$SR_TMP/siw.conf" lo iwarp
sr_run_fail "udpong client on Soft-iWARP fails (no UD QPs: EOPNOTSUPP)" -- "$SR_RUN" --conf "$SR_TMP/siw.conf" \
	udpong -s 127.0.0.1 -p "$p" -C 10 -S 100
sr_expect "$SR_OUT" 'rconnect: Operation not supported' "  it says why"

# ---- two hosts -----------------------------------------------------------------------

if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1; then
	sr_netns_setup
	p=$(sr_free_port "$SR_NS_B")
	if sr_pair --ns "$SR_NS_B" --server-stays "udpong -T e between namespaces (veth), 1000 B x 200" "udp:$p" \
		-- "${SR_AT_B[@]}" udpong -b "$SR_IP_B" -p "$p" \
		-- "${SR_AT_A[@]}" udpong -s "$SR_IP_B" -p "$p" -T e -C 200 -S 1000; then
		up_results '^custom +1000 +400 '
	fi
else
	echo "# not root (or no ip netns): the two-namespace runs are skipped"
fi

sr_finish
