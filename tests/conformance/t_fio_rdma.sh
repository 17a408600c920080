#!/bin/bash
# Debian's fio, its rdma ioengine (rdma_cm connection, then I/O) in every
# mode: RDMA WRITE and RDMA READ (memory semantics: the client moves data
# to and from the server's registered buffers) and SEND/RECV (channel
# semantics), on Soft-RoCE and on Soft-iWARP, between two processes on one
# host and between two hosts (network namespaces joined by a veth pair).
# fio exits 0 even when its job failed, so each run is judged by its
# output: the client issued every I/O and both jobs report err= 0.
#
# SEND/RECV has no flow control in fio: both ends connect with
# rnr_retry_count 0, so a SEND that finds no receive posted fails at once
# (RNR_RETRY_EXC_ERR on RoCE, a Terminate on iWARP), as it would on an
# RNIC; the server reposts a receive only when its job thread has run.
# With equal queue depths on a loaded two-core machine that races (15
# received messages waiting in the server's CQ, its thread not yet
# scheduled), so the SEND runs give the server 128 receives and hold the
# client to 10 MB/s: 800 ms of slack.
# (Debian's fio 3.33 has no libiscsi engine: fio cannot drive the iSER
# LUN; sr-iscsi-io and iscsi-perf do, in t_iser.)
. "$(dirname "$0")/lib.sh"
sr_need_cmd fio
fio --enghelp 2>/dev/null | grep -qx '[[:space:]]*rdma' || sr_skip "this fio has no rdma ioengine"
sr_init roce

bs=64k

# fio_pair DESC VERB SERVER-ADDR LISTEN NS -- SERVER-PREFIX... -- CLIENT-PREFIX...
fio_pair() {
	local desc=$1 verb=$2 addr=$3 listen=$4 ns=$5 port=${4##*:}
	shift 5
	[ "$1" = -- ] && shift
	local -a srv=() cli=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		srv+=("$1")
		shift
	done
	shift
	cli=("$@")
	local size=64m nios=1024 sdepth=16 cdepth=16
	local -a rate=()
	if [ "$verb" = send ]; then
		size=16m nios=256 sdepth=128 cdepth=8 rate=(--rate=10m)
	fi
	sr_pair ${ns:+--ns "$ns"} "$desc" "$listen" -- \
		"${srv[@]}" fio --name=server --ioengine=rdma --port="$port" --rw=read --bs=$bs --size=$size \
		--iodepth=$sdepth -- \
		"${cli[@]}" fio --name=client --ioengine=rdma --hostname="$addr" --port="$port" --verb="$verb" \
		--rw=write --bs=$bs --size=$size --iodepth=$cdepth "${rate[@]}" || return 1
	sr_expect "$SR_CLIENT_OUT" "issued rwts: total=0,$nios,0,0" "  the client issued all $nios I/Os of $bs" &&
		sr_expect "$SR_CLIENT_OUT" 'client: \(groupid=0, jobs=1\): err= 0' "  the client's job reports no error" &&
		sr_reject "$SR_CLIENT_OUT" '^fio: ' "  the client printed no fio error" &&
		sr_expect "$SR_SERVER_OUT" 'server: \(groupid=0, jobs=1\): err= 0' "  the server's job reports no error"
	sed -n 's/^ *WRITE: bw=\([^,]*\),.*/    client: \1/p' "$SR_CLIENT_OUT"
}

for type in roce iwarp; do
	conf=$SR_TMP/$type.conf
	sr_write_conf "$conf" lo "$type"
	at=(env SOFTRDMA_CONF="$conf" "$SR_RUN")
	for verb in write read send; do
		port=$(sr_free_port)
		listen=$port
		[ "$type" = roce ] && listen=cm:$port
		fio_pair "$type, one host: fio rdma --verb=$verb" "$verb" 127.0.0.1 "$listen" '' -- "${at[@]}" -- "${at[@]}"
	done
done

if [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1; then
	sr_netns_setup
	for type in roce iwarp; do
		sr_netns_hosts "$type"
		a=("${HOST_A[@]}")
		b=("${HOST_B[@]}")
		for verb in write read send; do
			port=$(sr_free_port "$SR_NS_B")
			listen=$port
			[ "$type" = roce ] && listen=cm:$port
			fio_pair "$type, two hosts: fio rdma --verb=$verb, server on B" "$verb" "$SR_IP_B" "$listen" "$SR_NS_B" \
				-- "${b[@]}" -- "${a[@]}"
		done
	done
else
	echo "# two hosts skipped: network namespaces need root"
fi
sr_finish
