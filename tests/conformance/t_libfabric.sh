#!/bin/bash
# libfabric (Debian's libfabric-bin 1.17; Debian has no fabtests) on
# softrdma: fi_info lists the device for the verbs provider, and
# fi_pingpong moves data with its integrity check (-c) over verbs
# datagrams, verbs;ofi_rxd (RDM over UD) and, with the device on a
# non-loopback interface, verbs;ofi_rxm (RDM over RC, connected through
# rdma_cm) and verbs FI_EP_MSG; datagrams also between two namespaces.
#
# libfabric's verbs provider offers FI_EP_MSG (and so ofi_rxm) only for
# devices on a non-loopback interface: it skips IFF_LOOPBACK interfaces,
# even when FI_VERBS_IFACE names one.  ofi_rxm's CQ of 128 + 128 * 256
# entries needs max_cqe above rxe's 32767.
#
# ofi_rxm runs with FI_OFI_RXM_USE_SRX=1 (its receive buffers on a shared
# receive queue, softrdma's SRQ): without it, libfabric 1.17's rxm can
# crash in fi_close after a run whose data was all right, on any provider
# (it closes a connection's endpoint and then handles the completions
# still queued for it: ofiwg/libfabric issue 11828, fixed upstream in
# 2.x); about one run in six here.
. "$(dirname "$0")/lib.sh"
sr_need_cmd fi_info fi_pingpong
sr_init

# pingpong SRV CLI DESC NS ADDR PROV EP LAST [ARGS]: fi_pingpong server in
# NS (via the AT prefixes SRV and CLI), client connecting to ADDR; data
# checked (-c); LAST is the largest size, as fi_pingpong prints it.
pingpong() {
	local -n at_srv=$1 at_cli=$2
	local desc=$3 ns=$4 addr=$5 prov=$6 ep=$7 last=$8 port
	shift 8
	local -a env=(env)
	[[ $prov == *ofi_rxm* ]] && env+=(FI_OFI_RXM_USE_SRX=1)
	port=$(sr_free_port "$ns")
	if sr_pair ${ns:+--ns "$ns"} "$desc: fi_pingpong -p '$prov' -e $ep -c" "$port" \
		-- "${at_srv[@]}" "${env[@]}" fi_pingpong -p "$prov" -e "$ep" -c -B "$port" "$@" \
		-- "${at_cli[@]}" "${env[@]}" fi_pingpong -p "$prov" -e "$ep" -c -P "$port" "$@" "$addr"; then
		sr_expect "$SR_CLIENT_OUT" "^$last +[0-9]+ += *[0-9]+ " "  every size up to $last exchanged and checked"
		sr_reject "$SR_CLIENT_OUT" '[Ee]rror|invalid|corrupt' "  no errors (client)"
		sr_reject "$SR_SERVER_OUT" '[Ee]rror|invalid|corrupt' "  no errors (server)"
	fi
}

# shellcheck disable=SC2034 # used through namerefs
HERE=("$SR_RUN")
if sr_run "fi_info -p verbs on lo" -- "$SR_RUN" fi_info -p verbs; then
	sr_expect "$SR_OUT" 'domain: rxe0-dgram' "  rxe0's datagram domain"
	sr_expect "$SR_OUT" 'type: FI_EP_DGRAM' "  FI_EP_DGRAM"
	sr_expect "$SR_OUT" 'provider: verbs;ofi_rxd' "  verbs;ofi_rxd (RDM over UD) on top"
fi
pingpong HERE HERE "lo" "" 127.0.0.1 verbs dgram 4k -I 30 -S 4096
pingpong HERE HERE "lo" "" 127.0.0.1 "verbs;ofi_rxd" rdm 1m -I 20

sr_netns_setup
if sr_run "fi_info -p verbs on a veth" -- "${SR_AT_A[@]}" fi_info -p verbs -v; then
	sr_expect "$SR_OUT" 'type: FI_EP_MSG' "  FI_EP_MSG (RC through rdma_cm)"
	sr_expect "$SR_OUT" 'name: rxe0$' "  rxe0"
fi
# Without a node, the provider binds "localhost" to probe: the device
# answers on 127.0.0.1 too (loopback = on, the default with no device on
# lo), so that is the source address it offers.
if sr_run "fi_info -p 'verbs;ofi_rxm' (no address given)" -- "${SR_AT_A[@]}" fi_info -p "verbs;ofi_rxm" -v; then
	sr_expect "$SR_OUT" 'type: FI_EP_RDM' "  FI_EP_RDM"
	sr_expect "$SR_OUT" 'name: rxe0$' "  on rxe0"
fi
pingpong SR_AT_A SR_AT_A "one namespace" "$SR_NS_A" "$SR_IP_A" "verbs;ofi_rxm" rdm 1m -I 20
pingpong SR_AT_A SR_AT_A "one namespace" "$SR_NS_A" "$SR_IP_A" verbs msg 1m -I 20
# fi_pingpong's server offers the address it got for "localhost", so
# across hosts only the datagram providers, whose addresses are the
# device's GID and QPN, work with it (on the kernel's rxe too).
pingpong SR_AT_B SR_AT_A "two namespaces" "$SR_NS_B" "$SR_IP_B" "verbs;ofi_rxd" rdm 1m -I 20

sr_finish
