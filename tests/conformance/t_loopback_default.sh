#!/bin/bash
# Loopback with the built-in default device (no configuration file), on
# both shapes of machine a user or CI runner has:
#   - only lo: the default device sits on lo;
#   - lo and an interface with an address (a veth here, eth0 elsewhere):
#     the default device sits on that interface, and 127.0.0.1 and ::1
#     still reach it (its GID table lists them after its own addresses).
# Every rdma_cm program of the README runs over 127.0.0.1 and ::1 there:
# rping (README's own example), ucmatose, udaddy, perftest -R, rstream,
# riostream.  Also: an iWARP-only configuration on the interface, and
# "loopback = off", which gives the kernel's answer (ENODEV).
. "$(dirname "$0")/lib.sh"
sr_need_cmd rping ucmatose udaddy ib_send_bw rstream riostream
sr_init
sr_netns_setup
NO_CONF=$SR_TMP/no-such-file.conf # no file: the built-in default

SR_NS_LO=${SR_NS_A%-a}-lo
sr_netns_add "$SR_NS_LO"

# ib_send_bw -R over 127.0.0.1 in namespace $ns with ${at[@]}, from
# lo_suite (sr_perftest_tries runs it again if it meets perftest's race)
send_bw_once() {
	local desc
	desc=$(sr_try_desc "$label: ib_send_bw -R to 127.0.0.1")
	p=$(sr_free_port "$ns")
	sr_pair --ns "$ns" "$desc" "cm:$p" \
		-- "${at[@]}" ib_send_bw -R -p "$p" -n 500 \
		-- "${at[@]}" ib_send_bw -R -p "$p" -n 500 127.0.0.1
}

# lo_suite NS LABEL CONF: the programs over 127.0.0.1 and ::1 in NS
lo_suite() {
	local ns=$1 label=$2 conf=$3 a p
	local -a at=(ip netns exec "$ns" env SOFTRDMA_CONF="$conf" "$SR_RUN")

	for a in 127.0.0.1 ::1; do
		p=$(sr_free_port "$ns")
		if sr_pair --ns "$ns" "$label: rping -s -a $a -v -C 100" "cm:$p" \
			-- "${ERRTO[@]}" "$SR_TMP/rs.err" "${at[@]}" rping -s -a "$a" -p "$p" -v -C 100 \
			-- "${ERRTO[@]}" "$SR_TMP/rc.err" "${at[@]}" rping -c -a "$a" -p "$p" -v -C 100; then
			sr_rping_data_match 100
		fi
		p=$(sr_free_port "$ns")
		sr_pair --ns "$ns" "$label: rstream -T v over $a, 64 KiB x 200" "cm:$p" \
			-- "${at[@]}" rstream -b "$a" -p "$p" -T v -S 65536 -C 200 \
			-- "${at[@]}" rstream -s "$a" -p "$p" -T v -S 65536 -C 200
	done
	p=$(sr_free_port "$ns")
	sr_pair --ns "$ns" "$label: ucmatose -c 10 over 127.0.0.1" "cm:$p" \
		-- "${at[@]}" ucmatose -b 127.0.0.1 -p "$p" -c 10 -C 20 \
		-- "${at[@]}" ucmatose -s 127.0.0.1 -p "$p" -c 10 -C 20
	# udaddy's port is fixed (7174; its -p is the port space)
	sr_pair --ns "$ns" "$label: udaddy over 127.0.0.1" "cm:7174:udp" \
		-- "${at[@]}" udaddy -b 127.0.0.1 -c 5 -C 20 \
		-- "${at[@]}" udaddy -s 127.0.0.1 -c 5 -C 20
	sr_perftest_tries send_bw_once
	p=$(sr_free_port "$ns")
	sr_pair --ns "$ns" "$label: riostream -T v over 127.0.0.1, 4 KiB x 100" "cm:$p" \
		-- "${at[@]}" riostream -b 127.0.0.1 -p "$p" -T v -S 4096 -C 100 \
		-- "${at[@]}" riostream -s 127.0.0.1 -p "$p" -T v -S 4096 -C 100
}

