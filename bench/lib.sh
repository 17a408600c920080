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

# bench_own_netns SCRIPT ARGS...: as root, re-runs SCRIPT ARGS in a network
# namespace of its own (lo only; ip netns still makes hosts inside it), so
# that its softrdmad and ports are its own; returns when it is there
# already, is not root, or SR_PRIVATE_NETNS=0.  tests/conformance/lib.sh's
# own re-run would drop the script's arguments.
bench_own_netns() {
	if [ "${SR_PRIVATE_NETNS:-1}" = 1 ] && [ -z "${SR_IN_PRIVATE_NETNS:-}" ] && [ "$(id -u)" -eq 0 ] &&
		unshare -n true 2>/dev/null; then
		export SR_IN_PRIVATE_NETNS=1
		# shellcheck disable=SC2016 # expanded by the inner shell
		exec unshare -n -- bash -c 'ip link set lo up && exec bash "$@"' bash "$@"
	fi
}

# bench_start NAME USAGE HEADER [OUTDIR]: the common start of a bench
# script, called at its top level with the script's arguments after its
# own options: --help prints the script's header comment, another option
# is a usage error (USAGE is the line shown); sets `out` to OUTDIR
# (default bench/results/NAME-<timestamp>), made and absolute; as root
# moves the run into a network namespace of its own (bench_own_netns);
# then starts `csv` (HEADER its first line) and `log`, and keeps the load
# average at the start in `load0`, to print beside the results.
# shellcheck disable=SC2154 # here: the calling script's source root
bench_start() {
	local name=$1 usage=$2 header=$3
	shift 3
	case ${1:-} in
	-h | --help)
		sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	-*)
		echo "usage: $usage  (--help)" >&2
		exit 2
		;;
	esac
	export SR_SOURCE_DIR=$here SR_BUILD_DIR=${SR_BUILD_DIR:-$here/build}
	out=${1:-$here/bench/results/$name-$(date +%Y%m%d-%H%M%S)}
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	bench_own_netns "$0" "$out"
	csv=$out/results.csv
	log=$out/log.txt
	echo "$header" >"$csv"
	: >"$log"
	# shellcheck disable=SC2034 # read by the calling script
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
}

# bench_ucx LOG SERVER-AT CLIENT-AT NS ADDR TLS DEVICES TEST SIZE ITERS:
# one ucx_perftest pair, UCX_TLS=TLS and UCX_NET_DEVICES=DEVICES on both
# ends; SERVER-AT and CLIENT-AT name arrays holding each end's command
# prefix (softrdma-run, ip netns exec ...), NS is where the server listens
# ('' = here), ADDR its address.  Both outputs go to LOG; prints the
# client's "Final:" line (iterations, lat 50%, lat avg, lat overall, bw
# avg, bw overall, ...).  Needs tests/conformance/lib.sh (sr_free_port,
# sr_wait_listen).
bench_ucx() {
	local log=$1 ns=$4 addr=$5 tls=$6 dev=$7 t=$8 sz=$9 n=${10} p s o
	local -n bu_sat=$2 bu_cat=$3
	p=$(sr_free_port "$ns")
	UCX_TLS=$tls UCX_NET_DEVICES=$dev timeout -k 5 120 "${bu_sat[@]}" ucx_perftest -p "$p" -t "$t" -s "$sz" \
		-n "$n" >>"$log" 2>&1 </dev/null &
	s=$!
	sr_wait_listen "$p" "$s" "$ns" || echo "ucx_perftest's server did not listen on $p" >>"$log"
	o=$(UCX_TLS=$tls UCX_NET_DEVICES=$dev timeout -k 5 120 "${bu_cat[@]}" ucx_perftest "$addr" -p "$p" -t "$t" \
		-s "$sz" -n "$n" 2>&1 </dev/null)
	wait "$s" 2>/dev/null
	{
		echo "== UCX_TLS=$tls UCX_NET_DEVICES=$dev $t $sz"
		echo "$o"
	} >>"$log"
	echo "$o" | grep '^Final:'
}
