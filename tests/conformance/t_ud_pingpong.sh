#!/bin/bash
# ibv_ud_pingpong: UD datagrams up to the path MTU payload (lo: 4096),
# polling and event-driven; and a datagram larger than the MTU refused by
# the program itself, as on kernel rxe.
. "$(dirname "$0")/lib.sh"
sr_need_cmd ibv_ud_pingpong
sr_init

for size in 1 1024 2048 4096; do
	for variant in "" "-e"; do
		port=$(sr_free_port)
		# shellcheck disable=SC2206
		args=(-g 0 -c -s "$size" -n 200 -p "$port" $variant)
		if sr_pair "ud_pingpong size $size${variant:+ $variant}" "$port" \
			-- "$SR_RUN" ibv_ud_pingpong "${args[@]}" \
			-- "$SR_RUN" ibv_ud_pingpong "${args[@]}" 127.0.0.1; then
			sr_expect "$SR_CLIENT_OUT" "^$((size * 200 * 2)) bytes in " "  client exchanged all 200 datagrams"
			sr_reject "$SR_CLIENT_OUT" 'invalid data' "  client received intact data"
		fi
	done
done

# Refused before it listens, so no client is needed.
sr_run_fail "ud_pingpong -s 8192 is refused (larger than the port MTU)" \
	-- "$SR_RUN" ibv_ud_pingpong -g 0 -s 8192 -p "$(sr_free_port)" &&
	sr_expect "$SR_OUT" 'larger than port MTU' "  with the program's own message"

sr_finish
