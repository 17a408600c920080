#!/bin/bash
# ibv_devices and ibv_devinfo (Debian's ibverbs-utils) see the configured
# Soft-RoCE device as they see a kernel rxe device: listed, port active,
# Ethernet link layer, a GID table holding lo's address as a RoCE v2 GID.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_devices ibv_devinfo
sr_init

sr_run "ibv_devices runs" -- "$SR_RUN" ibv_devices &&
	sr_expect "$SR_OUT" '^[[:space:]]+rxe0[[:space:]]+[0-9a-f]{16}$' "ibv_devices lists rxe0 with a node GUID"

sr_run "ibv_devinfo runs" -- "$SR_RUN" ibv_devinfo
out=$SR_OUT
sr_expect "$out" '^hca_id:[[:space:]]+rxe0$' "ibv_devinfo shows hca_id rxe0"
sr_expect "$out" 'state:[[:space:]]+PORT_ACTIVE \(4\)' "port 1 is PORT_ACTIVE"
sr_expect "$out" 'link_layer:[[:space:]]+Ethernet' "link_layer is Ethernet"
sr_expect "$out" 'active_mtu:[[:space:]]+4096 \(5\)' "active_mtu follows lo's MTU (4096)"

sr_run "ibv_devinfo -v -d rxe0 -i 1 runs" -- "$SR_RUN" ibv_devinfo -v -d rxe0 -i 1
out=$SR_OUT
sr_expect "$out" 'GID\[ *0\]:' "ibv_devinfo -v shows GID entries"
sr_expect "$out" 'GID\[ *[0-9]+\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2' \
	"the GID table holds 127.0.0.1 as a RoCE v2 GID"
sr_expect "$out" 'max_qp_wr:[[:space:]]+[1-9]' "device attributes are reported"
sr_expect "$out" 'phys_state:[[:space:]]+LINK_UP' "phys_state is LINK_UP"

# A device that does not exist is an error, as with rdma-core.
sr_run_fail "ibv_devinfo -d with an unknown device fails" \
	-- "$SR_RUN" ibv_devinfo -d sr-no-such-device

sr_finish
