#!/bin/bash
# Ceph over softrdma: Debian's unmodified ceph-mon, ceph-mgr, ceph-osd and
# clients (ceph, rados, python3-rados) on the async+rdma messenger, every
# process under softrdma-run.  One cluster (ceph_lib.sh: 1 mon, 1 mgr,
# 3 OSDs on memstore, auth none, a pool of 3 replicas) per set-up: on
# Soft-RoCE with Ceph's native connection set-up, on Soft-RoCE through
# rdma_cm (ms_async_rdma_cm with ms_async_rdma_type = iwarp, which is how
# Ceph selects its rdma_cm code), on Soft-iWARP, and on two hosts (network
# namespaces: mon and osd.0 on A, osd.1 and osd.2 on B, clients on both).
# Each must reach HEALTH_OK within a bound; `rados put`/`get` of 1 B to
# 16 MiB objects compared byte for byte; `rados bench` write, seq (which
# checks every object it reads) and rand; softrdma's counters show the
# bytes crossed softrdma, and the interfaces' byte counters that nothing
# else (TCP) carried them; no daemon crashed.  On Soft-RoCE through
# rdma_cm an OSD is also killed while a client writes, then restarted:
# every write the cluster acknowledged reads back intact, the cluster is
# HEALTH_OK again.  No RDMA work request may fail (before the kill, where
# there is one): a retry-exceeded on a loopback link is a lost packet never
# recovered.  SR_CEPH_KILL=all kills an OSD in every set-up.
# SR_CEPH_ONLY=REGEX runs only the set-ups whose name matches.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ceph_lib.sh"
ceph_need
sr_need_cmd cmp
sr_init
# ASan's runtime, preloaded with the sanitized libraries into Ceph's C++
# programs, cannot find the real __cxa_throw, and Ceph throws while it
# parses its options: every ceph and rados command aborts there
grep -Eq '^SOFTRDMA_SANITIZE:[A-Z]*=(ON|address|thread)$' "$SR_BUILD_DIR/CMakeCache.txt" 2>/dev/null &&
	sr_skip "a sanitizer build: Ceph's C++ programs abort in ASan's __cxa_throw interceptor"
CFG=$SR_BUILD_DIR/bin/softrdma-cfg
export SOFTRDMA_RUNTIME_DIR=$SR_TMP/run # counters of this test's processes only
mkdir -m 700 "$SOFTRDMA_RUNTIME_DIR"

# ---- the checks -------------------------------------------------------------

# ceph_putget NAME PREFIX-VAR [SIZE...]: rados put and get of objects of
# 1 B to 16 MiB (or of SIZE bytes) through the client prefix named,
# compared byte for byte
ceph_putget() {
	local name=$1 size f
	local -n cli=$2
	shift 2
	local -a sizes=("$@")
	[ $# -gt 0 ] || sizes=(1 4095 65537 1048579 4194304 16777216)
	for size in "${sizes[@]}"; do
		f=$CL/obj-$size
		[ -f "$f" ] || head -c "$size" /dev/urandom >"$f"
		sr_run "$name: rados put $size B" -- "${cli[@]}" rados -c "$CONF" -p p put "o-$size-$2" "$f" &&
			sr_run "  rados get" -- "${cli[@]}" rados -c "$CONF" -p p get "o-$size-$2" "$f.back" &&
			sr_run "  the object read back is the file written" -- cmp "$f" "$f.back"
		MOVED=$((MOVED + 2 * size))
	done
}

# ceph_bench NAME: rados bench write, seq (every object read is checked
# against what was written) and rand, 16 in flight
ceph_bench() {
	local name=$1 mode
	local -a rb=("${CLIENT_AT[@]}" rados -c "$CONF" -p p bench 2)
	for mode in write seq rand; do
		if [ "$mode" = write ]; then
			sr_run "$name: rados bench write, 1 MiB objects, 16 in flight" -- \
				"${rb[@]}" write -b 1M -t 16 --no-cleanup || return
		else
			sr_run "$name: rados bench $mode, 16 in flight" -- "${rb[@]}" "$mode" -t 16 || return
			sr_reject "$SR_OUT" 'is not correct|[Ee]rror|failed' "  no object read differs from what was written"
		fi
		sr_expect "$SR_OUT" '^Bandwidth \(MB/sec\): +[0-9.]*[1-9]' "  it moved data: $(
			sed -n 's/^Bandwidth (MB\/sec): *//p' "$SR_OUT") MB/s"
		MOVED=$((MOVED + $(sed -n 's/^Total \(writes\|reads\) made: *//p' "$SR_OUT") * 1048576))
	done
}

# ceph_writer_start: ceph_io.py write in the background, appending to
# CL/acked until CL/stop exists; ceph_writer_stop ends it and checks it
ceph_writer_start() {
	rm -f "$CL/stop"
	sr_new_log ceph_io.py write
	WOUT=$SR_OUTFILE
	"${CLIENT_AT[@]}" "${CEPH_IO[@]}" write "$CONF" p "$CL/acked" "$CL/stop" 1000 >"$WOUT" 2>&1 </dev/null &
	WPID=$!
	SR_PIDS+=("$WPID")
}

