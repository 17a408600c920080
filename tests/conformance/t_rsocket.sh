#!/bin/bash
# rsockets: Debian's unmodified rstream and riostream (rdmacm-utils) through
# softrdma's librdmacm.so.1 on one host (rxe0 on lo), and between two network
# namespaces when run as root.  Both ends must exit 0 and print their result
# line; with -T v they verify every byte themselves (a mismatch prints
# "data verification failed" and fails the run).  Covered: the full default
# rstream suite (latency then bandwidth, 64 B to 1 MiB, two connections on
# one listener), non-blocking (the default), blocking (-T b), rpoll-driven
# (-T a) and both, small buffers (-B), iterations (-I), keepalive (-k),
# rdma_getaddrinfo (-T r), IPv6, riostream's riomap/riowrite in every mode,
# iperf3 over rdma-core's librspreload (softrdma-run --rsocket) on
# Soft-RoCE and Soft-iWARP, also against a plain TCP server, and a client with no server failing cleanly.  The result lines are echoed
# ("#   ...") for the record.
. "$(dirname "$0")/lib.sh"
sr_need_cmd rstream riostream
sr_init

# rs_pair DESC PROG 'ARGS' [RESULT-ERE]: PROG as server and client on
# 127.0.0.1 with the same ARGS (word-split); both must print a result line
# (custom runs: "custom ...") and no verification failure.
rs_pair() {
	local desc=$1 prog=$2 args=$3 ere=${4:-'^custom +'} p
	p=$(sr_free_port)
	# shellcheck disable=SC2086 # ARGS are several options
	if sr_pair "$desc" "cm:$p" -- "$SR_RUN" "$prog" -p "$p" $args -- "$SR_RUN" "$prog" -s 127.0.0.1 -p "$p" $args; then
		rs_results "$ere"
	fi
}

# rs_results ERE: both outputs hold result lines and no failure report
rs_results() {
	sr_expect "$SR_SERVER_OUT" "$1" "  server printed its result" &&
		sr_expect "$SR_CLIENT_OUT" "$1" "  client printed its result" &&
		sr_reject "$SR_SERVER_OUT" 'verification failed|rrecv|rsend|rpoll|riowrite' "  server: no errors" &&
		sr_reject "$SR_CLIENT_OUT" 'verification failed|rrecv|rsend|rpoll|riowrite' "  client: no errors" &&
		grep -E "$1" "$SR_CLIENT_OUT" | sed 's/^/#   /'
}

# ---- rstream: rsend/rrecv ----------------------------------------------------

rs_pair "rstream: the default suite (64 B..1 MiB latency, then bandwidth on a second connection)" rstream '' \
	'^(64|4k|64k|1m)_(lat|bw) +'
for t in 64_lat 4k_lat 64k_lat 1m_lat 64_bw 4k_bw 64k_bw 1m_bw; do
	sr_expect "$SR_CLIENT_OUT" "^$t " "  $t reported" || break
done
rs_pair "rstream -T v: 1 MB x 200, verified" rstream '-T v -S 1000000 -C 200'
rs_pair "rstream -T v -T b: blocking calls, 64 B x 20000" rstream '-T v -T b -S 64 -C 20000'
rs_pair "rstream -T v -T a: rpoll then non-blocking calls, 4 KiB x 5000" rstream '-T v -T a -S 4096 -C 5000'
rs_pair "rstream -T v -T a -T b: rpoll then blocking calls, 64 KiB x 1000" rstream '-T v -T a -T b -S 65536 -C 1000'
rs_pair "rstream -T v -B 16384: 32 KiB buffers for 100 kB messages" rstream '-T v -B 16384 -S 100000 -C 300'
rs_pair "rstream -T v -I 5: five iterations of 100 x 9999 B" rstream '-T v -I 5 -C 100 -S 9999'
rs_pair "rstream -k 1: keepalive every second" rstream '-T v -k 1 -S 1000 -C 2000'
sr_expect "$SR_CLIENT_OUT" '^Keepalive: ON' "  keepalive reported on"
rs_pair "rstream -T r: addresses through rdma_getaddrinfo" rstream '-T v -T r -S 5000 -C 1000'

