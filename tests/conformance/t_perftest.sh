#!/bin/bash
# perftest without rdma_cm, unmodified Debian binaries: bandwidth and
# latency tests for RDMA WRITE, READ, SEND and atomics, on GID index 0.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat
sr_init

run_once() { # DESC TOOL ARGS...
	local desc tool=$2 port
	desc=$(sr_try_desc "$1")
	shift 2
	port=$(sr_free_port)
	sr_pair "$desc" "$port" -- "$SR_RUN" "$tool" -p "$port" -x 0 "$@" \
		-- "$SR_RUN" "$tool" -p "$port" -x 0 "$@" 127.0.0.1
}
run() { # DESC TOOL ARGS... (again if perftest fails by itself: sr_perftest_tries)
	if sr_perftest_tries run_once "$@"; then
		# the result table: a row starting with the message size
		sr_expect "$SR_CLIENT_OUT" '^ *[0-9]+ +[0-9]+ +[0-9.]+' "  $2 printed its results"
	fi
}

run "ib_write_bw 64 KiB" ib_write_bw -s 65536 -n 2000
run "ib_write_bw all sizes" ib_write_bw -a -n 200
run "ib_read_bw 64 KiB" ib_read_bw -s 65536 -n 1000
run "ib_read_bw 1 MiB, 4 outstanding" ib_read_bw -s 1048576 -n 50 -o 4
run "ib_send_bw 64 KiB" ib_send_bw -s 65536 -n 2000
run "ib_send_bw 4 KiB bidirectional" ib_send_bw -s 4096 -n 2000 -b
run "ib_atomic_bw fetch&add" ib_atomic_bw -n 2000 -A FETCH_AND_ADD
run "ib_atomic_bw compare&swap" ib_atomic_bw -n 2000 -A CMP_AND_SWAP
run "ib_write_lat 64 B" ib_write_lat -s 64 -n 1000
run "ib_read_lat 64 B" ib_read_lat -s 64 -n 1000
run "ib_send_lat 64 B" ib_send_lat -s 64 -n 1000
run "ib_send_lat 8 KiB" ib_send_lat -s 8192 -n 500
sr_finish