ceph_writer_stop() {
	touch "$CL/stop"
	if sr_watch "$WPID" "$SR_TIMEOUT"; then
		sr_pass "$1: $(grep -v verify_prereq "$WOUT")"
	else
		sr_fail "$1: the writer failed"
		sr_dump "$WOUT" writer
	fi
	sr_forget "$WPID"
}

# acked_after N: waits (up to 10 s) until CL/acked has N more lines
acked_after() {
	local n0 i
	n0=$(wc -l <"$CL/acked" 2>/dev/null || echo 0)
	for i in $(seq 1 100); do
		[ "$(wc -l <"$CL/acked" 2>/dev/null || echo 0)" -ge $((n0 + $1)) ] && break
		sleep 0.1
	done
	wc -l <"$CL/acked"
}

# ceph_kill_osd NAME OSD: a client writes objects; OSD is killed (SIGKILL)
# in the middle, the writes go on to the two OSDs left (min_size 2), the
# OSD is restarted; every object whose write was acknowledged must read
# back intact, the cluster HEALTH_OK again, and take writes again
ceph_kill_osd() {
	local name=$1 osd=$2 n0 n1
	echo "--- $name: osd.$osd killed and restarted mid-write"
	ceph_writer_start
	n0=$(acked_after 20)
	KILLED_AT=$(date -u +%Y-%m-%dT%H:%M:%S.%3N)
	ceph_stop "osd.$osd" KILL
	START=$SECONDS
	sr_run "  osd.$osd killed after $n0 writes: the mon marks it down" -- \
		"${CLIENT_AT[@]}" "${CEPH_IO[@]}" up "$CONF" "$HEALTH_BOUND" 2 && sed -n '$s/^/    /p' "$SR_OUT"
	n1=$(acked_after 10)
	ceph_writer_stop "  the writer went on with osd.$osd down ($n0 writes before the kill, $n1 in all)"
	ceph_daemon "osd.$osd" "OSD_AT_$osd" ceph-osd -i "$osd"
	START=$SECONDS
	ceph_health "  osd.$osd restarted: HEALTH_OK again (recovered)" 17
	ceph_writer_start
	acked_after 10 >/dev/null
	ceph_writer_stop "  writes with every OSD back"
	sr_run "  every acknowledged object reads back intact" -- \
		"${CLIENT_AT[@]}" "${CEPH_IO[@]}" verify "$CONF" p "$CL/acked" && sed -n '$s/^/    /p' "$SR_OUT"
}

# ctr DEVICE FIELD: a device counter of `softrdma-cfg statistic show`,
# summed over the hosts (CTR_HOSTS: a command prefix per namespace, one
# word list each; the counters are kept per network namespace)
ctr() {
	local at c n=0
	for at in "${CTR_HOSTS[@]}"; do
		# shellcheck disable=SC2086 # a prefix of words
		c=$($at "$CFG" statistic show link "$1" | tr ' ' '\n' | sed -n "/^$2\$/{n;p}")
		n=$((n + ${c:-0}))
	done
	echo "$n"
}

# net_bytes: bytes sent on the interfaces the cluster uses (NET_IFS:
# "NS:IFNAME ...", NS empty for ours)
net_bytes() {
	local i n=0 b
	for i in $NET_IFS; do
		b=$(sr_in_ns "${i%%:*}" cat /proc/net/dev | awk -F: -v d="${i#*:}" '$1 ~ "^ *" d "$" { split($2, f, " "); print f[9] }')
		n=$((n + ${b:-0}))
	done
	echo "$n"
}

# ceph_counters NAME DEVICE SENT0 NET0: the bytes the checks moved (MOVED)
# went through softrdma's DEVICE, and the interfaces carried little more
ceph_counters() {
	local name=$1 dev=$2 sent lo ifs
	sent=$(($(ctr "$dev" sent_bytes) - $3))
	lo=$(($(net_bytes) - $4))
	ifs=$(echo "$NET_IFS" | sed 's/[^ ]*://g')
	if [ "$sent" -ge "$MOVED" ]; then
		sr_pass "$name: $dev sent $sent bytes >= the $MOVED bytes the clients wrote and read"
	else
		sr_fail "$name: $dev sent $sent bytes, fewer than the $MOVED bytes the clients wrote and read"
	fi
	# every byte on lo is softrdma's, bar the TCP of connection set-up (and
	# on iWARP the TCP/IP headers of its streams)
	if [ $((lo - lo / 20)) -le "$sent" ]; then
		sr_pass "  $ifs carried $lo bytes: softrdma's, and less than 5% besides"
	else
		sr_fail "  $ifs carried $lo bytes, more than 5% above softrdma's $sent: something else moved the data"
	fi
}

