#!/bin/bash
# ibv_rc_pingpong: RC SEND/RECV ping-pong, 1 B to 1 MiB, polling and
# event-driven (-e), with ibv_post_send and with the ibv_wr_* API
# (--new_send), received data checked (-c).
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_rc_pingpong
sr_init

for size in 1 4096 65536 1048576; do
	iters=200
	[ "$size" -ge 1048576 ] && iters=20
	for variant in "" "-e" "--new_send" "-e --new_send"; do
		port=$(sr_free_port)
		# shellcheck disable=SC2206 # variant is a list of options
		args=(-g 0 -c -s "$size" -n "$iters" -p "$port" $variant)
		if sr_pair "rc_pingpong size $size${variant:+ $variant}" "$port" \
			-- "$SR_RUN" ibv_rc_pingpong "${args[@]}" \
			-- "$SR_RUN" ibv_rc_pingpong "${args[@]}" 127.0.0.1; then
			sr_expect "$SR_CLIENT_OUT" "^$((size * iters * 2)) bytes in " "  client exchanged all $iters messages"
			sr_reject "$SR_CLIENT_OUT" 'invalid data' "  client received intact data"
		fi
	done
done

sr_finish
