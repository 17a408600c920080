#!/bin/bash
# Packet loss: two hosts in network namespaces, and nftables rules in
# host B that drop 2 % of the UDP datagrams to port 4791 at random, in
# both directions through B.  RC must still deliver every byte intact:
# PSN sequence NAKs, go-back-N, retransmission timeouts and duplicate
# handling at work.
#
# Not ibv_rc_pingpong: it has no final handshake, so whichever side is done
# first exits while the ACK of its last message may still be lost, and the
# other side then retries at a process that is gone (RETRY_EXC_ERR) -- on
# any lossy RoCE network, with any RNIC (README).  The perftest programs
# end with a barrier over their TCP side channel; every byte under loss is
# checked by verbs/test_faults.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ib_send_bw ib_write_bw nft
sr_init
sr_netns_setup

table=srloss$$
ip netns exec "$SR_NS_B" nft -f - <<NFT || sr_skip "nftables cannot add rules here"
table inet $table {
	chain in { type filter hook input priority 0; udp dport 4791 numgen random mod 100 < 2 drop; }
	chain out { type filter hook output priority 0; udp dport 4791 numgen random mod 100 < 2 drop; }
}
NFT
echo "+ nftables in $SR_NS_B: drop 2% of UDP/4791 in and out"

pair() {
	local desc tool=$2 port
	desc=$(sr_try_desc "$1")
	shift 2
	port=$(sr_free_port "$SR_NS_B")
	sr_pair --ns "$SR_NS_B" "$desc" "$port" -- "${SR_AT_B[@]}" "$tool" -p "$port" "$@" \
		-- "${SR_AT_A[@]}" "$tool" -p "$port" "$@" "$SR_IP_B"
}

sr_perftest_tries pair "ib_send_bw 4 KiB under 2% loss" ib_send_bw -x 0 -s 4096 -n 500
sr_perftest_tries pair "ib_write_bw 64 KiB under 2% loss" ib_write_bw -x 0 -s 65536 -n 200
# small requests held to leave in batches, released by ACKs that may be lost
sr_perftest_tries pair "ib_write_bw 64 B under 2% loss" ib_write_bw -x 0 -s 64 -n 20000
# ACKs held for the responder's next request, which may be lost too
sr_perftest_tries pair "ib_write_lat 8 B under 2% loss" ib_write_lat -x 0 -s 8 -n 2000
sr_perftest_tries pair "ib_read_bw 64 KiB under 2% loss" ib_read_bw -x 0 -s 65536 -n 200
sr_perftest_tries pair "ib_atomic_bw under 2% loss" ib_atomic_bw -x 0 -n 300
drops=$(ip netns exec "$SR_NS_B" nft list table inet "$table" 2>/dev/null | grep -c drop)
[ "$drops" -ge 1 ] && sr_pass "the drop rules were in place" || sr_fail "drop rules missing"
sr_finish
