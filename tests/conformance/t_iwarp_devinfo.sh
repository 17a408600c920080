#!/bin/bash
# ibv_devices and ibv_devinfo (Debian's ibverbs-utils) see a configured
# Soft-iWARP device as they see a kernel siw device: listed, transport
# iWARP, port active, Ethernet link layer, no atomics, one SGE per Read;
# and ibv_rc_pingpong, which sets up IB-style (by LID or GID, without a
# connection), is refused with a message, as on siw, not a crash.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_devices ibv_devinfo ibv_rc_pingpong
sr_init iwarp


sr_run "ibv_devices runs" -- "$SR_RUN" ibv_devices &&
	sr_expect "$SR_OUT" '^[[:space:]]+siw0[[:space:]]+[0-9a-f]{16}$' "ibv_devices lists siw0 with a node GUID"

sr_run "ibv_devinfo -v runs" -- "$SR_RUN" ibv_devinfo -v -d siw0
out=$SR_OUT
sr_expect "$out" '^hca_id:[[:space:]]+siw0$' "ibv_devinfo shows hca_id siw0"
sr_expect "$out" 'transport:[[:space:]]+iWARP \(1\)' "transport is iWARP"
sr_expect "$out" 'state:[[:space:]]+PORT_ACTIVE \(4\)' "port 1 is PORT_ACTIVE"
sr_expect "$out" 'link_layer:[[:space:]]+Ethernet' "link_layer is Ethernet (as the kernel reports siw)"
sr_expect "$out" 'atomic_cap:[[:space:]]+ATOMIC_NONE' "no atomics, as siw"
sr_expect "$out" 'max_sge_rd:[[:space:]]+1$' "one SGE per RDMA Read, as siw"

# Both ends of ibv_rc_pingpong (with -g 0, so it gets as far as it can)
# must fail by themselves with a message, never hang or crash.
port=$((20000 + RANDOM % 20000))
sr_new_log "$SR_RUN" ibv_rc_pingpong -d siw0 -g 0 -p "$port"
srv_out=$SR_OUTFILE
timeout -k 5 20 "$SR_RUN" ibv_rc_pingpong -d siw0 -g 0 -p "$port" >"$srv_out" 2>&1 </dev/null &
srv=$!
SR_PIDS+=("$srv")
sleep 0.5
sr_run_fail "ibv_rc_pingpong client on iWARP is refused" -- \
	"$SR_RUN" ibv_rc_pingpong -d siw0 -g 0 -p "$port" 127.0.0.1
sr_expect "$SR_OUT" '(Failed to modify QP|Couldn.t)' "the client says why"
wait "$srv"
rc=$?
case $rc in
0 | 124 | 137 | 134 | 139) sr_fail "ibv_rc_pingpong server on iWARP: $(sr_status_str "$rc"), expected a clean failure"
	sr_dump "$srv_out" ;;
*) sr_pass "ibv_rc_pingpong server on iWARP fails cleanly (exit $rc)" ;;
esac

sr_finish
