# shellcheck shell=bash
# Shared by the bench scripts (sourced).

# bench_port: a TCP port for one server of a benchmark pair: below the
# kernel's ephemeral range (ip_local_port_range), where the connections of
# whatever else runs on the host take their local ports, and not one that
# is in use now.  A port in that range can be held by another connection
# at any moment, and perftest's server then fails with "Couldn't listen
# to port" and the run's data point goes missing.
bench_port() {
	local lo used p
	lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
	[ -n "$lo" ] && [ "$lo" -gt 12000 ] || lo=32768
	used=" $(ss -Htan 2>/dev/null | awk '{n = split($4, a, ":"); print a[n]}' | tr '\n' ' ') "
	for _ in $(seq 100); do
		p=$((10000 + (RANDOM * 32768 + RANDOM) % (lo - 10000)))
		case $used in *" $p "*) continue ;; esac
		echo "$p"
		return
	done
	echo $((10000 + RANDOM % (lo - 10000)))
}