p=$(sr_free_port)
if sr_pair "rstream over IPv6 (::1)" "cm:$p" -- "$SR_RUN" rstream -p "$p" -b ::1 -T v -S 3000 -C 1000 \
	-- "$SR_RUN" rstream -p "$p" -s ::1 -T v -S 3000 -C 1000; then
	rs_results '^custom +'
fi

# ---- riostream: riomap/riowrite -------------------------------------------------

rs_pair "riostream -T v: riowrite 4 KiB x 100, 10 iterations, verified" riostream '-T v -S 4096 -C 100 -I 10'
rs_pair "riostream -T v: 1 MB x 50" riostream '-T v -S 1000000 -C 50 -I 2'
rs_pair "riostream -T v -T b: blocking, 64 KiB x 200" riostream '-T v -T b -S 65536 -C 200'
rs_pair "riostream -T v -T a: rpoll, 100 kB x 300" riostream '-T v -T a -S 100000 -C 300'
rs_pair "riostream -T v -T a -T b: rpoll and blocking, 10 kB x 100 x 5" riostream '-T v -T a -T b -S 10000 -C 100 -I 5'
# latency pattern: both ends spin on the buffer's last byte while the
# peer's progress thread places each 64-byte write (slow on few cores)
rs_pair "riostream: 64 B ping-pong of single riowrites, 500 rounds" riostream '-S 64 -C 1 -I 500'

# ---- socket programs through rdma-core's librspreload (softrdma-run --rsocket) ----

