#!/bin/bash
# RDMA-CM on one host (rxe0 on lo): Debian's unmodified rdmacm-utils and
# perftest -R through softrdma's librdmacm.so.1, connecting with IB CM MADs
# on QP1 routed by softrdmad.  Data checks: rping's client and server ping
# lines must be identical, ucmatose/udaddy/rdma_* verify their own.
# Error paths: no listener (REJECTED quickly), rdma_reject, server killed
# mid-connection (the client ends, no hang), ten clients at once.
. "$(dirname "$0")/lib.sh"
sr_need_cmd rping ucmatose udaddy rdma_server rdma_client rdma_xserver rdma_xclient cmtime ib_write_bw
sr_init

# cm_pair DESC [udp|ib] -- SERVER ARGS -- CLIENT ARGS: waits for the
# server's rdma_cm listen on port $P (port space TCP unless given)
cm_pair() {
	local desc=$1 kind=''
	shift
	case $1 in udp | ib) kind=:$1 && shift ;; esac
	sr_pair "$desc" "cm:$P$kind" "$@"
}

for spec in "64 1000" "23 200" "4096 200" "65535 100"; do
	set -- $spec
	P=$(sr_free_port)
	if cm_pair "rping -S $1 -C $2 -v" -- "${ERRTO[@]}" "$SR_TMP/rping-s.err" "$SR_RUN" rping -s -a 127.0.0.1 -p "$P" -S "$1" -C "$2" -v \
		-- "${ERRTO[@]}" "$SR_TMP/rping-c.err" "$SR_RUN" rping -c -a 127.0.0.1 -p "$P" -S "$1" -C "$2" -v; then
		sr_rping_data_match "$2"
	fi
done

P=$(sr_free_port)
cm_pair "ucmatose: 10 connections, 100 x 4000-byte messages" -- "$SR_RUN" ucmatose -p "$P" -c 10 -C 100 -S 4000 \
	-- "$SR_RUN" ucmatose -s 127.0.0.1 -p "$P" -c 10 -C 100 -S 4000
P=$(sr_free_port)
cm_pair "ucmatose -m (rdma_migrate_id)" -- "$SR_RUN" ucmatose -p "$P" -m -- "$SR_RUN" ucmatose -s 127.0.0.1 -p "$P" -m
P=$(sr_free_port)
cm_pair "ucmatose -P ib (RDMA_PS_IB)" ib -- "$SR_RUN" ucmatose -p "$P" -P ib \
	-- "$SR_RUN" ucmatose -s 127.0.0.1 -p "$P" -P ib
P=$(sr_free_port)
cm_pair "ucmatose over IPv6 (::1)" -- "$SR_RUN" ucmatose -p "$P" -f ipv6 -b ::1 \
	-- "$SR_RUN" ucmatose -s ::1 -f ipv6 -p "$P"
P=7174 # udaddy's fixed port (its -p is the port space)
cm_pair "udaddy (UD, SIDR): 5 connections x 50 messages" udp -- "$SR_RUN" udaddy -c 5 -C 50 \
	-- "$SR_RUN" udaddy -s 127.0.0.1 -c 5 -C 50
P=$(sr_free_port)
cm_pair "rdma_server / rdma_client (rdma_create_ep, synchronous ids)" -- "$SR_RUN" rdma_server -p "$P" \
	-- "$SR_RUN" rdma_client -s 127.0.0.1 -p "$P"
P=$(sr_free_port)
cm_pair "rdma_xserver / rdma_xclient (RC, SRQ via rdma_create_srq)" -- "$SR_RUN" rdma_xserver -p "$P" \
	-- "$SR_RUN" rdma_xclient -s 127.0.0.1 -p "$P"

for t in "ib_write_bw -s 65536 -n 2000" "ib_read_bw -s 65536 -n 1000" "ib_send_bw -s 65536 -n 2000" \
	"ib_send_lat -s 64 -n 1000" "ib_write_lat -s 64 -n 1000"; do
	set -- $t
	sr_perftest_tries sr_perftest_once "$1 -R ${*:2}" cm: "$@"
done

P=$(sr_free_port)
sr_cm_cmtime "cm:$P" "$P"

P=$(sr_free_port)
sr_cm_ten_clients "cm:$P" "$P"

# connecting to a port nobody listens on: REJECTED at once, not a timeout
P=$(sr_free_port)
start=$SECONDS
if sr_run_fail "rping to a port with no listener fails" -- "$SR_RUN" rping -c -a 127.0.0.1 -p "$P" -C 1; then
	sr_expect "$SR_OUT" 'RDMA_CM_EVENT_REJECTED, error 8' "  REJECTED with reason 8 (invalid service ID)"
	if [ $((SECONDS - start)) -le 3 ]; then
		sr_pass "  within 3 s"
	else
		sr_fail "  took $((SECONDS - start)) s"
	fi
fi

# a server killed in the middle of a connection: the client must end.
# softrdmad sends the DREQ the dead process left with it: the client sees
# DISCONNECTED at once, as with the kernel's CM
P=$(sr_free_port)
sr_cm_killed_server "cm:$P" "$P" 'DISCONNECT EVENT|error'

sr_finish
