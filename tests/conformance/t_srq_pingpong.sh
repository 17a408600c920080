#!/bin/bash
# ibv_srq_pingpong: 16 RC QPs sharing one SRQ, polling and event-driven.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_srq_pingpong
sr_init

for size in 1 4096 65536; do
	for variant in "" "-e"; do
		port=$(sr_free_port)
		# shellcheck disable=SC2206
		args=(-g 0 -c -q 16 -s "$size" -n 50 -p "$port" $variant)
		if sr_pair "srq_pingpong 16 QPs size $size${variant:+ $variant}" "$port" \
			-- "$SR_RUN" ibv_srq_pingpong "${args[@]}" \
			-- "$SR_RUN" ibv_srq_pingpong "${args[@]}" 127.0.0.1; then
			sr_expect "$SR_CLIENT_OUT" ' bytes in .* Mbit/sec' "  client completed its exchanges"
			sr_reject "$SR_CLIENT_OUT" 'invalid data' "  client received intact data"
		fi
	done
done

sr_finish