# iperf3's server waits in select() over its listener, control and data
# sockets: it saw its data stream readable only once raccept numbered the
# accepted socket after librspreload's placeholder, and read at full speed
# only once rpoll stopped losing wake-ups.
if ls /usr/lib/*/rsocket/librspreload.so >/dev/null 2>&1 && command -v iperf3 >/dev/null 2>&1; then
	for dir in "" -R; do
		p=$(sr_free_port)
		# shellcheck disable=SC2086 # dir is one option or none
		if sr_pair "iperf3 ${dir:+$dir }over rsockets (softrdma-run --rsocket), 2 s" "cm:$p" \
			-- "$SR_RUN" --rsocket iperf3 -s -1 -B 127.0.0.1 -p "$p" \
			-- "$SR_RUN" --rsocket iperf3 -c 127.0.0.1 -p "$p" -t 2 $dir; then
			sr_expect "$SR_CLIENT_OUT" 'receiver$' "  the client printed the receiver's total" &&
				sr_reject "$SR_CLIENT_OUT" ' 0\.00 Bytes .*receiver$' "  and it is not zero" &&
				grep -E 'receiver$' "$SR_CLIENT_OUT" | sed 's/^/#   /'
		fi
	done
	# Soft-iWARP: the library's own TCP listener and connections must
	# stay kernel sockets (they are made with the system call, which
	# librspreload does not see); through socket() the listener became an
	# rsocket listening on its own port: EADDRINUSE
	sr_write_conf "$SR_TMP/siw.conf" lo iwarp
	p=$(sr_free_port)
	if sr_pair "iperf3 over rsockets on Soft-iWARP (softrdma-run --rsocket), 2 s" "$p" \
		-- "$SR_RUN" --conf "$SR_TMP/siw.conf" --rsocket iperf3 -s -1 -B 127.0.0.1 -p "$p" \
		-- "$SR_RUN" --conf "$SR_TMP/siw.conf" --rsocket iperf3 -c 127.0.0.1 -p "$p" -t 2; then
		sr_expect "$SR_CLIENT_OUT" 'receiver$' "  the client printed the receiver's total" &&
			grep -E 'receiver$' "$SR_CLIENT_OUT" | sed 's/^/#   /'
	fi
	# Python's socket.accept uses accept4, which librspreload 44 lacks:
	# softrdma-run --rsocket preloads softrdma's in front of it
	p=$(sr_free_port)
	if sr_pair "Python server and client over rsockets (accept4), 8 MB, SHA-256 checked" "cm:$p" \
		-- "$SR_RUN" --rsocket python3 "$SR_SOURCE_DIR/tests/conformance/rs_echo.py" server "$p" \
		-- "$SR_RUN" --rsocket python3 "$SR_SOURCE_DIR/tests/conformance/rs_echo.py" client "$p" 8000000; then
		sr_expect "$SR_CLIENT_OUT" 'SHA-256 matches' "  the server read every byte"
	fi
	# the softrdmad those programs started (this namespace's) must not
	# have kept their preloads: it outlives them and serves everyone
	me=$(readlink /proc/self/ns/net)
	for d in $(pgrep -x softrdmad); do
		[ "$(readlink "/proc/$d/ns/net" 2>/dev/null)" = "$me" ] || continue
		if [ "$me" = "$(readlink /proc/1/ns/net)" ]; then
			echo "# no namespace of our own: softrdmad $d may be another's, not checked"
		elif tr '\0' '\n' <"/proc/$d/environ" | grep -q '^LD_PRELOAD='; then
			sr_fail "softrdmad (pid $d) runs with the program's LD_PRELOAD"
		elif grep -qE 'rspreload|librdmacm' "/proc/$d/maps"; then
			sr_fail "softrdmad (pid $d) has librspreload or librdmacm loaded"
		else
			sr_pass "the softrdmad they started runs without their LD_PRELOAD"
		fi
	done
	# a peer that is no rsocket: the rconnect is refused and librspreload
	# carries on over TCP (it asks rgetsockname for the address length)
	p=$(sr_free_port)
	if sr_pair "iperf3 over rsockets against a plain TCP server: falls back to TCP" "$p" \
		-- iperf3 -s -1 -B 127.0.0.1 -p "$p" \
		-- "$SR_RUN" --rsocket iperf3 -c 127.0.0.1 -p "$p" -t 1; then
		sr_expect "$SR_CLIENT_OUT" 'receiver$' "  the client printed the receiver's total"
	fi
else
	echo "# no librspreload.so (librdmacm1) or no iperf3: the librspreload runs are skipped"
fi
sr_run_fail "softrdma-run --rsocket: unknown option after it still fails cleanly" -- "$SR_RUN" --rsocket --bogus true
sr_expect "$SR_OUT" "unknown option '--bogus'" "  it names the option"

# ---- errors ----------------------------------------------------------------------

p=$(sr_free_port)
sr_run_fail "rstream client with no server fails (REJECTED)" -- "$SR_RUN" rstream -s 127.0.0.1 -p "$p" -S 100 -C 10
sr_expect "$SR_OUT" 'rconnect|rpoll|refused' "  it says why"

# ---- two hosts -----------------------------------------------------------------------

if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1; then
	sr_netns_setup
	p=$(sr_free_port "$SR_NS_B")
	if sr_pair --ns "$SR_NS_B" "rstream -T v between namespaces (veth, MTU 1500), 1 MB x 100" "cm:$p" \
		-- "${SR_AT_B[@]}" rstream -p "$p" -T v -S 1000000 -C 100 \
		-- "${SR_AT_A[@]}" rstream -p "$p" -s "$SR_IP_B" -T v -S 1000000 -C 100; then
		rs_results '^custom +'
	fi
	p=$(sr_free_port "$SR_NS_B")
	if sr_pair --ns "$SR_NS_B" "riostream -T v -T a between namespaces, 100 kB x 100" "cm:$p" \
		-- "${SR_AT_B[@]}" riostream -p "$p" -T v -T a -S 100000 -C 100 \
		-- "${SR_AT_A[@]}" riostream -p "$p" -s "$SR_IP_B" -T v -T a -S 100000 -C 100; then
		rs_results '^custom +'
	fi
else
	echo "# not root (or no ip netns): the two-namespace runs are skipped"
fi

sr_finish
