#!/bin/bash
# A shared bottleneck: two hosts in network namespaces over a veth pair,
# a tc tbf on each veth end (200 Mbit/s, 100 in a sanitizer build; burst
# 32 KB, a 150 KB tail-drop queue, as a switch port), one iperf3 TCP flow
# from A to B for the whole test.  Beside it:
#  - Soft-RoCE ib_write_bw 64 KiB, A to B: it must get a real share of the
#    link (at least a tenth) and TCP must keep one too (RC's congestion
#    control, src/roce/cc.h: neither starves);
#  - rping -V 65000 B (its largest), A to B: every ping's data intact through the drops.
# Not a benchmark: bench/network.sh measures the shares (bench/results).
. "$(dirname "$0")/lib.sh"
sr_need_cmd ib_write_bw iperf3 rping tc
sr_init
sr_netns_setup

rate=200
grep -Eq '^SOFTRDMA_SANITIZE:[A-Z]*=(ON|address|thread)$' "$SR_BUILD_DIR/CMakeCache.txt" 2>/dev/null && rate=100
for end in "$SR_NS_A:$SR_VETH_A" "$SR_NS_B:$SR_VETH_B"; do
	ip netns exec "${end%%:*}" tc qdisc add dev "${end##*:}" root tbf rate "${rate}mbit" burst 32k limit 150000 ||
		sr_skip "tc cannot add a tbf qdisc here"
done
echo "+ tbf ${rate} Mbit/s, burst 32k, limit 150000 on both veth ends"

secs=6
tport=$(sr_free_port "$SR_NS_B")
sr_new_log iperf3-server
ip netns exec "$SR_NS_B" iperf3 -s -1 -p "$tport" >"$SR_OUTFILE" 2>&1 </dev/null &
SR_PIDS+=($!)
sr_wait_listen "$tport" $! "$SR_NS_B" || sr_die "iperf3 server not listening"
sr_new_log iperf3-client
tcp_out=$SR_OUTFILE
# long enough for both runs below; its mean over the whole time is TCP's
ip netns exec "$SR_NS_A" timeout -k 5 120 iperf3 -c "$SR_IP_B" -p "$tport" -t 40 -i 1 >"$tcp_out" 2>&1 </dev/null &
tpid=$!
SR_PIDS+=("$tpid")
sleep 2 # TCP fills the queue first

port=$(sr_free_port "$SR_NS_B")
if sr_pair --ns "$SR_NS_B" "ib_write_bw 64 KiB beside a TCP flow" "$port" \
	-- "${SR_AT_B[@]}" ib_write_bw -x 0 -s 65536 -D "$secs" --report_gbits -p "$port" \
	-- "${SR_AT_A[@]}" ib_write_bw -x 0 -s 65536 -D "$secs" --report_gbits -p "$port" "$SR_IP_B"; then
	mbit=$(awk '$1 == 65536 && NF >= 5 { printf "%.0f", $4 * 1000 }' "$SR_CLIENT_OUT")
	floor=$((rate / 10))
	if [ -n "$mbit" ] && [ "$mbit" -ge "$floor" ]; then
		sr_pass "  Soft-RoCE got $mbit Mbit/s of $rate (at least $floor)"
	else
		sr_fail "  Soft-RoCE got ${mbit:-no} Mbit/s of $rate beside TCP (less than $floor)"
	fi
fi

port=$(sr_free_port "$SR_NS_B")
count=200
sr_pair --ns "$SR_NS_B" "rping -V 65000 B beside a TCP flow" "cm:$port" \
	-- "${ERRTO[@]}" "$SR_TMP/rs.err" "${SR_AT_B[@]}" rping -s -a "$SR_IP_B" -p "$port" -S 65000 -C "$count" -v -V \
	-- "${ERRTO[@]}" "$SR_TMP/rc.err" "${SR_AT_A[@]}" rping -c -a "$SR_IP_B" -p "$port" -S 65000 -C "$count" -v -V &&
	sr_rping_data_match "$count"

# TCP's intervals while Soft-RoCE ran: it kept a share too
kill -INT "$tpid" 2>/dev/null
wait "$tpid"
sr_forget "$tpid"
tmbit=$(awk -v a=3 -v z=$((2 + secs)) '/sec/ && $0 !~ /sender|receiver/ { split($3, t, "-"); if (t[1] + 0 >= a && t[2] + 0 <= z) { v = $7; if ($8 ~ /^Gbits/) v *= 1000; if ($8 ~ /^Kbits/) v /= 1000; s += v; n++ } } END { if (n) printf "%.0f", s / n }' "$tcp_out")
if [ -n "$tmbit" ] && [ "$tmbit" -ge $((rate / 10)) ]; then
	sr_pass "TCP kept $tmbit Mbit/s of $rate beside Soft-RoCE"
else
	sr_fail "TCP got ${tmbit:-no} Mbit/s of $rate beside Soft-RoCE"
	sr_dump "$tcp_out" iperf3
fi
sr_finish