# ceph_logs_clean NAME: no daemon crashed, and no RDMA work request failed
# before an OSD was killed (KILLED_AT, a log time stamp; after it, the
# survivors' QPs to the dead OSD fail, as they must)
ceph_logs_clean() {
	local name=$1
	cat "$CL"/log/*.log "$CL"/log/*.out >"$CL/all.log" 2>/dev/null
	sr_reject "$CL/all.log" 'FAILED ceph_assert|Caught signal' "$name: no daemon crashed"
	awk -v t="${KILLED_AT:-9999}" '$1 ~ /^20[0-9][0-9]-/ && $1 < t' "$CL/all.log" >"$CL/before-kill.log"
	# a flushed work request (WR_FLUSH_ERR) is a connection Ceph closed
	sr_reject "$CL/before-kill.log" 'RETRY_EXC_ERR|Responder ACK timeout|REM_[A-Z_]*_ERR|LOC_[A-Z_]*_ERR' \
		"  no RDMA work request failed${KILLED_AT:+ before the kill}"
}

# ---- the set-ups ------------------------------------------------------------

# run_one_host NAME TYPE DEVICE SIZES KILL CONF-LINE...: the cluster on one
# host (a device on lo); SIZES: the put/get object sizes ("" for all);
# KILL: "kill" to kill an OSD mid-write too (SR_CEPH_KILL=all: everywhere)
run_one_host() {
	local name=$1 type=$2 dev=$3 sizes=$4 kill=$5 sent0 net0
	shift 5
	[[ $name =~ ${SR_CEPH_ONLY:-.} ]] || return 0
	echo "=== $name"
	export SOFTRDMA_CONF=$SR_TMP/$type.conf
	sr_write_conf "$SOFTRDMA_CONF" lo "$type"
	MON_AT=("$SR_RUN") OSD_AT_0=("$SR_RUN") OSD_AT_1=("$SR_RUN") OSD_AT_2=("$SR_RUN") CLIENT_AT=("$SR_RUN")
	CTR_HOSTS=(env) NET_IFS=:lo
	ceph_make "$name" 127.0.0.1 127.0.0.0/8 "ms_type = async+rdma" "ms_async_rdma_device_name = $dev" "$@" || return
	MOVED=0 KILLED_AT=
	sent0=$(ctr "$dev" sent_bytes) net0=$(net_bytes)
	if ceph_start "$name"; then
		# shellcheck disable=SC2086 # a list of sizes
		ceph_putget "$name" CLIENT_AT $sizes
		[ "$kill" = kill ] || [ "${SR_CEPH_KILL:-}" = all ] && ceph_kill_osd "$name" 1
		ceph_bench "$name"
		ceph_counters "$name" "$dev" "$sent0" "$net0"
	fi
	ceph_stop_all
	ceph_logs_clean "$name"
}

# run_two_hosts: the mon and osd.0 on host A, osd.1 and osd.2 on host B
# (network namespaces, a veth between them), clients on both
run_two_hosts() {
	local name=two_hosts sent0 net0
	[[ $name =~ ${SR_CEPH_ONLY:-.} ]] || return 0
	echo "=== $name"
	sr_netns_setup roce
	MON_AT=("${SR_AT_A[@]}") OSD_AT_0=("${SR_AT_A[@]}") OSD_AT_1=("${SR_AT_B[@]}") OSD_AT_2=("${SR_AT_B[@]}")
	CLIENT_AT=("${SR_AT_A[@]}")
	CTR_HOSTS=("ip netns exec $SR_NS_A env SOFTRDMA_CONF=$SR_CONF_A" "ip netns exec $SR_NS_B env SOFTRDMA_CONF=$SR_CONF_B")
	NET_IFS="$SR_NS_A:$SR_VETH_A $SR_NS_B:$SR_VETH_B"
	ceph_make "$name" "$SR_IP_A" "${SR_IP_A%.*}.0/24" "ms_type = async+rdma" "ms_async_rdma_device_name = rxe0" ||
		return
	MOVED=0 KILLED_AT=
	sent0=$(ctr rxe0 sent_bytes) net0=$(net_bytes)
	if ceph_start "$name"; then
		ceph_putget "$name: client on B" SR_AT_B 1 65537 16777216
		ceph_bench "$name: client on A"
		ceph_counters "$name" rxe0 "$sent0" "$net0"
	fi
	ceph_stop_all
	ceph_logs_clean "$name"
}

# the OSD killed where connections are re-made through rdma_cm
run_one_host native roce rxe0 "" -
run_one_host rdma_cm roce rxe0 "1 65537 16777216" kill "ms_async_rdma_cm = true" "ms_async_rdma_type = iwarp"
run_one_host iwarp iwarp siw0 "1 65537 16777216" - "ms_async_rdma_cm = true" "ms_async_rdma_type = iwarp"
run_two_hosts

sr_finish
