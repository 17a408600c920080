#!/bin/bash
# ibv_uc_pingpong: UC SEND/RECV ping-pong, 1 B to 1 MiB, polling and
# event-driven.  lo loses nothing, so UC must deliver every message.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_uc_pingpong
sr_init

for size in 1 4096 65536 1048576; do
	iters=200
	[ "$size" -ge 1048576 ] && iters=20
	for variant in "" "-e"; do
		port=$(sr_free_port)
		# shellcheck disable=SC2206
		args=(-g 0 -c -s "$size" -n "$iters" -p "$port" $variant)
		if sr_pair "uc_pingpong size $size${variant:+ $variant}" "$port" \
			-- "$SR_RUN" ibv_uc_pingpong "${args[@]}" \
			-- "$SR_RUN" ibv_uc_pingpong "${args[@]}" 127.0.0.1; then
			sr_expect "$SR_CLIENT_OUT" "^$((size * iters * 2)) bytes in " "  client exchanged all $iters messages"
			sr_reject "$SR_CLIENT_OUT" 'invalid data' "  client received intact data"
		fi
	done
done

sr_finish