# ---- only lo ----
AT=(ip netns exec "$SR_NS_LO" env SOFTRDMA_CONF="$NO_CONF")
sr_run "only lo: softrdma-cfg status" -- "${AT[@]}" "$SR_BUILD_DIR/bin/softrdma-cfg" status
sr_expect "$SR_OUT" '^  rxe0: type roce, netdev lo ' "only lo: the built-in default is rxe0 on lo"
lo_suite "$SR_NS_LO" "only lo" "$NO_CONF"

# ---- lo and an interface with an address ----
AT=(ip netns exec "$SR_NS_A" env SOFTRDMA_CONF="$NO_CONF")
sr_run "with $SR_VETH_A: softrdma-cfg status" -- "${AT[@]}" "$SR_BUILD_DIR/bin/softrdma-cfg" status
sr_expect "$SR_OUT" "^  rxe0: type roce, netdev $SR_VETH_A " "with $SR_VETH_A: the built-in default is rxe0 on it"
sr_expect "$SR_OUT" "gid ::ffff:${SR_IP_A//./\\.}\$" "  its first GID is the interface's address"
sr_expect "$SR_OUT" 'gid ::ffff:127\.0\.0\.1$' "  127.0.0.1 is in its GID table"
sr_expect "$SR_OUT" 'gid ::1$' "  ::1 is in its GID table"
sr_run "with $SR_VETH_A: ibv_devinfo -v" -- "${AT[@]}" "$SR_RUN" ibv_devinfo -v
sr_expect "$SR_OUT" "GID\\[  0\\]:[[:space:]]+::ffff:${SR_IP_A//./\\.}, RoCE v2" "  GID 0 stays the interface's IPv4 address"
lo_suite "$SR_NS_A" "with $SR_VETH_A" "$NO_CONF"

# the device is still reached through the interface's own address
p=$(sr_free_port "$SR_NS_A")
sr_pair --ns "$SR_NS_A" "with $SR_VETH_A: rping over $SR_IP_A" "cm:$p" \
	-- "${AT[@]}" "$SR_RUN" rping -s -a "$SR_IP_A" -p "$p" -C 20 \
	-- "${AT[@]}" "$SR_RUN" rping -c -a "$SR_IP_A" -p "$p" -C 20

# ---- iWARP only, on the interface ----
IW_CONF=$SR_TMP/siw-veth.conf
sr_write_conf "$IW_CONF" "$SR_VETH_A" iwarp
AT=(ip netns exec "$SR_NS_A" env SOFTRDMA_CONF="$IW_CONF" "$SR_RUN")
p=$(sr_free_port "$SR_NS_A")
if sr_pair --ns "$SR_NS_A" "siw0 on $SR_VETH_A: rping over 127.0.0.1" "$p" \
	-- "${ERRTO[@]}" "$SR_TMP/is.err" "${AT[@]}" rping -s -a 127.0.0.1 -p "$p" -v -C 100 \
	-- "${ERRTO[@]}" "$SR_TMP/ic.err" "${AT[@]}" rping -c -a 127.0.0.1 -p "$p" -v -C 100; then
	sr_rping_data_match 100
fi
p=$(sr_free_port "$SR_NS_A")
sr_pair --ns "$SR_NS_A" "siw0 on $SR_VETH_A: rstream -T v over ::1" "$p" \
	-- "${AT[@]}" rstream -b ::1 -p "$p" -T v -S 65536 -C 200 \
	-- "${AT[@]}" rstream -s ::1 -p "$p" -T v -S 65536 -C 200

# ---- loopback = off: the kernel's answer ----
OFF_CONF=$SR_TMP/off.conf
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = %s\nloopback = off\n' "$SR_VETH_A" >"$OFF_CONF"
AT=(ip netns exec "$SR_NS_A" env SOFTRDMA_CONF="$OFF_CONF")
sr_run "loopback = off: softrdma-cfg status" -- "${AT[@]}" "$SR_BUILD_DIR/bin/softrdma-cfg" status
sr_reject "$SR_OUT" 'gid ::ffff:127\.' "  127.0.0.1 is not in the GID table"
if sr_run_fail "loopback = off: rping -s -a 127.0.0.1 fails" -- "${AT[@]}" "$SR_RUN" rping -s -a 127.0.0.1 -C 1; then
	sr_expect "$SR_OUT" 'rdma_bind_addr.*No such device' "  with rdma_bind_addr: ENODEV, as the kernel's rxe"
fi

sr_finish
