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

# UD QPs receive from the peers they send to on their own flow sockets,
# not through softrdmad (issue 14): 500 round trips may cost the daemon
# only the first datagram or two (each side's first, before it has sent).
daemon_rx() {
	"$SR_BUILD_DIR/bin/softrdma-cfg" status 2>/dev/null | sed -n 's/^  received \([0-9]*\).*/\1/p'
}
before=$(daemon_rx)
port=$(sr_free_port)
if sr_pair "ud_pingpong 500 rounds, counting what softrdmad receives" "$port" \
	-- "$SR_RUN" ibv_ud_pingpong -g 0 -n 500 -p "$port" \
	-- "$SR_RUN" ibv_ud_pingpong -g 0 -n 500 -p "$port" 127.0.0.1; then
	after=$(daemon_rx)
	d=$(( ${after:-0} - ${before:-0} ))
	if [ "$d" -lt 20 ]; then
		sr_pass "  softrdmad received $d of the ~1000 datagrams: the rest went straight to the QPs"
	else
		sr_fail "  softrdmad received $d datagrams of ~1000: UD is going through the daemon"
	fi
fi

# Refused before it listens, so no client is needed.
sr_run_fail "ud_pingpong -s 8192 is refused (larger than the port MTU)" \
	-- "$SR_RUN" ibv_ud_pingpong -g 0 -s 8192 -p "$(sr_free_port)" &&
	sr_expect "$SR_OUT" 'larger than port MTU' "  with the program's own message"

sr_finish
