#!/bin/bash
# UCX (Debian's ucx-utils / libucx0 1.13) unmodified on softrdma:
# ucx_info lists the device with rc_verbs, ud_verbs and the rdmacm
# connection manager, no root and no /dev/infiniband needed; ucx_perftest
# (put, get, active messages, tag matching) over rc_verbs (with ud_verbs as
# UCX's auxiliary wire-up transport, UCX_TLS=rc_v) and over ud_verbs alone;
# io_demo with its data-integrity check (-q) over both, its connection
# made through rdmacm.  On one host and between two network namespaces.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ucx_info ucx_perftest io_demo
sr_init

export UCX_NET_DEVICES=rxe0:1 UCX_WARN_UNUSED_ENV_VARS=n

if sr_run "ucx_info -d through softrdma-run" -- "$SR_RUN" ucx_info -d; then
	sr_expect "$SR_OUT" '^# Memory domain: rxe0$' "  memory domain rxe0"
	sr_expect "$SR_OUT" '^#      Transport: rc_verbs$' "  transport rc_verbs"
	sr_expect "$SR_OUT" '^#      Transport: ud_verbs$' "  transport ud_verbs"
	sr_expect "$SR_OUT" '^#         Device: rxe0:1$' "  device rxe0:1"
	sr_expect "$SR_OUT" '^# Connection manager: rdmacm$' "  connection manager rdmacm"
fi
# The node UCX checks is answered for softrdma's devices only: a name
# that is not one of them, or a program that did not load the library,
# still sees no such file.
sr_run_fail "stat of /dev/infiniband/uverbs0 in a program without libibverbs fails" \
	-- "$SR_RUN" stat /dev/infiniband/uverbs0
sr_run_fail "  and /dev/infiniband/uverbs9 is no softrdma device" \
	-- "$SR_RUN" python3 -c 'import ctypes, os, sys
ctypes.CDLL("libibverbs.so.1").ibv_get_device_list(None)
os.stat("/dev/infiniband/uverbs0")
os.stat("/dev/infiniband/uverbs9")'
sr_expect "$SR_OUT" "No such file or directory: '/dev/infiniband/uverbs9'" \
	"  (uverbs0 stats once the library is loaded, uverbs9 does not)"

# perftest PREFIX-NAME DESC NS TLS TEST [ARGS]: ucx_perftest, server in
# namespace NS ('' = here), client connecting to ADDR.
perftest() {
	local -n at_srv=$1 at_cli=$2
	local desc=$3 ns=$4 addr=$5 tls=$6 t=$7 port
	shift 7
	port=$(sr_free_port "$ns")
	if sr_pair ${ns:+--ns "$ns"} "$desc: ucx_perftest -t $t over $tls" "$port" \
		-- "${at_srv[@]}" env UCX_TLS="$tls" UCX_LOG_LEVEL=info ucx_perftest -p "$port" -t "$t" "$@" \
		-- "${at_cli[@]}" env UCX_TLS="$tls" UCX_LOG_LEVEL=info ucx_perftest "$addr" -p "$port" -t "$t" "$@"; then
		sr_expect "$SR_CLIENT_OUT" '^Final:' "  final figures printed"
		local want=rc_verbs
		[ "$tls" = ud_verbs ] && want=ud_verbs
		sr_expect "$SR_CLIENT_OUT" "ep_cfg.*(tag|rma|am)\\($want/rxe0:1\\)" "  lanes on $want/rxe0:1"
	fi
}

# iodemo PREFIX-NAME DESC NS ADDR TLS: io_demo reads and writes of 1 B..64 KiB,
# every byte checked (-q).
iodemo() {
	local -n at_srv=$1 at_cli=$2
	local desc=$3 ns=$4 addr=$5 tls=$6 port
	port=$(sr_free_port "$ns")
	if sr_pair ${ns:+--ns "$ns"} --server-stays "$desc: io_demo -q read,write 1 B..64 KiB over $tls" "$port" \
		-- "${at_srv[@]}" env UCX_TLS="$tls" UCX_LOG_LEVEL=info io_demo -p "$port" -q -d 1:65536 -o read,write \
		-- "${at_cli[@]}" env UCX_TLS="$tls" UCX_LOG_LEVEL=info io_demo -p "$port" -q -d 1:65536 -o read,write -i 1000 "$addr"; then
		sr_expect "$SR_CLIENT_OUT" "Client exit with status 'OK'" "  client: every transfer verified"
		sr_reject "$SR_CLIENT_OUT" 'data corruption|validation failed|invalid' "  no data errors (client)"
		sr_reject "$SR_SERVER_OUT" 'data corruption|validation failed|invalid' "  no data errors (server)"
		local want=rc_verbs
		[ "$tls" = ud_verbs ] && want=ud_verbs
		sr_expect "$SR_CLIENT_OUT" "ep_cfg.*tag\\($want/rxe0:1\\)" "  tag lane on $want/rxe0:1"
	fi
}

# shellcheck disable=SC2034 # used through namerefs
HERE=("$SR_RUN")
for tls in rc_v ud_verbs; do
	for t in ucp_put_bw ucp_get ucp_am_lat tag_lat tag_bw; do
		perftest HERE HERE "one host" "" 127.0.0.1 "$tls" "$t" -n 2000 -w 100 -s 4096
	done
	iodemo HERE HERE "one host" "" 127.0.0.1 "$tls"
done

sr_netns_setup
for tls in rc_v ud_verbs; do
	for t in ucp_put_bw tag_lat; do
		perftest SR_AT_B SR_AT_A "two namespaces" "$SR_NS_B" "$SR_IP_B" "$tls" "$t" -n 1000 -w 100 -s 4096
	done
	iodemo SR_AT_B SR_AT_A "two namespaces" "$SR_NS_B" "$SR_IP_B" "$tls"
done

sr_finish
