#!/bin/bash
# RDMA-CM between two hosts: network namespaces joined by a veth pair (MTU
# 1500), one softrdmad and one rxe0 per host, CM MADs crossing the link.
# Server on B, client on A, through Debian's rdmacm-utils and perftest -R.
. "$(dirname "$0")/lib.sh"
sr_need_cmd rping ucmatose udaddy rdma_server rdma_client ib_write_bw
sr_init
sr_netns_setup

# cm_pair DESC [udp] -- SERVER (on B) -- CLIENT (on A); port $P
cm_pair() {
	local desc=$1 kind=''
	shift
	case $1 in udp | ib) kind=:$1 && shift ;; esac
	sr_pair --ns "$SR_NS_B" "$desc" "cm:$P$kind" "$@"
}

P=$(sr_free_port "$SR_NS_B")
if cm_pair "rping -C 1000 -v, A -> B" -- "${ERRTO[@]}" "$SR_TMP/rs.err" "${SR_AT_B[@]}" rping -s -a "$SR_IP_B" -p "$P" -C 1000 -v \
	-- "${ERRTO[@]}" "$SR_TMP/rc.err" "${SR_AT_A[@]}" rping -c -a "$SR_IP_B" -p "$P" -C 1000 -v; then
	n=$(grep -c '^ping data: rdma-ping-' "$SR_CLIENT_OUT")
	if [ "$n" -eq 1000 ] && diff <(sed -n 's/^server ping data: //p' "$SR_SERVER_OUT") \
		<(sed -n 's/^ping data: //p' "$SR_CLIENT_OUT") >/dev/null; then
		sr_pass "  server and client ping data match (1000 lines)"
	else
		sr_fail "  ping data: $n client lines, or server and client differ"
	fi
fi
P=$(sr_free_port "$SR_NS_B")
if cm_pair "rping -S 65535 -C 100 -v (segmented at the 1024-byte path MTU)" \
	-- "${ERRTO[@]}" "$SR_TMP/rs2.err" "${SR_AT_B[@]}" rping -s -a "$SR_IP_B" -p "$P" -S 65535 -C 100 -v \
	-- "${ERRTO[@]}" "$SR_TMP/rc2.err" "${SR_AT_A[@]}" rping -c -a "$SR_IP_B" -p "$P" -S 65535 -C 100 -v; then
	if diff <(sed -n 's/^server ping data: //p' "$SR_SERVER_OUT") \
		<(sed -n 's/^ping data: //p' "$SR_CLIENT_OUT") >/dev/null &&
		[ "$(grep -c '^ping data' "$SR_CLIENT_OUT")" -eq 100 ]; then
		sr_pass "  server and client ping data match (100 lines)"
	else
		sr_fail "  server and client ping data differ"
	fi
fi
P=$(sr_free_port "$SR_NS_B")
cm_pair "ucmatose: 4 connections x 100 messages" -- "${SR_AT_B[@]}" ucmatose -p "$P" -c 4 -C 100 -S 4000 \
	-- "${SR_AT_A[@]}" ucmatose -s "$SR_IP_B" -p "$P" -c 4 -C 100 -S 4000
P=7174
cm_pair "udaddy (UD via SIDR)" udp -- "${SR_AT_B[@]}" udaddy -c 2 -C 20 \
	-- "${SR_AT_A[@]}" udaddy -s "$SR_IP_B" -c 2 -C 20
P=$(sr_free_port "$SR_NS_B")
cm_pair "rdma_server / rdma_client" -- "${SR_AT_B[@]}" rdma_server -p "$P" \
	-- "${SR_AT_A[@]}" rdma_client -s "$SR_IP_B" -p "$P"
for t in "ib_write_bw -s 65536 -n 1000" "ib_read_bw -s 65536 -n 500" "ib_send_lat -s 64 -n 500"; do
	set -- $t
	sr_perftest_tries sr_perftest_ns_once "$1 -R ${*:2}" cm: "$@"
done

# The REQ's path MTU is both sides' (IB CM, as the kernel's CM and rxe):
# a server capped at 1024 (mtu = 1024) takes the client's 4096, or the
# client's 4096-byte Read responses are BAD_RESP to it.
ip -n "$SR_NS_A" link set "$SR_VETH_A" mtu 9000 && ip -n "$SR_NS_B" link set "$SR_VETH_B" mtu 9000 ||
	sr_die "cannot set the veth MTU to 9000"
cat "$SR_CONF_B" >"$SR_TMP/b-1024.conf" && echo 'mtu = 1024' >>"$SR_TMP/b-1024.conf"
P=$(sr_free_port "$SR_NS_B")
cm_pair "rping -S 65535 -C 20 -V, server capped at MTU 1024, client at 4096" \
	-- ip netns exec "$SR_NS_B" env SOFTRDMA_CONF="$SR_TMP/b-1024.conf" "$SR_RUN" rping -s -a "$SR_IP_B" -p "$P" -S 65535 -C 20 -V \
	-- "${SR_AT_A[@]}" rping -c -a "$SR_IP_B" -p "$P" -S 65535 -C 20 -V

# no listener on the other host: the remote daemon rejects at once
P=$(sr_free_port "$SR_NS_B")
start=$SECONDS
if sr_run_fail "rping to a remote port with no listener fails" -- "${SR_AT_A[@]}" rping -c -a "$SR_IP_B" -p "$P" -C 1; then
	sr_expect "$SR_OUT" 'RDMA_CM_EVENT_REJECTED, error 8' "  REJECTED, reason 8"
	[ $((SECONDS - start)) -le 3 ] && sr_pass "  within 3 s" || sr_fail "  took $((SECONDS - start)) s"
fi
sr_finish
