#!/bin/bash
# Many processes on one device at once: RoCEv2 has one UDP port (4791) per
# host, so every process's traffic shares it.  Runs four ibv_rc_pingpong
# pairs, two ibv_ud_pingpong pairs (UD goes through softrdmad) and an
# ib_write_bw pair concurrently; all must complete with verified data.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_rc_pingpong ibv_ud_pingpong ib_write_bw
sr_init

pids=()
names=()
start_pair() { # NAME TOOL ARGS...
	local name=$1 tool=$2 port
	shift 2
	port=$(sr_free_port)
	(
		timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" "$tool" -p "$port" "$@" >"$SR_TMP/$name.srv" 2>&1 &
		s=$!
		sr_wait_listen "$port" "$s" || exit 3
		timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" "$tool" -p "$port" "$@" 127.0.0.1 >"$SR_TMP/$name.cli" 2>&1
		c=$?
		wait "$s"
		sv=$?
		exit $((c != 0 || sv != 0))
	) &
	pids+=($!)
	names+=("$name")
}

for i in 1 2 3 4; do
	start_pair "rc$i" ibv_rc_pingpong -g 0 -c -s $((1000 * i + 17)) -n 300
done
for i in 1 2; do
	start_pair "ud$i" ibv_ud_pingpong -g 0 -c -s 1024 -n 300
done
start_pair "write_bw" ib_write_bw -x 0 -s 65536 -n 2000

for k in "${!pids[@]}"; do
	if wait "${pids[$k]}"; then
		sr_pass "${names[$k]} completed alongside the others"
	else
		sr_fail "${names[$k]} failed"
		tail -5 "$SR_TMP/${names[$k]}.srv" "$SR_TMP/${names[$k]}.cli"
	fi
done
for i in 1 2 3 4; do
	sr_reject "$SR_TMP/rc$i.cli" 'invalid data|Failed' "rc$i data intact"
done
sr_finish
