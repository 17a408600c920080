#!/bin/bash
# Wire conformance: capture softrdma's RoCEv2 traffic on lo while Debian's
# tools run every opcode family (RC send/write/read/atomic, UC, UD) and
# test_mw the memory window traffic (Send with Invalidate), and
# have Wireshark's infiniband dissector decode it: every packet must decode
# as RoCE with no malformed packet and no expert warning, and each opcode
# family must be present.  GSO is turned off (SOFTRDMA_GSO=0) so the capture
# holds the datagrams as a NIC would see them, not unsegmented GSO bursts.
. "$(dirname "$0")/lib.sh"
sr_need_cmd tshark ibv_rc_pingpong ib_write_bw
[ "$(id -u)" -eq 0 ] || sr_skip "capturing on lo needs root"
sr_init
export SOFTRDMA_GSO=0

cap=$SR_TMP/roce.pcapng
sr_capture_start "$cap" 'udp port 4791'

sr_tool_pair "rc send" ibv_rc_pingpong -g 0 -s 5000 -n 5
sr_tool_pair "uc send" ibv_uc_pingpong -g 0 -s 5000 -n 5
sr_tool_pair "ud send" ibv_ud_pingpong -g 0 -s 1000 -n 5
sr_perftest_tries sr_tool_pair "rc write" ib_write_bw -x 0 -s 5000 -n 5
sr_perftest_tries sr_tool_pair "rc read" ib_read_bw -x 0 -s 5000 -n 5
sr_perftest_tries sr_tool_pair "rc atomic fetch&add" ib_atomic_bw -x 0 -n 5 -A FETCH_AND_ADD
sr_perftest_tries sr_tool_pair "rc atomic compare&swap" ib_atomic_bw -x 0 -n 5 -A CMP_AND_SWAP
# memory windows (verbs/test_mw): Writes, Reads and atomics through a
# window's rkey are ordinary packets, Send with Invalidate carries an IETH;
# BIND_MW and LOCAL_INV are local and send nothing
sr_run "memory windows (verbs/test_mw)" -- "$SR_BUILD_DIR/tests/test_mw"
sleep 1
sr_capture_stop

total=$(tshark -r "$cap" -Y 'udp.dstport == 4791' 2>/dev/null | wc -l)
roce=$(tshark -r "$cap" -Y 'infiniband' 2>/dev/null | wc -l)
bad=$(tshark -r "$cap" --disable-protocol rpcordma -Y '_ws.malformed || _ws.expert.severity >= warning' 2>/dev/null | wc -l)
echo "captured $total datagrams to 4791, $roce decoded as InfiniBand, $bad malformed/warning"
[ "$total" -gt 100 ] && sr_pass "traffic captured ($total datagrams)" || sr_fail "too little traffic captured ($total)"
[ "$roce" -eq "$total" ] && sr_pass "every datagram decodes as RoCEv2" || sr_fail "$((total - roce)) datagrams not decoded as RoCEv2"
if [ "$bad" -eq 0 ]; then
	sr_pass "no malformed packets, no expert warnings"
else
	sr_fail "$bad malformed/warning packets"
	tshark -r "$cap" --disable-protocol rpcordma -Y '_ws.malformed || _ws.expert.severity >= warning' 2>/dev/null | head -20
fi
ops=$(tshark -r "$cap" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -u | tr '\n' ' ')
echo "opcodes seen: $ops"
# RC: send first/middle/last 0,1,2; write first/last 6,8; write only imm 11;
# read request/responses 12..16; ack 17; atomic ack 18; cmp&swap 19; fetch&add 20
# send only with invalidate 23; UC send first 32; UD send only 100
for op in 0 1 2 6 8 12 13 15 17 18 19 20 23 32 100; do
	case " $ops " in
	*" $op "*) sr_pass "opcode $op present" ;;
	*) sr_fail "opcode $op missing from the capture" ;;
	esac
done
sr_finish
