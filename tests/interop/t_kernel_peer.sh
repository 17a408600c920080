#!/bin/bash
# softrdma against the Linux kernel's own rxe and siw: Debian's programs,
# unmodified, in both directions between softrdma on this host and the
# kernel in a qemu guest (scripts/kernel-peer/, docs/interop.md).
#
#   KP_SUITE=ci (default) | full   which rows run (full: every size and
#                                  option, the longer transfers)
#   KP_ONLY=ERE                    only the rows whose name matches
#   KP_REPEAT=N                    each row N times (reproducing a hang)
#   KP_SECTIONS="verbs perftest cm crc mtu loss kill wire"   which sections (all)
#
# A row's name says who serves: "kernel serves" is softrdma's client
# against the guest's server, "softrdma serves" the other way round.
. "$(dirname "$0")/../conformance/lib.sh"
. "$SR_SOURCE_DIR/scripts/kernel-peer/lib.sh"
sr_need_cmd ibv_rc_pingpong ib_write_bw rping ucmatose rstream nft tshark
sr_init
kp_setup

KP_SUITE=${KP_SUITE:-ci}
KP_RESULTS=$SR_TMP/results.txt
KP_ROCE_CONF=$SR_TMP/kp-roce.conf
KP_IWARP_CONF=$SR_TMP/kp-iwarp.conf
pp="-p @PORT@ -c" # the pingpongs (-c: check the data)
pt="-p @PORT@"    # perftest

# kp_row TRANSPORT DIR PROG SRVOPTS CLIOPTS [EXPECT]: one pairing.  DIR g:
# the kernel (guest) serves and softrdma is the client; h: the other way.
# In the options @PORT@ is the port, @SELF@ the side's own address and
# @PEER@ the server's.  The device options (-d, -g/-x GID index) are added
# per program.  EXPECT is pass (both sides exit 0) or fail (the client
# fails by itself, neither side hangs).  Each row's result goes to
# KP_RESULTS for the summary.
kp_row() {
	local t=$1 dir=$2 prog=$3 sopt=$4 copt=$5 expect=${6:-pass}
	local sprog=${3%/*} cprog=${3#*/} port hip gip gdev hd="" gd="" cm="" desc who r conf
	local -a host srv cli
	if [ "$t" = roce ]; then
		conf=$KP_ROCE_CONF hip=$KP_IP_H0 gip=$KP_IP_G0 gdev=rxe0
	else
		conf=$KP_IWARP_CONF hip=$KP_IP_H1 gip=$KP_IP_G1 gdev=siw0
	fi
	host=(ip netns exec "$KP_NS_H" env SOFTRDMA_CONF="$conf" "$SR_RUN")
	case $prog in
	ibv_*) hd="-g $KP_GIDX_H" gd="-d $gdev -g $KP_GIDX_G" ;;
	ib_*)
		# RoCE: a QP timeout of 18 (1 s, 7 retries): the peer is emulated,
		# and a loaded host can stall it past perftest's 67 ms x 7 (our
		# client then gives up, where rxe takes 7 retries as infinite)
		gd="-d $gdev"
		[ "$t" = roce ] && hd="-x $KP_GIDX_H -u 18" gd="$gd -x $KP_GIDX_G -u 18"
		;;
	esac
	# How a softrdma server is seen listening: its TCP port for the
	# programs that exchange QP numbers over TCP and on iWARP, softrdmad's
	# rdma_cm table on RoCE.
	case "$prog $sopt" in
	ib_*" -R"* | ib_*" -R") cm=cm: ;;
	ibv_* | ib_*) ;;
	*) cm=cm: ;;
	esac
	[ "$t" = iwarp ] && cm=
	who="kernel serves"
	[ "$dir" = h ] && who="softrdma serves"
	desc=$(echo "$t $prog $sopt | $copt ($who)" |
		sed -E 's/-p @PORT@ ?//g; s/ ?-[abs] @(SELF|PEER)@//g; s/ ?@(SELF|PEER)@//g; s/  +/ /g')
	[ -n "${KP_ONLY:-}" ] && ! [[ $desc =~ $KP_ONLY ]] && return 0
	for ((r = 1; r <= ${KP_REPEAT:-1}; r++)); do
		port=${KP_FIXED_PORT:-$(sr_free_port "$KP_NS_H")}
		if [ "$dir" = g ]; then
			srv=("${KP_GUEST[@]}" "$sprog $gd $(kp_sub "$sopt" "$gip" "$gip")")
			# shellcheck disable=SC2207 # options are words
			cli=("${host[@]}" "$cprog" $hd $(kp_sub "$copt" "$hip" "$gip"))
			kp_pair "$desc" "$expect" "guest:$port" "" srv cli
		else
			# shellcheck disable=SC2207
			srv=("${host[@]}" "$sprog" $hd $(kp_sub "$sopt" "$hip" "$hip"))
			cli=("${KP_GUEST[@]}" "$cprog $gd $(kp_sub "$copt" "$gip" "$hip")")
			kp_pair "$desc" "$expect" "$cm$port${KP_LISTEN_SUFFIX:-}" "$KP_NS_H" srv cli
		fi
	done
}

