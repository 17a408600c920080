#!/bin/bash
# Two hosts: network namespaces joined by a veth pair with MTU 1500 (so the
# path MTU is 1024 and messages are segmented), one softrdma daemon and
# device per host.  Debian's tools between them: RC (1 B .. 1 MiB, with
# data checks, events and the ibv_wr_* API), UC, UD, SRQ and perftest.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_rc_pingpong ibv_ud_pingpong ib_write_bw
sr_init
sr_netns_setup

# B's side channel listens in namespace B; A connects to B's address
pair() { # DESC TOOL ARGS...   (server on B, client on A)
	local desc=$1 tool=$2 port
	shift 2
	port=$(sr_free_port "$SR_NS_B")
	sr_pair --ns "$SR_NS_B" "$desc" "$port" -- "${SR_AT_B[@]}" "$tool" -p "$port" "$@" \
		-- "${SR_AT_A[@]}" "$tool" -p "$port" "$@" "$SR_IP_B"
}

if sr_run "host A sees its device with an active 1024-byte MTU" -- "${SR_AT_A[@]}" ibv_devinfo -v; then
	sr_expect "$SR_OUT" 'active_mtu:.*1024' "  path MTU 1024 on a 1500-byte link"
	sr_expect "$SR_OUT" "::ffff:$SR_IP_A" "  GID carries the veth address"
fi
for size in 1 1000 4096 65536 1048576; do
	iters=100
	[ "$size" -ge 1048576 ] && iters=10
	if pair "rc_pingpong $size B" ibv_rc_pingpong -g 0 -c -s "$size" -n "$iters"; then
		sr_reject "$SR_CLIENT_OUT" 'invalid data' "  data intact"
	fi
done
pair "rc_pingpong 100000 B, events" ibv_rc_pingpong -g 0 -c -s 100000 -n 50 -e
pair "rc_pingpong 100000 B, ibv_wr_* API" ibv_rc_pingpong -g 0 -c -s 100000 -n 50 --new_send
pair "uc_pingpong 10000 B" ibv_uc_pingpong -g 0 -c -s 10000 -n 100
pair "ud_pingpong 1000 B" ibv_ud_pingpong -g 0 -c -s 1000 -n 100
pair "srq_pingpong 10000 B" ibv_srq_pingpong -g 0 -c -s 10000 -n 100
sr_perftest_tries pair "ib_write_bw 64 KiB" ib_write_bw -x 0 -s 65536 -n 1000
sr_perftest_tries pair "ib_read_bw 64 KiB" ib_read_bw -x 0 -s 65536 -n 500
sr_perftest_tries pair "ib_send_bw 64 KiB" ib_send_bw -x 0 -s 65536 -n 1000
sr_perftest_tries pair "ib_atomic_bw" ib_atomic_bw -x 0 -n 1000
sr_perftest_tries pair "ib_send_lat" ib_send_lat -x 0 -s 64 -n 500
sr_finish
