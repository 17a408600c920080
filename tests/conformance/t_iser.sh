#!/bin/bash
# iSER over softrdma on one host: Debian's unmodified tgtd, its iSER driver
# on Soft-RoCE and on Soft-iWARP, one file-backed LUN shown as an iSER
# target and as an iSCSI/TCP target; libiscsi's tools over iser:// against
# it: discovery, login, INQUIRY, READ CAPACITY, reads (iscsi-perf), and
# sr-iscsi-io writing a pattern and reading it back, over iSER, across
# transports (written over iSER, read over TCP and the other way) and in
# the LUN's file itself.  tgtd must survive its first I/O (it sends itself
# SIGUSR2; issue 14 item 1) and both of its iSER portals, 0.0.0.0 and
# [::], must listen (RDMA_OPTION_ID_AFONLY; item 2).
. "$(dirname "$0")/lib.sh"
sr_need_storage
sr_init roce

conf_iw=$SR_TMP/iwarp.conf
sr_write_conf "$conf_iw" lo iwarp
conf_roce=$SR_CONF
lun=$SR_TMP/lun.img
truncate -s 64M "$lun"
blocks=131072 # of 512 bytes

# the first 16 bytes of block LBA in the LUN's file: sr-iscsi-io's
# pattern starts with the LBA and the seed
block_head() {
	od -An -t u8 -j $(($1 * 512)) -N 16 "$lun" | tr -s ' ' | sed 's/^ //'
}

for type in roce iwarp; do
	echo "=== $type"
	export SOFTRDMA_CONF=$conf_roce
	[ "$type" = iwarp ] && export SOFTRDMA_CONF=$conf_iw
	tport=$(sr_free_port)
	iport=$(sr_free_port '' 32768)
	sr_tgt_start "$type" "$type" 127.0.0.1 "$tport" "$iport" "$lun" || continue
	tgt_pid=$SR_TGT_PID
	iser=iser://127.0.0.1:$iport/$SR_TGT_IQN_ISER/1
	tcp=iscsi://127.0.0.1:$tport/$SR_TGT_IQN_TCP/1
	io=("$SR_RUN" "$SR_ISCSI_IO" -i "$SR_ISCSI_INI")

	# Debian's iscsi-ls (libiscsi 1.19) takes iscsi:// portals only:
	# discovery goes over TCP and must list the iSER target too
	sr_run "$type: iscsi-ls discovers the targets (SendTargets over TCP)" -- \
		"$SR_RUN" iscsi-ls -i "$SR_ISCSI_INI" "iscsi://127.0.0.1:$tport" &&
		sr_expect "$SR_OUT" "^Target:$SR_TGT_IQN_ISER " "  the iSER target is listed"
	sr_run "$type: iscsi-inq over iSER" -- "$SR_RUN" iscsi-inq -i "$SR_ISCSI_INI" "$iser" &&
		sr_expect "$SR_OUT" '^Peripheral Device Type:DIRECT_ACCESS' "  a direct-access device" &&
		sr_expect "$SR_OUT" '^Product:VIRTUAL-DISK' "  tgt's virtual disk"
	sr_run "$type: iscsi-inq over iSER, unit serial number VPD page" -- \
		"$SR_RUN" iscsi-inq -i "$SR_ISCSI_INI" -e 1 -c 128 "$iser" &&
		sr_expect "$SR_OUT" 'Unit Serial Number:\[ *beaf21\]' "  tgt's serial number of target 2, LUN 1"
	sr_run "$type: iscsi-readcapacity16 over iSER" -- \
		"$SR_RUN" iscsi-readcapacity16 -i "$SR_ISCSI_INI" "$iser" &&
		sr_expect "$SR_OUT" '^Total size:67108864$' "  64 MiB"
	sr_run "$type: iscsi-perf over iSER, 2 s of 8 KiB reads, 16 in flight" -- \
		"$SR_RUN" iscsi-perf -i "$SR_ISCSI_INI" -t 2 -m 16 -b 16 "$iser" &&
		sr_expect "$SR_OUT" 'iops average [1-9][0-9]*' "  reads completed"

	sr_run "$type: sr-iscsi-io writes the whole LUN over iSER (64 KiB commands, 16 in flight), reads it back" -- \
		"${io[@]}" -b 64k -q 16 -s 11 "$iser" &&
		sr_expect "$SR_OUT" "^verify: $blocks blocks match" "  every block holds its pattern"
	sr_run "$type: the same data read over iscsi:// (TCP)" -- "${io[@]}" -m verify -b 256k -s 11 "$tcp" &&
		sr_expect "$SR_OUT" "^verify: $blocks blocks match" "  every block holds its pattern"
	head=$(block_head 77777)
	if [ "$head" = "77777 11" ]; then
		sr_pass "  the LUN's file holds it (block 77777)"
	else
		sr_fail "  block 77777 of the LUN's file starts with '$head', expected '77777 11'"
	fi
	sr_run "$type: 4 KiB commands, 64 in flight, over iSER (first 8 MiB)" -- \
		"${io[@]}" -b 4k -q 64 -n 8M -s 12 "$iser" &&
		sr_expect "$SR_OUT" "^verify: 16384 blocks match" "  every block holds its pattern"
	sr_run "$type: 256 KiB commands (libiscsi's iSER maximum) over iSER" -- \
		"${io[@]}" -b 256k -q 8 -s 13 "$iser" &&
		sr_expect "$SR_OUT" "^verify: $blocks blocks match" "  every block holds its pattern"
	sr_run "$type: written over iscsi:// (TCP)" -- "${io[@]}" -m write -b 64k -s 14 "$tcp"
	sr_run "$type: read back over iSER" -- "${io[@]}" -m verify -b 128k -s 14 "$iser" &&
		sr_expect "$SR_OUT" "^verify: $blocks blocks match" "  every block holds its pattern"
	sr_run_fail "$type: a wrong seed is noticed (the check can fail)" -- "${io[@]}" -m verify -n 1M -s 15 "$iser" &&
		sr_expect "$SR_OUT" 'blocks differ from the pattern' "  mismatch reported"

	if kill -0 "$tgt_pid" 2>/dev/null; then
		sr_pass "$type: tgtd still runs after its I/O (its SIGUSR2 reached its own thread)"
	else
		sr_fail "$type: tgtd died"
		sr_dump "$SR_TGT_LOG" tgtd
	fi
	sr_reject "$SR_TGT_LOG" 'rdma_bind_addr|rdma_listen|rdma_create_id' "$type: tgtd's iSER portals (0.0.0.0 and [::]) listen"
	sr_tgt_stop
done
sr_finish