# kp_sub OPTS SELF PEER: OPTS with @PORT@ (port), @SELF@ and @PEER@ put in.
kp_sub() {
	local o=${1//@PORT@/$port}
	o=${o//@SELF@/$2}
	echo "${o//@PEER@/$3}"
}

# kp_pair DESC EXPECT LISTEN NS SRV-ARRAY-NAME CLI-ARRAY-NAME
kp_pair() {
	local desc=$1 expect=$2 listen=$3 ns=$4 before=$SR_NFAIL rc w spid
	local -n s=$5 c=$6
	if [ "$expect" = pass ]; then
		sr_perftest_tries sr_pair ${ns:+--ns "$ns"} "$desc" "$listen" -- "${s[@]}" -- "${c[@]}"
	else
		echo "--- $desc"
		sr_new_log "${s[@]}"
		SR_SERVER_OUT=$SR_OUTFILE
		timeout -k 5 "$((SR_MAX_TIME + 60))" "${s[@]}" >"$SR_SERVER_OUT" 2>&1 </dev/null &
		spid=$!
		SR_PIDS+=("$spid")
		if sr_wait_listen "$listen" "$spid" "$ns"; then
			sr_run_fail "$desc: the client fails by itself" -- "${c[@]}"
			SR_CLIENT_OUT=$SR_OUT
		else
			sr_fail "$desc: server not listening"
			sr_dump "$SR_SERVER_OUT" server
		fi
		# The server may wait for its client for ever: 10 s, then stop it.
		for ((w = 0; w < 100; w++)); do
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.1
		done
		sr_reap "$spid"
	fi
	rc=pass
	[ "$SR_NFAIL" -gt "$before" ] && rc=FAIL
	grep -q 'HANG' "$SR_CLIENT_OUT" "$SR_SERVER_OUT" 2>/dev/null && rc=HANG
	printf '%s\t%s\n' "$rc" "$desc" >>"$KP_RESULTS"
}

# kp_both TRANSPORT PROG SRVOPTS CLIOPTS [EXPECT]: the row in both directions.
kp_both() {
	kp_row "$1" g "$2" "$3" "$4" "${5:-pass}"
	kp_row "$1" h "$2" "$3" "$4" "${5:-pass}"
}

full() { [ "$KP_SUITE" = full ]; }

# kp_section NAME: the section is to run (KP_SECTIONS), and says so.
kp_section() {
	[ -n "${KP_SECTIONS:-}" ] && [[ " $KP_SECTIONS " != *" $1 "* ]] && return 1
	echo "# ---- section $1"
}

# kp_impair_dropped: what the loss rule in place has dropped so far.
kp_impair_dropped() {
	ip netns exec "$KP_NS_B" nft list table bridge sri_impair 2>/dev/null |
		sed -n 's/.*counter packets \([0-9]*\).*drop.*/\1/p'
}
KP_DROPPED=0

# kp_impair_rules all|data: the bridges drop 2% of the RoCE datagrams and
# TCP segments each way (all), or only of those longer than an ACK (data),
# and put 5% in a slow HTB class (20 Mbit/s) of the egress port, so they
# arrive behind later ones (no netem here).
kp_impair_rules() {
	local only= d
	[ "$1" = data ] && only="meta length > 200"
	d=$(kp_impair_dropped)
	KP_DROPPED=$((KP_DROPPED + ${d:-0}))
	ip netns exec "$KP_NS_B" nft -f - <<NFT || sr_die "nftables cannot set the loss rules"
table bridge sri_impair {
	chain sri_fwd {
		type filter hook forward priority 0; policy accept;
	}
}
flush chain bridge sri_impair sri_fwd
table bridge sri_impair {
	chain sri_fwd {
		meta l4proto { udp, tcp } $only numgen random mod 100 < 2 counter drop
		meta l4proto { udp, tcp } numgen random mod 100 < 5 counter meta priority set 1:20
	}
}
NFT
}

kp_impair_on() {
	local dev
	kp_impair_rules all
	for dev in "$KP_TAP0" "$KP_TAP1" "$KP_VETH_B0" "$KP_VETH_B1"; do
		ip netns exec "$KP_NS_B" tc qdisc add dev "$dev" root handle 1: htb default 10 &&
			ip netns exec "$KP_NS_B" tc class add dev "$dev" parent 1: classid 1:10 htb rate 10gbit &&
			ip netns exec "$KP_NS_B" tc class add dev "$dev" parent 1: classid 1:20 htb rate 20mbit ceil 20mbit ||
			sr_die "tc cannot add the reordering classes on $dev"
	done
	echo "+ $KP_NS_B: 2% loss, 5% delayed (reordered), both ways on both bridges"
}

kp_impair_off() {
	local dev dropped slow=0 n
	dropped=$(kp_impair_dropped)
	dropped=$((KP_DROPPED + ${dropped:-0}))
	for dev in "$KP_TAP0" "$KP_TAP1" "$KP_VETH_B0" "$KP_VETH_B1"; do
		n=$(ip netns exec "$KP_NS_B" tc -s class show dev "$dev" classid 1:20 | sed -n 's/^ Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p')
		slow=$((slow + ${n:-0}))
		ip netns exec "$KP_NS_B" tc qdisc del dev "$dev" root
	done
	ip netns exec "$KP_NS_B" nft delete table bridge sri_impair
	[ "${dropped:-0}" -gt 0 ] && [ "$slow" -gt 0 ] &&
		sr_pass "the bridges dropped $dropped packets and delayed $slow" ||
		sr_fail "the impairment did nothing (dropped ${dropped:-0}, delayed $slow)"
}

# kp_killed TRANSPORT DIR: a long ib_write_bw (RoCE) or ib_send_bw -R
# (iWARP) whose server is killed (SIGKILL) once data moves: the client
# (softrdma's for DIR g, the kernel's for h) must fail by itself, within
# 30 s of the kill.
kp_killed() {
	local t=$1 dir=$2 prog=ib_write_bw r="" port spid cpid rc t0 hd="" gd conf hip gip desc who
	[ "$t" = iwarp ] && prog=ib_send_bw r=-R
	who="kernel server killed"
	[ "$dir" = h ] && who="softrdma server killed"
	desc="$t $prog $r -D 60, $who"
	[ -n "${KP_ONLY:-}" ] && ! [[ $desc =~ $KP_ONLY ]] && return 0
	if [ "$t" = roce ]; then
		conf=$KP_ROCE_CONF hip=$KP_IP_H0 gip=$KP_IP_G0 gd="-d rxe0 -x $KP_GIDX_G" hd="-x $KP_GIDX_H"
	else
		conf=$KP_IWARP_CONF hip=$KP_IP_H1 gip=$KP_IP_G1 gd="-d siw0"
	fi
	local -a host=(ip netns exec "$KP_NS_H" env SOFTRDMA_CONF="$conf" "$SR_RUN")
	port=$(sr_free_port "$KP_NS_H")
	echo "--- $desc"
	sr_new_log server
	SR_SERVER_OUT=$SR_OUTFILE
	if [ "$dir" = g ]; then
		"${KP_GUEST[@]}" "$prog $gd $r -p $port -s 65536 -D 60" >"$SR_SERVER_OUT" 2>&1 &
		spid=$!
		sr_wait_listen "guest:$port" "$spid" || { sr_fail "$desc: server not listening"; sr_reap "$spid"; return; }
		sr_new_log client
		# shellcheck disable=SC2086 # options are words
		"${host[@]}" "$prog" $hd $r -p "$port" -s 65536 -D 60 "$gip" >"$SR_OUTFILE" 2>&1 &
	else
		# shellcheck disable=SC2086
		"${host[@]}" "$prog" $hd $r -p "$port" -s 65536 -D 60 >"$SR_SERVER_OUT" 2>&1 &
		spid=$!
		local l=$port
		[ "$t" = roce ] && [ -n "$r" ] && l=cm:$port
		sr_wait_listen "$l" "$spid" "$KP_NS_H" || { sr_fail "$desc: server not listening"; sr_reap "$spid"; return; }
		sr_new_log client
		"${KP_GUEST[@]}" "$prog $gd $r -p $port -s 65536 -D 60 $hip" >"$SR_OUTFILE" 2>&1 &
	fi
	cpid=$!
	SR_PIDS+=("$spid" "$cpid")
	# data moves: the bandwidth test's header is out and 3 s pass
	sleep 5
	if [ "$dir" = g ]; then
		kp_g "killall -KILL $prog" >/dev/null
	else
		ip netns exec "$KP_NS_H" pkill -KILL -x "$prog"
	fi
	t0=$SECONDS
	sr_watch "$cpid" "$SR_TIMEOUT" "$spid"
	rc=$?
	t0=$((SECONDS - t0))
	sr_reap "$spid"
	sr_forget "$cpid"
	if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$t0" -le 30 ]; then
		sr_pass "$desc: the client failed by itself $t0 s after the kill ($(grep -m1 -iE 'fail|error|status' "$SR_OUTFILE" | cut -c1-80))"
		printf 'pass\t%s\n' "$desc" >>"$KP_RESULTS"
	else
		sr_fail "$desc: client $(sr_status_str "$rc") $t0 s after the kill"
		sr_dump "$SR_OUTFILE" client
		printf 'FAIL\t%s\n' "$desc" >>"$KP_RESULTS"
	fi
}

# kp_wire_check: a capture on both bridges while the kernel and softrdma
# exchange Debian's tools' traffic (RoCE: Send, Write, Read, atomics, CM
# MADs; iWARP: MPA setup, Send, Write, Read): Wireshark decodes RoCE and
# MPA/DDP/RDMAP, finds no malformed frame and no bad CRC.
kp_wire_check() {
	local cap=$SR_TMP/kp-wire.pcapng bad roce mpa crcbad
	[ -n "${KP_ONLY:-}" ] && ! [[ "wire" =~ $KP_ONLY ]] && return 0
	SR_CAPTURE_IFS="$KP_BR0 $KP_BR1" SR_CAPTURE_NS=$KP_NS_B SR_CAPTURE_MAX=900 sr_capture_start "$cap" 'udp port 4791 or tcp' -B 64
	local results=$KP_RESULTS
	KP_RESULTS=/dev/null
	{
		kp_both roce ibv_rc_pingpong "$pp -s 4096 -n 20" "$pp -s 4096 -n 20 @PEER@"
		kp_both roce ib_write_bw "$pt -R -s 8192 -n 20" "$pt -R -s 8192 -n 20 @PEER@"
		kp_both roce ib_read_bw "$pt -s 8192 -n 20" "$pt -s 8192 -n 20 @PEER@"
		kp_both roce ib_atomic_bw "$pt -n 20" "$pt -n 20 @PEER@"
		kp_both iwarp rping "-s -a @SELF@ -p @PORT@ -C 10 -S 5000 -V" "-c -a @PEER@ -p @PORT@ -C 10 -S 5000 -V"
		kp_both iwarp ib_write_bw "$pt -R -s 8192 -n 20" "$pt -R -s 8192 -n 20 @PEER@"
	}
	KP_RESULTS=$results
	sleep 1
	sr_capture_stop
	ts() { tshark -r "$cap" --disable-protocol rpcordma "$@" 2>/dev/null; }
	roce=$(ts -Y infiniband | wc -l)
	mpa=$(ts -Y 'iwarp_mpa' | wc -l)
	bad=$(ts -Y '_ws.malformed' | wc -l)
	crcbad=$(ts -V -Y 'iwarp_mpa.fpdu || infiniband' | grep -cE 'Bad CRC32|\[incorrect|ICRC.*incorrect')
	echo "# capture: $roce RoCE packets, $mpa MPA frames/FPDUs, $bad malformed, $crcbad bad CRCs"
	[ "$roce" -gt 100 ] && [ "$mpa" -gt 50 ] && sr_pass "tshark decodes RoCE ($roce) and iWARP ($mpa) on the bridges" ||
		sr_fail "tshark decoded too little: RoCE $roce, iWARP $mpa"
	if [ "$bad" -eq 0 ] && [ "$crcbad" -eq 0 ]; then
		sr_pass "no malformed frame, no bad CRC"
		printf 'pass\t%s\n' "wire: tshark on the bridges, no malformed frame" >>"$KP_RESULTS"
	else
		sr_fail "$bad malformed frames, $crcbad bad CRCs"
		ts -Y '_ws.malformed' | head -n 10
		printf 'FAIL\t%s\n' "wire: tshark on the bridges, no malformed frame" >>"$KP_RESULTS"
	fi
}

# ---- verbs over RoCE: the pingpongs (QP numbers exchanged over TCP) ----
if kp_section verbs; then
	kp_both roce ibv_rc_pingpong "$pp -n 100 -s 4096" "$pp -n 100 -s 4096 @PEER@"
	kp_both roce ibv_rc_pingpong "$pp -n 100 -s 65536" "$pp -n 100 -s 65536 @PEER@"
	kp_both roce ibv_uc_pingpong "$pp -n 100 -s 4096" "$pp -n 100 -s 4096 @PEER@"
	kp_both roce ibv_ud_pingpong "-p @PORT@ -n 100 -s 1024" "-p @PORT@ -n 100 -s 1024 @PEER@"
	kp_both roce ibv_srq_pingpong "-p @PORT@ -n 100 -s 4096 -q 4" "-p @PORT@ -n 100 -s 4096 -q 4 @PEER@"
	# Path MTU 1024 on one side and 4096 on the other: each side uses its own.
	kp_row roce g ibv_rc_pingpong "$pp -n 100 -s 4096 -m 1024" "$pp -n 100 -s 4096 -m 4096 @PEER@"
	kp_row roce h ibv_rc_pingpong "$pp -n 100 -s 4096 -m 1024" "$pp -n 100 -s 4096 -m 4096 @PEER@"
	full && kp_both roce ibv_rc_pingpong "$pp -s 1048576 -n 20" "$pp -s 1048576 -n 20 @PEER@"
	full && kp_both roce ibv_rc_pingpong "$pp -n 100 -s 4096 -e" "$pp -n 100 -s 4096 -e @PEER@"
fi

# ---- perftest: bandwidth and latency, QP numbers over TCP and over rdma_cm (-R)
if kp_section perftest; then
	for t in roce iwarp; do
		for r in "" -R; do
			[ "$t" = iwarp ] && [ -z "$r" ] && continue # iWARP connects through rdma_cm only
			kp_both $t ib_write_bw "$pt $r -s 65536 -n 200" "$pt $r -s 65536 -n 200 @PEER@"
			kp_both $t ib_send_bw "$pt $r -s 65536 -n 200" "$pt $r -s 65536 -n 200 @PEER@"
			kp_both $t ib_read_bw "$pt $r -s 65536 -n 200" "$pt $r -s 65536 -n 200 @PEER@"
			kp_both $t ib_write_lat "$pt $r -s 64 -n 200 -I 64" "$pt $r -s 64 -n 200 -I 64 @PEER@"
			kp_both $t ib_send_lat "$pt $r -s 64 -n 200" "$pt $r -s 64 -n 200 @PEER@"
			full && kp_both $t ib_read_lat "$pt $r -s 64 -n 200" "$pt $r -s 64 -n 200 @PEER@"
			full && kp_both $t ib_write_bw "$pt $r -s 4096 -n 200 -q 4" "$pt $r -s 4096 -n 200 -q 4 @PEER@"
			full && kp_both $t ib_send_bw "$pt $r -s 1024 -n 200 -I 128" "$pt $r -s 1024 -n 200 -I 128 @PEER@"
		done
	done
	# Atomics (rxe has them; siw has none to offer: not a wire pairing).
	kp_both roce ib_atomic_bw "$pt -n 200" "$pt -n 200 @PEER@"
	kp_both roce ib_atomic_lat "$pt -n 200" "$pt -n 200 @PEER@"
	full && kp_both roce ib_atomic_bw "$pt -R -n 200 -A FETCH_AND_ADD" "$pt -R -n 200 -A FETCH_AND_ADD @PEER@"
	# Multi-QP (inline data: ib_write_lat -I 64 above).
	kp_both roce ib_write_bw "$pt -s 4096 -n 200 -q 4" "$pt -s 4096 -n 200 -q 4 @PEER@"
	kp_both iwarp ib_write_bw "$pt -R -s 4096 -n 200 -q 4" "$pt -R -s 4096 -n 200 -q 4 @PEER@"
fi

# ---- rdma_cm programs and rsockets ----
if kp_section cm; then
	for t in roce iwarp; do
		kp_both $t rping "-s -a @SELF@ -p @PORT@ -C 20 -S 5000 -V" "-c -a @PEER@ -p @PORT@ -C 20 -S 5000 -V"
		kp_both $t ucmatose "-b @SELF@ -p @PORT@ -c 2 -C 20 -S 4096" "-s @PEER@ -p @PORT@ -c 2 -C 20 -S 4096"
		kp_both $t rdma_server/rdma_client "-s @SELF@ -p @PORT@" "-s @PEER@ -p @PORT@"
		kp_both $t rstream "-b @SELF@ -p @PORT@ -S 4096 -C 500" "-s @PEER@ -p @PORT@ -S 4096 -C 500"
		kp_both $t riostream "-b @SELF@ -p @PORT@ -S 4096 -C 200" "-s @PEER@ -p @PORT@ -S 4096 -C 200"
		full && kp_both $t rstream "-b @SELF@ -p @PORT@ -S 65536 -C 100 -T b" "-s @PEER@ -p @PORT@ -S 65536 -C 100 -T b"
	done
	# udaddy has its fixed port, 7174, in the UDP port space.
	KP_FIXED_PORT=7174 KP_LISTEN_SUFFIX=:udp kp_both roce udaddy "-b @SELF@ -c 2 -C 20" "-s @PEER@ -c 2 -C 20"
fi

# ---- CRC off on our side: RoCE has no negotiation (rxe drops every
# packet with a bad ICRC: the client fails, in bounded time); MPA
# negotiates (siw agrees to no CRC and the transfer works).
if kp_section crc; then
	sed 's/^crc = on/crc = off/' "$SR_TMP/kp-roce.conf" >"$SR_TMP/kp-roce-nocrc.conf"
	sed 's/^crc = on/crc = off/' "$SR_TMP/kp-iwarp.conf" >"$SR_TMP/kp-iwarp-nocrc.conf"
	# (Only our client: rxe takes a retry_cnt of 7, the pingpong's, as
	# infinite, so its client would retry for ever.)
	KP_ROCE_CONF=$SR_TMP/kp-roce-nocrc.conf kp_row roce g ibv_rc_pingpong \
		"$pp -s 4096 -n 10" "$pp -s 4096 -n 10 @PEER@" fail
	KP_ROCE_CONF=$SR_TMP/kp-roce-nocrc.conf KP_IWARP_CONF=$SR_TMP/kp-iwarp-nocrc.conf kp_both iwarp rping \
		"-s -a @SELF@ -p @PORT@ -C 20 -S 5000 -V" "-c -a @PEER@ -p @PORT@ -C 20 -S 5000 -V"
	KP_ROCE_CONF=$SR_TMP/kp-roce-nocrc.conf KP_IWARP_CONF=$SR_TMP/kp-iwarp-nocrc.conf kp_both iwarp ib_write_bw \
		"$pt -R -s 65536 -n 100" "$pt -R -s 65536 -n 100 @PEER@"
fi

# ---- MTU 1024 on our side, 4096 on the kernel's (one L2 MTU, 9000):
# the CM's REQ names the path MTU both use.  (rxe's port MTU follows its
# netdev's, so a kernel side at 1024 means a netdev smaller than the link's;
# rxe then drops its own packets above it: a broken link, not tested.)
if kp_section mtu; then
	cat "$SR_TMP/kp-roce.conf" >"$SR_TMP/kp-roce-1024.conf" && echo 'mtu = 1024' >>"$SR_TMP/kp-roce-1024.conf"
	KP_ROCE_CONF=$SR_TMP/kp-roce-1024.conf kp_both roce rping "-s -a @SELF@ -p @PORT@ -C 20 -S 20000 -V" \
		"-c -a @PEER@ -p @PORT@ -C 20 -S 20000 -V"
	KP_ROCE_CONF=$SR_TMP/kp-roce-1024.conf kp_both roce ib_write_bw "$pt -R -s 65536 -n 100" "$pt -R -s 65536 -n 100 @PEER@"
	KP_ROCE_CONF=$SR_TMP/kp-roce-1024.conf kp_both roce ib_read_bw "$pt -R -s 65536 -n 100" "$pt -R -s 65536 -n 100 @PEER@"
fi

# ---- 2% loss and reordering on the bridges, both ways ----
if kp_section loss; then
	kp_impair_on
	kp_both roce ib_write_bw "$pt -s 65536 -n 200" "$pt -s 65536 -n 200 @PEER@"
	kp_both roce ib_read_bw "$pt -R -s 65536 -n 100" "$pt -R -s 65536 -n 100 @PEER@"
	# ibv_rc_pingpong ends without a handshake: a side exits on its last
	# completion, so a lost last ACK leaves its peer retrying into a QP
	# that is gone (any RC peer, the kernel's too).  It checks the data
	# under loss of data packets only.
	kp_impair_rules data
	kp_both roce ibv_rc_pingpong "$pp -n 100 -s 65536" "$pp -n 100 -s 65536 @PEER@"
	kp_impair_rules all
	# (No rping here: its server ends only on the client's DREQ, which the
	# kernel's CM stops resending once the exiting client destroys its id;
	# one lost DREQ leaves any server, the kernel's too, waiting.)
	kp_both iwarp ib_send_bw "$pt -R -s 65536 -n 200" "$pt -R -s 65536 -n 200 @PEER@"
	# (rstream over iWARP under loss: our client once spun in rrecv for
	# ever after the kernel's server had finished; not yet understood.)
	full && kp_both iwarp rstream "-b @SELF@ -p @PORT@ -S 4096 -C 500" "-s @PEER@ -p @PORT@ -S 4096 -C 500"
	kp_both iwarp rping "-s -a @SELF@ -p @PORT@ -C 50 -S 5000 -V" "-c -a @PEER@ -p @PORT@ -C 50 -S 5000 -V"
	kp_impair_off
fi

# ---- a peer killed mid-transfer: the survivor ends with an error, soon.
# (RoCE: only our survivor; rxe's client takes perftest's retry_cnt of 7
# as infinite and retries for ever.)
if kp_section kill; then
	kp_killed roce g
	kp_killed iwarp g
	kp_killed iwarp h
fi

# ---- the wire: tshark on both bridges finds no malformed frame ----
if kp_section wire; then
	kp_wire_check
fi

echo
echo "# ---- results (kernel $KP_KERNEL)"
sort "$KP_RESULTS" | uniq -c | sort -k2 | sed 's/^/# /'
sr_finish
