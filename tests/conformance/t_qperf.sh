#!/bin/bash
# Debian's qperf over rdma_cm (-cm1) on Soft-iWARP and Soft-RoCE, in its
# default mode: both ends wait on a completion channel (ibv_get_cq_event)
# instead of polling.  qperf ends a test with an alarm that must interrupt
# that wait (EINTR, as rdma-core returns it); a library that restarts the
# read leaves the client waiting for a reply its server, finished, never
# sends ("failed to receive results: timed out"; issue 14, item 3: seen
# with 32 KiB messages and more on iWARP).  Messages of 32 KiB to 256 KiB,
# one run with polling (-cp1) beside them.
. "$(dirname "$0")/lib.sh"
sr_need_cmd qperf
sr_init iwarp

conf_roce=$SR_TMP/roce.conf
sr_write_conf "$conf_roce" lo roce

for dev in iwarp roce; do
	conf=$SR_CONF
	[ "$dev" = roce ] && conf=$conf_roce
	port=$(sr_free_port)
	sr_new_log qperf-server-$dev
	srv_out=$SR_OUTFILE
	SOFTRDMA_CONF=$conf timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" qperf -lp "$port" >"$srv_out" 2>&1 </dev/null &
	spid=$!
	SR_PIDS+=("$spid")
	if ! sr_wait_listen "$port" "$spid"; then
		sr_fail "$dev: qperf server did not listen on $port"
		sr_dump "$srv_out" server
		continue
	fi
	for m in 32k 64k 256k; do
		sr_run "$dev: qperf -cm1 rc_lat, $m messages, waiting on the completion channel" -- \
			env SOFTRDMA_CONF="$conf" "$SR_RUN" qperf -lp "$port" -cm1 -t 1 -m "$m" 127.0.0.1 rc_lat &&
			sr_expect "$SR_OUT" 'latency += +[0-9.]+ (us|ms)' "  latency reported"
	done
	sr_run "$dev: qperf -cm1 rc_bw, 64k messages, waiting on the completion channel" -- \
		env SOFTRDMA_CONF="$conf" "$SR_RUN" qperf -lp "$port" -cm1 -t 1 -m 64k 127.0.0.1 rc_bw &&
		sr_expect "$SR_OUT" 'bw += +[0-9.]+ [KMG]B/sec' "  bandwidth reported"
	sr_run "$dev: qperf -cm1 -cp1 rc_lat, 64k messages, polling" -- \
		env SOFTRDMA_CONF="$conf" "$SR_RUN" qperf -lp "$port" -cm1 -cp1 -t 1 -m 64k 127.0.0.1 rc_lat &&
		sr_expect "$SR_OUT" 'latency += +[0-9.]+ (us|ms)' "  latency reported"
	sr_reap "$spid"
	sr_reject "$srv_out" 'failed|timed out' "$dev: the qperf server reported no failure"
done
sr_finish
