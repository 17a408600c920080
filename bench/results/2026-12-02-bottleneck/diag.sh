#!/bin/bash
# diag.sh [tcp]: Soft-RoCE ib_write_bw 64 KiB at a tbf bottleneck (RATE Mbit/s,
# default 1000), beside one iperf3 flow with "tcp"; SOFTRDMA_DEBUG counts of
# timeouts, probes and NAKs.  As root; SR_BUILD_DIR picks the build.
here=$(cd "$(dirname "$0")/../../.." && pwd)
export SR_SOURCE_DIR=$here SR_BUILD_DIR=${SR_BUILD_DIR:-$here/build}
. "$here/tests/conformance/lib.sh"
SR_TEST=diag
sr_init roce >${DIAG_OUT:-/tmp}/diag-init.txt
sr_netns_setup >/dev/null
R=${RATE:-1000}
ip netns exec "$SR_NS_A" tc qdisc add dev "$SR_VETH_A" root tbf rate ${R}mbit burst $((R*32)) limit $((R*150))
ip netns exec "$SR_NS_B" tc qdisc add dev "$SR_VETH_B" root tbf rate ${R}mbit burst $((R*32)) limit $((R*150))
port=$(sr_free_port "$SR_NS_B")
if [ "${1:-}" = tcp ]; then
	ip netns exec "$SR_NS_B" iperf3 -s -1 -p 5999 >/dev/null 2>&1 &
	sleep 0.5
	ip netns exec "$SR_NS_A" iperf3 -c $SR_IP_B -p 5999 -t 9 -i 1 > ${DIAG_OUT:-/tmp}/diag-tcp.txt 2>&1 &
	sleep 1
fi
"${SR_AT_B[@]}" ib_write_bw -x 0 -s 65536 -D 5 --report_gbits -p $port >/dev/null 2>&1 &
sleep 1
ip netns exec "$SR_NS_A" env $XENV SOFTRDMA_DEBUG=${DBG:-1} SOFTRDMA_CONF="$SR_CONF_A" "$SR_RUN" ib_write_bw -x 0 -s 65536 -D 5 --report_gbits -p $port $SR_IP_B > ${DIAG_OUT:-/tmp}/diag-roce.txt 2>${DIAG_OUT:-/tmp}/diag-dbg.txt
wait
grep -A1 "BW average" ${DIAG_OUT:-/tmp}/diag-roce.txt | tail -1
echo "timeouts $(grep -c 'timeout at' ${DIAG_OUT:-/tmp}/diag-dbg.txt) early $(grep -c 'early' ${DIAG_OUT:-/tmp}/diag-dbg.txt) tlp $(grep -c 'tail-loss' ${DIAG_OUT:-/tmp}/diag-dbg.txt) goback $(grep -c 'go back' ${DIAG_OUT:-/tmp}/diag-dbg.txt) nak $(grep -ci 'nak' ${DIAG_OUT:-/tmp}/diag-dbg.txt)"
[ "${1:-}" = tcp ] && grep -E "sender|receiver" ${DIAG_OUT:-/tmp}/diag-tcp.txt
ip netns exec "$SR_NS_A" tc -s qdisc show dev $SR_VETH_A | grep -E 'Sent|dropped'
ip netns exec "$SR_NS_B" tc -s qdisc show dev $SR_VETH_B | grep -E 'Sent|dropped'
ip netns exec "$SR_NS_B" cat /proc/net/snmp | grep Udp:
sr_finish >/dev/null 2>&1
