#!/bin/bash
# The programs the stress mode runs (scripts/stress.sh, `make test-stress`,
# and in short form conformance/t_under_load): Debian's rping, rstream,
# riostream, perftest and ucmatose through softrdma-run, on Soft-RoCE and
# on Soft-iWARP, each pair under the harness's hang watchdog (lib.sh):
# a pair that stops exchanging packets for SR_TIMEOUT seconds fails with
# every thread's backtrace.
#
# SR_STRESS=full runs rstream's and riostream's whole default suites (64 B
# to 1 MiB, latency then bandwidth: about 220,000 latency-bound transfers
# each); anything else runs bounded counts, for CI.
. "$(dirname "$0")/lib.sh"
sr_need_cmd rping rstream riostream ucmatose ib_write_bw ib_read_bw ib_send_lat
sr_init

full=${SR_STRESS:-short}

# st_verified: neither end of the last pair reported bad data (-T v)
st_verified() {
	sr_reject "$SR_SERVER_OUT" 'verification failed' "  server: data verified" &&
		sr_reject "$SR_CLIENT_OUT" 'verification failed' "  client: data verified"
}

# suite TYPE: every program once on a device of TYPE (roce or iwarp)
suite() {
	local type=$1 conf=$SR_TMP/$1.conf p
	sr_write_conf "$conf" lo "$type"
	export SOFTRDMA_CONF=$conf
	# what the harness waits for before starting a client: rdma_cm listens
	# show in softrdmad's table on RoCE, as TCP listeners on iWARP
	local cm=
	[ "$type" = roce ] && cm=cm:
	lp() { echo "$cm$1"; }

	p=$(sr_free_port)
	if sr_pair "$type: rping -C 500 -v" "$(lp "$p")" \
		-- "${ERRTO[@]}" "$SR_TMP/rs.err" "$SR_RUN" rping -s -a 127.0.0.1 -p "$p" -C 500 -v \
		-- "${ERRTO[@]}" "$SR_TMP/rc.err" "$SR_RUN" rping -c -a 127.0.0.1 -p "$p" -C 500 -v; then
		sr_rping_data_match 500
	fi
	p=$(sr_free_port)
	sr_pair "$type: ucmatose -c 10" "$(lp "$p")" \
		-- "$SR_RUN" ucmatose -p "$p" -c 10 -C 50 -S 4000 \
		-- "$SR_RUN" ucmatose -s 127.0.0.1 -p "$p" -c 10 -C 50 -S 4000
	for t in "ib_write_bw -s 65536 -n 1000" "ib_read_bw -s 65536 -n 500" "ib_send_lat -s 64 -n 2000"; do
		# shellcheck disable=SC2086 # the program and its options
		sr_perftest_tries sr_perftest_once "$type: $t -R" "$cm" $t &&
			sr_expect "$SR_CLIENT_OUT" '^ *[0-9]+ +[0-9]+ ' "  results reported"
	done
	if [ "$full" = full ]; then
		for prog in rstream riostream; do
			p=$(sr_free_port)
			sr_pair "$type: $prog, the default suite (64 B..1 MiB, latency then bandwidth)" "$(lp "$p")" \
				-- "$SR_RUN" "$prog" -p "$p" -- "$SR_RUN" "$prog" -s 127.0.0.1 -p "$p" &&
				sr_expect "$SR_CLIENT_OUT" '^1m_bw ' "  the last test (1m_bw) reported"
		done
	else
		p=$(sr_free_port)
		sr_pair "$type: rstream -T v, 64 KiB x 300" "$(lp "$p")" \
			-- "$SR_RUN" rstream -p "$p" -T v -S 65536 -C 300 \
			-- "$SR_RUN" rstream -s 127.0.0.1 -p "$p" -T v -S 65536 -C 300 && st_verified
		p=$(sr_free_port)
		sr_pair "$type: riostream -T v, 64 B ping-pong x 1000 (both ends poll memory)" "$(lp "$p")" \
			-- "$SR_RUN" riostream -p "$p" -T v -S 64 -C 1 -I 1000 \
			-- "$SR_RUN" riostream -s 127.0.0.1 -p "$p" -T v -S 64 -C 1 -I 1000 && st_verified
		p=$(sr_free_port)
		sr_pair "$type: riostream -T v, 1 MB x 20" "$(lp "$p")" \
			-- "$SR_RUN" riostream -p "$p" -T v -S 1000000 -C 20 \
			-- "$SR_RUN" riostream -s 127.0.0.1 -p "$p" -T v -S 1000000 -C 20 && st_verified
	fi
}

suite roce
suite iwarp
sr_finish
