#!/bin/bash
# Open MPI 4.1 (Debian's openmpi-bin) over softrdma: pml ucx with UCX's
# rc_verbs transport (UCX_TLS=rc_v,self: no shared memory, so ranks on one
# host talk through softrdma too).  tests/mpi/mpi_check runs a ping-pong
# (1 B .. 4 MiB, every byte checked both ways), allreduce and alltoall
# with their results checked: 2 and 4 ranks on one host, 2 ranks across
# two network namespaces (orted started in the other namespace by an rsh
# agent, as ssh would on another host).  softrdma's own counters
# (softrdma-cfg statistic) must show the bytes, and UCX's log the lanes.
. "$(dirname "$0")/lib.sh"
sr_need_cmd mpirun
MPI_CHECK=$SR_BUILD_DIR/tests/mpi_check
[ -x "$MPI_CHECK" ] || sr_skip "mpi_check not built (Open MPI headers, libopenmpi-dev, missing at configure time)"
sr_init
CFG=$SR_BUILD_DIR/bin/softrdma-cfg

MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca pml ucx -x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=rxe0:1
	-x UCX_LOG_LEVEL=info)
# The ping-pong alone moves this many payload bytes each way.
PP_BYTES=$(( 20 * (1 + 4 + 16 + 64 + 256 + 1024 + 4096 + 16384 + 65536 + 262144) + 3 * (1048576 + 4194304) ))

# rcvd_bytes of rxe0 in namespace NS ('' = here), from softrdma's counters
# (live processes and those that exited, per network namespace).
rcvd_bytes() {
	sr_in_ns "$1" env SOFTRDMA_CONF="${2:-$SR_CONF}" "$CFG" statistic show link rxe0 2>/dev/null |
		tr ' ' '\n' | sed -n '/^rcvd_bytes$/{n;p}'
}

# counted NS CONF BEFORE MIN DESC: the device's rcvd_bytes grew by MIN or more
counted() {
	local after
	after=$(rcvd_bytes "$1" "$2")
	if [ -n "$after" ] && [ $((after - $3)) -ge "$4" ]; then
		sr_pass "  softrdma's counters: $((after - $3)) bytes received on rxe0 ($5)"
	else
		sr_fail "  softrdma's counters: rcvd_bytes ${3} -> '${after}', expected at least $4 more ($5)"
	fi
}

for np in 2 4; do
	before=$(rcvd_bytes "" "$SR_CONF")
	if sr_run "mpirun -np $np, pml ucx over rc_verbs: ping-pong, allreduce, alltoall" \
		-- "$SR_RUN" "${MPIRUN[@]}" -np "$np" "$MPI_CHECK"; then
		sr_expect "$SR_OUT" "^mpi_check: $np ranks: [0-9]+ checks passed, 0 failed" "  every result checked"
		sr_expect "$SR_OUT" 'ep_cfg\[[0-9]+\]: tag\(rc_verbs/rxe0:1\)' "  UCX: rank-to-rank lanes on rc_verbs/rxe0:1"
		sr_reject "$SR_OUT" 'tag\([^)]*(sysv|posix|cma|tcp)' "  UCX: no shared-memory or TCP lane"
		# both ranks receive the ping-pong's bytes: one direction each
		counted "" "$SR_CONF" "${before:-0}" $((2 * PP_BYTES)) "ping-pong both ways"
	fi
done

# UCX_TLS=rc_verbs alone has no transport to wire RC up with (as on any
# NIC); rc_v names ud_verbs for that.  With sm, ranks on one host use
# shared memory (and rc_verbs to other hosts).
sr_run_fail "UCX_TLS=rc_verbs,self,sm fails as on hardware (no auxiliary transport)" \
	-- "$SR_RUN" mpirun --allow-run-as-root --mca pml ucx -x UCX_TLS=rc_verbs,self,sm -np 2 "$MPI_CHECK" &&
	sr_expect "$SR_OUT" 'no auxiliary transport' "  UCX says why"
sr_run "UCX_TLS=rc_v,self,sm works" \
	-- "$SR_RUN" mpirun --allow-run-as-root --mca pml ucx -x UCX_TLS=rc_v,self,sm -np 2 "$MPI_CHECK" &&
	sr_expect "$SR_OUT" '^mpi_check: 2 ranks: [0-9]+ checks passed, 0 failed' "  every result checked"

# Two hosts: mpirun in namespace A starts the orted of host B through an
# rsh agent that enters namespace B (with B's configuration).
sr_netns_setup
AGENT=$SR_TMP/netns-agent.sh
sr_mpi_agent "$AGENT"
subnet=${SR_IP_A%.*}.0/24
before=$(rcvd_bytes "$SR_NS_B" "$SR_CONF_B")
if sr_run "mpirun -np 2 across two namespaces ($SR_IP_A, $SR_IP_B), pml ucx over rc_verbs" \
	-- "${SR_AT_A[@]}" "${MPIRUN[@]}" -np 2 --host "$SR_IP_A,$SR_IP_B" --mca plm_rsh_agent "$AGENT" \
	--mca oob_tcp_if_include "$subnet" "$MPI_CHECK"; then
	sr_expect "$SR_OUT" '^mpi_check: 2 ranks: [0-9]+ checks passed, 0 failed' "  every result checked"
	sr_expect "$SR_OUT" 'ep_cfg\[[0-9]+\]: tag\(rc_verbs/rxe0:1\)' "  UCX: lanes on rc_verbs/rxe0:1"
	counted "$SR_NS_B" "$SR_CONF_B" "${before:-0}" "$PP_BYTES" "host B received the ping-pong"
fi

sr_finish
