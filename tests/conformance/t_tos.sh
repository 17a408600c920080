#!/bin/bash
# Traffic class on the wire (issue 34, item 4), captured on lo: each run
# below uses its own class, and the packets it makes must carry it.
#  - RoCE, a QP's path (ib_send_bw --tclass, RC): the IPv4 TOS of both
#    QPs' packets, all 8 bits with the ECN field, as rxe writes them;
#  - RoCE, an AH (ib_send_bw -c UD --tclass): the sender's datagrams;
#  - RoCE, rdma_cm's RDMA_OPTION_ID_TOS (ucmatose -t, set by the client
#    only): the client's CM MADs and packets, and the server's too (its
#    path is the REQ's, as the kernel's CM takes it);
#  - RoCE, UD through rdma_cm (udaddy -t, client only): the client's
#    datagrams, and the server's answers, sent through AHs it makes from
#    the client's completions (ibv_create_ah_from_wc): the traffic class a
#    UD receive reports is the one it came with;
#  - Soft-iWARP (ucmatose -t): the client's TCP segments carry the DSCP
#    bits (TCP owns the ECN field); the accepted side keeps its
#    listener's, 0, as the kernel's TCP.
# Nothing else in the capture has a class of its own.
. "$(dirname "$0")/lib.sh"
sr_need_cmd tshark ucmatose udaddy ib_send_bw
[ "$(id -u)" -eq 0 ] || sr_skip "capturing on lo needs root"
sr_init
export SOFTRDMA_GSO=0 # the capture holds each datagram as the wire carries it
IWCONF=$SR_TMP/iwarp.conf
sr_write_conf "$IWCONF" lo iwarp

cap=$SR_TMP/tos.pcapng
sr_capture_start "$cap" 'udp port 4791 or tcp' -B 64

# perftest without rdma_cm (its --tclass is the GRH's): QPs and AHs made by hand
sr_perftest_tries sr_tool_pair "ib_send_bw --tclass=0x4a (RC)" ib_send_bw -x 0 -s 2000 -n 20 --tclass=0x4a
sr_perftest_tries sr_tool_pair "ib_send_bw -c UD --tclass=0x4d" ib_send_bw -x 0 -c UD -s 1000 -n 20 --tclass=0x4d
P=$(sr_free_port)
sr_pair "ucmatose -t 0x68 (RoCE)" "cm:$P" -- "$SR_RUN" ucmatose -p "$P" -C 20 \
	-- "$SR_RUN" ucmatose -s 127.0.0.1 -p "$P" -C 20 -t 0x68
sr_pair "udaddy -t 0x8b (RoCE UD)" "cm:7174:udp" -- "$SR_RUN" udaddy -C 20 \
	-- "$SR_RUN" udaddy -s 127.0.0.1 -C 20 -t 0x8b
P=$(sr_free_port)
sr_pair "ucmatose -t 0x6b (Soft-iWARP)" "$P" -- env SOFTRDMA_CONF="$IWCONF" "$SR_RUN" ucmatose -p "$P" -C 20 \
	-- env SOFTRDMA_CONF="$IWCONF" "$SR_RUN" ucmatose -s 127.0.0.1 -p "$P" -C 20 -t 0x6b
sleep 1
sr_capture_stop

ts() { tshark -r "$cap" "$@" 2>/dev/null; }
# roce FILTER: the RoCE packets matching FILTER; ports: their distinct UDP source ports
roce() { ts -Y "infiniband && ($1)" | wc -l; }
ports() { ts -T fields -e udp.srcport -Y "infiniband && ($1)" | sort -u | wc -l; }
tcls=$(ts -T fields -e ip.dsfield -Y 'infiniband' | sort | uniq -c | tr -s ' \n' ' ')
echo "RoCE packets by TOS: $tcls"

# carried TCLASS FILTER MIN MINQPS DESC: at least MIN RoCE packets of class
# TCLASS match FILTER, sent by at least MINQPS QPs (UDP source ports)
carried() {
	local f="ip.dsfield == $1 && ($2)" n p
	n=$(roce "$f")
	p=$(ports "$f")
	[ "$n" -ge "$3" ] && [ "$p" -ge "$4" ] && sr_pass "$5: $n packets from $p QPs" ||
		sr_fail "$5: $n packets from $p QPs (want >= $3 from $4)"
}
carried 0x4a 'infiniband.bth.opcode < 32' 20 2 "RC path traffic class 0x4a, both QPs"
carried 0x4d 'infiniband.bth.opcode == 100' 20 1 "UD AH traffic class 0x4d"
carried 0x68 'infiniband.bth.destqp == 1' 3 1 "RDMA_OPTION_ID_TOS 0x68: CM MADs (REQ, REP, RTU, ...)"
carried 0x68 'infiniband.bth.destqp != 1' 40 2 "RDMA_OPTION_ID_TOS 0x68: both QPs (the server's path is the REQ's)"
carried 0x8b 'infiniband.bth.destqp == 1' 2 1 "udaddy TOS 0x8b: SIDR MADs (REQ and REP)"
carried 0x8b 'infiniband.bth.destqp != 1' 40 2 "udaddy TOS 0x8b: both QPs (the answers' AHs from the received GRH)"
other=$(roce 'ip.dsfield != 0 && ip.dsfield != 0x4a && ip.dsfield != 0x4d && ip.dsfield != 0x68 && ip.dsfield != 0x8b')
[ "$other" -eq 0 ] && sr_pass "no RoCE packet with a class it was not given" ||
	sr_fail "$other RoCE packets with another class"

# Soft-iWARP: the client's segments (source port not the listener's)
iw=$(ts -T fields -e ip.dsfield -Y "tcp.srcport != $P && tcp.dstport == $P && tcp.len > 0" | sort | uniq -c | tr -s ' \n' ' ')
n=$(ts -Y "tcp.srcport != $P && tcp.dstport == $P && tcp.len > 0 && ip.dsfield == 0x68" | wc -l)
all=$(ts -Y "tcp.srcport != $P && tcp.dstport == $P && tcp.len > 0" | wc -l)
syn=$(ts -Y "tcp.dstport == $P && tcp.flags.syn == 1 && tcp.flags.ack == 0 && ip.dsfield == 0x68" | wc -l)
echo "Soft-iWARP client segments by TOS: $iw"
# the MPA Request and the messages: as many segments as TCP makes of them
[ "$n" -ge 2 ] && [ "$n" -eq "$all" ] && [ "$syn" -ge 1 ] &&
	sr_pass "Soft-iWARP TOS 0x6b: the client's SYN and its $n data segments carry DSCP 0x68 (ECN TCP's)" ||
	sr_fail "Soft-iWARP TOS 0x6b: $n of the client's $all data segments carry 0x68, $syn SYN"
sr_finish
