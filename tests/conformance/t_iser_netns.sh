#!/bin/bash
# iSER between two hosts: network namespaces joined by a veth pair (MTU
# 1500), Debian's tgtd (--iser) with a file-backed LUN on host B, libiscsi
# initiators on host A, over Soft-RoCE and over Soft-iWARP: discovery over
# TCP, INQUIRY and READ CAPACITY over iser://, iscsi-perf reads, and
# sr-iscsi-io writing the whole LUN over iSER and reading it back over
# iSER and over iscsi:// (TCP) and from the LUN's file on B.
. "$(dirname "$0")/lib.sh"
sr_need_storage
sr_init roce
sr_netns_setup

lun=$SR_TMP/lun.img
truncate -s 64M "$lun"
blocks=131072

for type in roce iwarp; do
	echo "=== $type"
	sr_netns_hosts "$type"
	a=("${HOST_A[@]}")
	b=("${HOST_B[@]}")
	tport=$(sr_free_port "$SR_NS_B")
	iport=$(sr_free_port "$SR_NS_B" 32768)
	sr_tgt_start "$type-b" "$type" "$SR_IP_B" "$tport" "$iport" "$lun" b || continue
	iser=iser://$SR_IP_B:$iport/$SR_TGT_IQN_ISER/1
	tcp=iscsi://$SR_IP_B:$tport/$SR_TGT_IQN_TCP/1
	io=("${a[@]}" "$SR_ISCSI_IO" -i "$SR_ISCSI_INI")

	sr_run "$type: iscsi-ls from A discovers B's targets" -- "${a[@]}" iscsi-ls -i "$SR_ISCSI_INI" "iscsi://$SR_IP_B:$tport" &&
		sr_expect "$SR_OUT" "^Target:$SR_TGT_IQN_ISER " "  the iSER target is listed"
	sr_run "$type: iscsi-inq over iSER, A -> B" -- "${a[@]}" iscsi-inq -i "$SR_ISCSI_INI" "$iser" &&
		sr_expect "$SR_OUT" '^Peripheral Device Type:DIRECT_ACCESS' "  a direct-access device"
	sr_run "$type: iscsi-readcapacity16 over iSER, A -> B" -- "${a[@]}" iscsi-readcapacity16 -i "$SR_ISCSI_INI" "$iser" &&
		sr_expect "$SR_OUT" '^Total size:67108864$' "  64 MiB"
	sr_run "$type: iscsi-perf over iSER, A -> B, 2 s" -- "${a[@]}" iscsi-perf -i "$SR_ISCSI_INI" -t 2 -m 16 -b 128 "$iser" &&
		sr_expect "$SR_OUT" 'iops average [1-9][0-9]*' "  reads completed"
	sr_run "$type: sr-iscsi-io writes the LUN over iSER (64 KiB, 16 in flight), reads it back" -- \
		"${io[@]}" -b 64k -q 16 -s 21 "$iser" &&
		sr_expect "$SR_OUT" "^verify: $blocks blocks match" "  every block holds its pattern"
	sr_run "$type: read back over iscsi:// (TCP), A -> B" -- "${io[@]}" -m verify -b 256k -s 21 "$tcp" &&
		sr_expect "$SR_OUT" "^verify: $blocks blocks match" "  every block holds its pattern"
	head=$(od -An -t u8 -j $((4321 * 512)) -N 16 "$lun" | tr -s ' ' | sed 's/^ //')
	[ "$head" = "4321 21" ] && sr_pass "  B's LUN file holds it (block 4321)" ||
		sr_fail "  block 4321 of B's LUN file starts with '$head', expected '4321 21'"
	if kill -0 "$SR_TGT_PID" 2>/dev/null; then
		sr_pass "$type: tgtd on B still runs"
	else
		sr_fail "$type: tgtd on B died"
		sr_dump "$SR_TGT_LOG" tgtd
	fi
	sr_tgt_stop
done
sr_finish
