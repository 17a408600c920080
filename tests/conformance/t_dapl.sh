#!/bin/bash
# Debian's uDAPL (libdapl2, dapl2-utils) over softrdma: libdat2 reads a
# dat.conf (DAT_OVERRIDE), dlopens the provider library it names and
# dlcloses it at the end, so each run also checks that the libraries'
# unloading is safe (issue 34, item 6: dtest exited 139 on both sides).
#  - ofa-v2-cma-roe-lo: libdaplofa, rdma_cm on the Soft-RoCE device of lo;
#  - ofa-v2-scm-roe-rxe0-1: libdaploscm, its own socket CM, verbs on
#    rxe0 port 1 (DAPL_SCM_NETDEV names the interface whose address it
#    exchanges);
#  - ofa-v2-iwarp-lo: libdaplofa on the Soft-iWARP device of lo.
# dtest (Send, RDMA Write and Read), dtestx (immediate data and atomics,
# RoCE only: Soft-iWARP has no atomics, as siw) and dapltest's
# transaction test (Send/Recv, RDMA Read/Write, several endpoints).  As
# root with tshark, a capture shows DAPL_TCLASS on the scm provider's
# packets.
. "$(dirname "$0")/lib.sh"
sr_need_cmd dtest dtestx dapltest
sr_init
IWCONF=$SR_TMP/iwarp.conf
sr_write_conf "$IWCONF" lo iwarp
# what a user puts in /etc/dat.conf (README "DAPL"), for this test's own file
cat >"$SR_TMP/dat.conf" <<'EOF'
ofa-v2-cma-roe-lo u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "lo 0" ""
ofa-v2-scm-roe-rxe0-1 u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 "rxe0 1" ""
ofa-v2-iwarp-lo u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "lo 0" ""
EOF
export DAT_OVERRIDE=$SR_TMP/dat.conf DAPL_SCM_NETDEV=lo
DTEST_PORT=15828 # dtest's and dtestx's TCP port for the server's parameters

# dtest_pair TOOL PROVIDER [CONF]: server and client of dtest or dtestx
dtest_pair() {
	local tool=$1 prov=$2 conf=${3:-$SOFTRDMA_CONF}
	sr_pair "$tool -P $prov" "$DTEST_PORT" -- env SOFTRDMA_CONF="$conf" "$SR_RUN" "$tool" -P "$prov" -b 65536 -s \
		-- env SOFTRDMA_CONF="$conf" "$SR_RUN" "$tool" -P "$prov" -b 65536 -h 127.0.0.1 &&
		grep -q "PASSED" "$SR_CLIENT_OUT" && grep -q "PASSED" "$SR_SERVER_OUT" &&
		sr_pass "$tool -P $prov: both sides report PASSED"
}
# dapltest_pair PROVIDER LISTEN [CONF]: the transaction test against a
# server that dapltest -T Q then stops
dapltest_pair() {
	local prov=$1 listen=$2 conf=${3:-$SOFTRDMA_CONF}
	sr_pair --server-stays "dapltest -T T -D $prov" "$listen" \
		-- env SOFTRDMA_CONF="$conf" "$SR_RUN" dapltest -T S -D "$prov" \
		-- env SOFTRDMA_CONF="$conf" "$SR_RUN" dapltest -T T -s 127.0.0.1 -D "$prov" -i 200 -t 2 -w 2 \
		client SR 4096 server SR 4096 client RR 8192 client RW 8192 &&
		grep -q "End of Work -- Client Exiting" "$SR_CLIENT_OUT" &&
		sr_pass "dapltest -T T -D $prov: the client's work ends"
}

dtest_pair dtest ofa-v2-cma-roe-lo
dtest_pair dtestx ofa-v2-cma-roe-lo
dapltest_pair ofa-v2-cma-roe-lo cm:62000
dtest_pair dtest ofa-v2-scm-roe-rxe0-1
dtest_pair dtestx ofa-v2-scm-roe-rxe0-1
if [ "$(id -u)" -eq 0 ] && command -v tshark >/dev/null; then
	cap=$SR_TMP/dapl.pcapng
	sr_capture_start "$cap" 'udp port 4791'
	DAPL_TCLASS=72 SOFTRDMA_GSO=0 dtest_pair dtest ofa-v2-scm-roe-rxe0-1
	sr_capture_stop
	tc=$(tshark -r "$cap" -T fields -e ip.dsfield -Y 'infiniband && infiniband.bth.destqp != 1' 2>/dev/null |
		sort | uniq -c | tr -s ' \n' ' ')
	case $tc in
	" "[0-9]*" 0x48 ") sr_pass "DAPL_TCLASS=72: every data packet has TOS 0x48 ($tc)" ;;
	*) sr_fail "DAPL_TCLASS=72: data packets by TOS: $tc" ;;
	esac
fi
dtest_pair dtest ofa-v2-iwarp-lo "$IWCONF"
dapltest_pair ofa-v2-iwarp-lo 62000 "$IWCONF"
sr_finish
