# shellcheck shell=bash
# Shared code of the conformance tests (tests/conformance/t_*.sh).
#
# Each test runs Debian's unmodified RDMA programs through softrdma-run
# against a private configuration holding one device on lo (Soft-RoCE rxe0,
# or Soft-iWARP siw0 for `sr_init iwarp`), so the result does not depend on
# the configuration of the machine or user.
# Exit status follows CTest's convention: 0 pass, 1 fail, 77 skip.
#
# Every command is run under `timeout`, its output kept in a file, and
# both are printed when a check on it fails; a passing check prints one
# line.  A test keeps going after a failed check, so that one run shows
# every problem, and exits 1 at the end (sr_finish).
#
# CTest sets SR_BUILD_DIR and SR_SOURCE_DIR; run by hand, they default to
# build/ in the source tree.  SR_KEEP_TMP=1 keeps the temporary directory
# for a post-mortem.
#
# Hangs.  Run as root, each test re-executes itself in a network namespace
# of its own (lo only; SR_PRIVATE_NETNS=0 turns that off): no other
# softrdmad or program shares its ports, and the packets on its interfaces
# are its own.  A command is hung when no packet has moved for SR_TIMEOUT
# seconds (default 60) while it runs, or when it runs longer than
# SR_MAX_TIME (default 300): then every thread of every process of it (and
# of its server) is printed with gdb, and it is killed.  A slow command
# that keeps exchanging packets (riostream's default suite on a loaded
# machine) is not hung.  Outside a namespace of its own (not root) the
# packet counters are the host's, and SR_TIMEOUT bounds each command's
# running time instead.

SR_SOURCE_DIR=${SR_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SR_BUILD_DIR=${SR_BUILD_DIR:-$SR_SOURCE_DIR/build}
SR_RUN=$SR_BUILD_DIR/bin/softrdma-run
SR_TIMEOUT=${SR_TIMEOUT:-60}
SR_MAX_TIME=${SR_MAX_TIME:-300}
SR_PROGRESS=0      # packet counters tell progress (set by sr_init)
SR_TEST=$(basename "$0" .sh)

SR_TMP=
SR_NCMD=0          # commands run so far; names their log files
SR_NPASS=0
SR_NFAIL=0
SR_PIDS=()         # background processes still to reap or kill
SR_NETNS_LIST=     # network namespaces the test made (sr_netns_add)
SR_CLEANUPS=()     # commands run at exit, last registered first

sr_skip() {
	echo "SKIP: $SR_TEST: $*"
	exit 77
}

# A broken test setup, not a finding about softrdma: stop here.
sr_die() {
	echo "ERROR: $SR_TEST: $*"
	exit 1
}

sr_pass() {
	SR_NPASS=$((SR_NPASS + 1))
	echo "ok: $*"
}

sr_fail() {
	SR_NFAIL=$((SR_NFAIL + 1))
	echo "FAIL: $*"
}

sr_need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 ||
			sr_skip "$c is not installed (scripts/install-deps.sh installs it)"
	done
}

# sr_write_conf FILE NETDEV [TYPE]: one device on NETDEV: Soft-RoCE rxe0,
# or with TYPE iwarp Soft-iWARP siw0.
sr_write_conf() {
	local name=rxe0 type=${3:-roce}
	[ "$type" = iwarp ] && name=siw0
	cat >"$1" <<EOF
crc = on
[$name]
type = $type
netdev = $2
EOF
}

sr_cleanup() {
	local rc=$? pid i
	trap - EXIT INT TERM
	for pid in "${SR_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${SR_PIDS[@]}"; do
		for i in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	for ((i = ${#SR_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${SR_CLEANUPS[i]}"
	done
	if [ -n "$SR_TMP" ]; then
		if [ "${SR_KEEP_TMP:-0}" = 1 ]; then
			echo "logs kept in $SR_TMP"
		else
			rm -rf "$SR_TMP"
		fi
	fi
	exit "$rc"
}

# sr_on_exit 'COMMAND': run COMMAND (a shell string) when the test exits.
sr_on_exit() {
	SR_CLEANUPS+=("$1")
}

# Call first: checks the build, makes the temporary directory and the
# private configuration (exported as SOFTRDMA_CONF; TYPE roce, the
# default, or iwarp), installs the traps.
sr_init() {
	local type=${1:-roce}
	[ -x "$SR_RUN" ] || sr_die "$SR_RUN not found: build softrdma first (or set SR_BUILD_DIR)"
	sr_need_cmd timeout
	if [ "${SR_PRIVATE_NETNS:-1}" = 1 ] && [ -z "${SR_IN_PRIVATE_NETNS:-}" ] && [ "$(id -u)" -eq 0 ] &&
		unshare -n true 2>/dev/null; then
		export SR_IN_PRIVATE_NETNS=1
		# shellcheck disable=SC2016 # expanded by the inner shell
		exec unshare -n -- bash -c 'ip link set lo up && exec bash "$0"' "$0"
	fi
	SR_PROGRESS=0
	[ -n "${SR_IN_PRIVATE_NETNS:-}" ] && SR_PROGRESS=1
	SR_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sr-$SR_TEST.XXXXXX") || sr_die "mktemp failed"
	trap sr_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	SR_CONF=$SR_TMP/softrdma.conf
	sr_write_conf "$SR_CONF" lo "$type"
	export SOFTRDMA_CONF=$SR_CONF
	echo "# $SR_TEST: build $SR_BUILD_DIR, config $SR_CONF ($(sed -n 's/^\[\(.*\)\]$/\1/p' "$SR_CONF") on lo)$(
		[ "$SR_PROGRESS" = 1 ] && echo ", own network namespace")"
}

sr_finish() {
	echo "# $SR_TEST: $SR_NPASS passed, $SR_NFAIL failed"
	[ "$SR_NFAIL" -eq 0 ] && exit 0
	exit 1
}

# ---- running commands --------------------------------------------------

# Allocates the log files of the next command: sets SR_CMDFILE and
# SR_OUTFILE and records the command line.
sr_new_log() {
	SR_NCMD=$((SR_NCMD + 1))
	SR_CMDFILE=$SR_TMP/$SR_NCMD.cmd
	SR_OUTFILE=$SR_TMP/$SR_NCMD.out
	printf '%q ' "$@" >"$SR_CMDFILE"
	echo >>"$SR_CMDFILE"
	: >"$SR_OUTFILE"
	echo "+ $(cat "$SR_CMDFILE")"
}

# sr_dump OUTFILE [LABEL]: prints the command and output kept for OUTFILE.
sr_dump() {
	local out=$1 cmd=${1%.out}.cmd label=${2:-}
	echo "    ----- ${label:+$label: }command:"
	sed 's/^/    /' "$cmd"
	echo "    ----- ${label:+$label }output ($(wc -l <"$out") lines, last 200 shown):"
	tail -n 200 "$out" | sed 's/^/    | /'
}

# Describes an exit status of a command run under timeout.
sr_status_str() {
	case $1 in
	0) echo "exit 0" ;;
	124) echo "hung (no packet for ${SR_TIMEOUT}s, or over ${SR_MAX_TIME}s; threads above)" ;;
	137) echo "killed (SIGKILL)" ;;
	143) echo "terminated (SIGTERM)" ;;
	*) echo "exit $1" ;;
	esac
}

# ---- the hang watchdog ---------------------------------------------------

# Packets received on the interfaces of the test's namespaces: its own and
# those it made (SR_NETNS_LIST).
sr_packets() {
	local ns
	{
		cat /proc/net/dev
		for ns in $SR_NETNS_LIST; do
			ip netns exec "$ns" cat /proc/net/dev
		done
	} 2>/dev/null | awk -F: 'NF == 2 { split($2, f, " "); n += f[2] } END { print n + 0 }'
}

# PIDs and all their descendants.
sr_ptree() {
	local p
	for p in "$@"; do
		echo "$p"
		# shellcheck disable=SC2046 # one pid per word
		sr_ptree $(pgrep -P "$p" 2>/dev/null)
	done
}

# Prints every thread's backtrace of every process under PIDS (wrappers
# such as timeout, env and the shells skipped).
sr_backtraces() {
	local p comm
	for p in $(sr_ptree "$@"); do
		if ! comm=$(cat "/proc/$p/comm" 2>/dev/null); then
			echo "    ----- process $p: gone"
			continue
		fi
		case $comm in timeout | env | bash | sh | ip | softrdma-run | kp-guest) continue ;; esac
		echo "    ----- every thread of $p [$(sed -n "s/^State:[[:space:]]*//p" "/proc/$p/status" 2>/dev/null)]:" \
			"$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
		if command -v gdb >/dev/null 2>&1; then
			timeout 120 gdb -batch -nx -p "$p" -ex 'set pagination off' -ex 'thread apply all bt' </dev/null \
				>"$SR_TMP/gdb.out" 2>&1
			grep -E '^(Thread|#)' "$SR_TMP/gdb.out" | sed 's/^/    | /'
			grep -qE '^Thread' "$SR_TMP/gdb.out" ||
				{ echo "    | gdb printed no thread:" && tail -n 5 "$SR_TMP/gdb.out" | sed 's/^/    | /'; }
		else
			echo "    | (gdb is not installed: scripts/install-deps.sh installs it)"
		fi
	done
}

# sr_watch PID STALL [PID...]: waits for PID (a child of this shell) and
# returns its exit status.  If no packet moves in the test's namespaces
# for STALL seconds meanwhile (or, without a namespace of our own, STALL
# seconds pass), or PID runs over SR_MAX_TIME, prints the backtraces of
# PID's processes and of the other PIDs', kills PID and returns 124.
sr_watch() {
	local pid=$1 stall=$2 start=$SECONDS last=$SECONDS prev cur naps=0
	shift 2
	prev=$(sr_packets)
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$naps" -lt 20 ]; then
			sleep 0.05 # most commands are quick
		else
			sleep 0.5
		fi
		naps=$((naps + 1))
		if [ "$SR_PROGRESS" = 1 ]; then
			cur=$(sr_packets)
			[ "$cur" != "$prev" ] && prev=$cur && last=$SECONDS
		fi
		if [ $((SECONDS - last)) -ge "$stall" ] || [ $((SECONDS - start)) -ge "$SR_MAX_TIME" ]; then
			echo "    ----- HANG: $(tr "\\0" " " <"/proc/$pid/cmdline" 2>/dev/null)"
			if [ $((SECONDS - last)) -ge "$stall" ]; then
				echo "    ----- no packet for $((SECONDS - last)) s (the limit is $stall s), running for $((SECONDS - start)) s"
			else
				echo "    ----- over SR_MAX_TIME ($SR_MAX_TIME s) with packets still moving (the last $((SECONDS - last)) s ago)"
			fi
			sr_backtraces "$pid" "$@"
			# shellcheck disable=SC2046 # one pid per word
			kill -TERM $(sr_ptree "$pid") 2>/dev/null
			# a moment to report on the way out (kp-guest prints the guest's state)
			for ((naps = 0; naps < 100; naps++)); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			# shellcheck disable=SC2046
			kill -KILL $(sr_ptree "$pid") 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
	done
	wait "$pid"
}

# sr_exec OUTFILE CMD...: runs CMD with its output in OUTFILE, under the
# watchdog.  Returns its exit status, 124 if it hung.
sr_exec() {
	local out=$1
	shift
	"$@" >"$out" 2>&1 </dev/null &
	sr_watch $! "$SR_TIMEOUT"
}

# sr_run DESC -- CMD...: runs CMD under the watchdog; passes if it exits 0.
# Sets SR_OUT to its output file for further checks (sr_expect).
sr_run() {
	local desc=$1 rc
	shift
	[ "$1" = -- ] && shift
	sr_new_log "$@"
	SR_OUT=$SR_OUTFILE
	sr_exec "$SR_OUT" "$@"
	rc=$?
	if [ "$rc" -eq 0 ]; then
		sr_pass "$desc"
		return 0
	fi
	sr_fail "$desc: $(sr_status_str "$rc")"
	sr_dump "$SR_OUT"
	return 1
}

# sr_run_fail DESC -- CMD...: passes if CMD fails by itself (an exit
# status other than 0 and other than the timeout's).
sr_run_fail() {
	local desc=$1 rc
	shift
	[ "$1" = -- ] && shift
	sr_new_log "$@"
	SR_OUT=$SR_OUTFILE
	sr_exec "$SR_OUT" "$@"
	rc=$?
	case $rc in
	0 | 124 | 137)
		sr_fail "$desc: $(sr_status_str "$rc"), expected a failure"
		sr_dump "$SR_OUT"
		return 1
		;;
	esac
	sr_pass "$desc"
	return 0
}

# sr_expect OUTFILE ERE DESC: passes if the output matches ERE.
sr_expect() {
	if grep -Eq -- "$2" "$1"; then
		sr_pass "$3"
		return 0
	fi
	sr_fail "$3: no line matches /$2/"
	sr_dump "$1"
	return 1
}

# sr_reject OUTFILE ERE DESC: passes if no line of the output matches ERE.
sr_reject() {
	local rc=0

	grep -Eq -- "$2" "$1" || rc=$?
	if [ "$rc" -eq 1 ]; then
		sr_pass "$3"
		return 0
	fi
	if [ "$rc" -ne 0 ]; then
		sr_fail "$3: cannot read $1"
		return 1
	fi
	sr_fail "$3: output matches /$2/"
	grep -En -- "$2" "$1" | head -n 5 | sed 's/^/    >> /'
	sr_dump "$1"
	return 1
}

# ---- TCP ports -----------------------------------------------------------

# Runs "$@" inside network namespace NS, or here if NS is empty.
sr_in_ns() {
	local ns=$1
	shift
	if [ -n "$ns" ]; then
		ip netns exec "$ns" "$@"
	else
		"$@"
	fi
}

# The TCP ports in use (any state) in namespace NS ('' = ours), one a line,
# from /proc, which answers for the namespace of the reader.
sr_tcp_ports() {
	local hex
	sr_in_ns "$1" cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk '$2 ~ /:/ { sub(/.*:/, "", $2); print $2 }' |
		while read -r hex; do
			echo $((16#$hex))
		done
}

# sr_free_port [NS [BELOW]]: a TCP port nobody uses in NS, chosen at
# random so that concurrent tests rarely race for the same one; below
# BELOW if given (tgt keeps its iSER port in a signed short: < 32768).
# shellcheck disable=SC2120 # NS is optional
sr_free_port() {
	local ns=${1:-} below=${2:-60000} used p i
	used=" $(sr_tcp_ports "$ns" | tr '\n' ' ') "
	for i in $(seq 1 200); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % (below - 20000)))
		case $used in
		*" $p "*) continue ;;
		esac
		echo "$p"
		return 0
	done
	sr_die "no free TCP port found"
}

# sr_port_listening PORT [NS]: PORT is a TCP port, or cm:PORT[:PS] for an
# rdma_cm listener on that port in port space PS (tcp, the default, udp
# or ib), as the namespace's softrdmad lists them, or udp:PORT for a bound
# UDP socket (a datagram rsocket's server), or guest:PORT for a TCP or
# rdma_cm listener in the kernel-peer guest (scripts/kernel-peer/lib.sh).
sr_port_listening() {
	local hex
	case $1 in
	guest:*)
		kp_guest_listening "${1#guest:}"
		return
		;;
	udp:*)
		hex=$(printf '%04X' "${1#udp:}")
		sr_in_ns "${2:-}" cat /proc/net/udp /proc/net/udp6 2>/dev/null |
			awk -v p=":$hex" 'substr($2, length($2) - 4) == p { f = 1 } END { exit !f }'
		return
		;;
	cm:*)
		local p=${1#cm:} ps=0x0106
		case $p in
		*:udp) ps=0x0111 p=${p%:udp} ;;
		*:ib) ps=0x013f p=${p%:ib} ;;
		*:tcp) p=${p%:tcp} ;;
		esac
		hex=$(printf '0x%016x' $((ps << 16 | p)))
		sr_in_ns "${2:-}" "$SR_BUILD_DIR/bin/softrdma-cfg" status 2>/dev/null |
			grep -q "listen service $hex "
		return
		;;
	esac
	hex=$(printf '%04X' "$1")
	sr_in_ns "${2:-}" cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk -v p=":$hex" 'substr($2, length($2) - 4) == p && $4 == "0A" { f = 1 } END { exit !f }'
}

# sr_wait_listen PORT PID [NS]: waits until PID listens on PORT.  Returns
# 1 if PID died first, 2 on timeout.  The pingpong programs and perftest
# connect once and give up, so a client started too early would fail.
sr_wait_listen() {
	local port=$1 pid=$2 ns=${3:-} deadline=$((SECONDS + 30))
	while :; do
		sr_port_listening "$port" "$ns" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		[ "$SECONDS" -ge "$deadline" ] && return 2
		sleep 0.1
	done
}

# ---- server and client ---------------------------------------------------

# sr_pair [--ns NS] [--server-stays] DESC PORT -- SERVER-CMD... -- CLIENT-CMD...
#
# Starts the server in the background, waits until it listens on PORT (in
# namespace NS if given: where the server runs), runs the client, then
# waits for the server.  Passes if both exit 0.  With --server-stays the
# server is one that serves until stopped (io_demo, fi_rdm_pingpong -s
# without a count): it passes if it is still running a second after the
# client exited 0, and is then stopped.  SR_SERVER_OUT and SR_CLIENT_OUT
# name their outputs for further checks.
sr_pair() {
	local ns="" desc port spid crc src w stays=""
	local -a srv=() cli=()
	while :; do
		case $1 in
		--ns) ns=$2 && shift 2 ;;
		--server-stays) stays=1 && shift ;;
		*) break ;;
		esac
	done
	desc=$1 port=$2
	shift 2
	[ "$1" = -- ] || sr_die "sr_pair: expected -- before the server command"
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		srv+=("$1")
		shift
	done
	[ $# -gt 0 ] || sr_die "sr_pair: expected -- before the client command"
	shift
	cli=("$@")

	echo "--- $desc"
	sr_new_log "${srv[@]}"
	SR_SERVER_OUT=$SR_OUTFILE
	timeout -k 5 "$((SR_MAX_TIME + 60))" "${srv[@]}" >"$SR_SERVER_OUT" 2>&1 </dev/null &
	spid=$!
	SR_PIDS+=("$spid")

	sr_wait_listen "$port" "$spid" "$ns"
	w=$?
	if [ "$w" -ne 0 ]; then
		if [ "$w" -eq 1 ]; then
			wait "$spid"
			src=$?
			sr_fail "$desc: server ended before listening on port $port ($(sr_status_str "$src"))"
		else
			sr_fail "$desc: server not listening on port $port after 30 s"
		fi
		sr_reap "$spid"
		sr_dump "$SR_SERVER_OUT" server
		return 1
	fi

	sr_new_log "${cli[@]}"
	SR_CLIENT_OUT=$SR_OUTFILE
	"${cli[@]}" >"$SR_CLIENT_OUT" 2>&1 </dev/null &
	sr_watch $! "$SR_TIMEOUT" "$spid"
	crc=$?

	if [ -n "$stays" ]; then
		sleep 1
		if kill -0 "$spid" 2>/dev/null; then
			src=0
			kill -TERM "$spid" 2>/dev/null
			wait "$spid"
		else
			wait "$spid"
			src=$?
			[ "$src" -eq 0 ] && src=1 # a serving server that ended by itself
		fi
		sr_forget "$spid"
		if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ]; then
			sr_pass "$desc"
			return 0
		fi
		sr_fail "$desc: server $( [ "$src" -eq 0 ] && echo "still serving" || sr_status_str "$src"), client $(sr_status_str "$crc")"
		sr_dump "$SR_SERVER_OUT" server
		sr_dump "$SR_CLIENT_OUT" client
		return 1
	fi

	# The server finishes after its client: a hang if it stops making
	# progress for 30 s.  One whose client failed may wait for it forever:
	# give it 5 s to notice, then stop it (no backtraces: not a finding).
	if [ "$crc" -eq 0 ]; then
		sr_watch "$spid" 30
		src=$?
	else
		for ((w = 0; w < 50; w++)); do
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$spid" 2>/dev/null && kill -TERM "$spid" 2>/dev/null
		wait "$spid"
		src=$?
	fi
	sr_forget "$spid"

	if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ]; then
		sr_pass "$desc"
		return 0
	fi
	sr_fail "$desc: server $(sr_status_str "$src"), client $(sr_status_str "$crc")"
	sr_dump "$SR_SERVER_OUT" server
	sr_dump "$SR_CLIENT_OUT" client
	return 1
}

sr_forget() {
	local -a keep=()
	local p
	for p in "${SR_PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	SR_PIDS=("${keep[@]}")
}

sr_reap() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	sr_forget "$1"
}

# ---- two hosts: network namespaces joined by a veth pair -----------------

# sr_netns_setup: two namespaces with unique names, SR_NS_A and SR_NS_B,
# each with lo up and one end of a veth pair (MTU 1500) addressed
# SR_IP_A / SR_IP_B in a random /24 of 198.18.0.0/15 (the benchmarking
# range, RFC 2544), and a configuration SR_CONF_A / SR_CONF_B with rxe0
# on that veth.  Everything is removed at exit, including processes left
# in the namespaces (softrdma's daemon among them).  Skips without root
# or without `ip netns`.  With TYPE iwarp the devices are siw0 instead.
sr_netns_setup() {
	local id sub i type=${1:-roce}
	[ "$(id -u)" -eq 0 ] || sr_skip "needs root to create network namespaces"
	command -v ip >/dev/null 2>&1 || sr_skip "ip (iproute2) is not installed"
	ip netns list >/dev/null 2>&1 || sr_skip "ip netns is not available here"

	id=$(printf '%03x%03x' $(($$ % 4096)) $((RANDOM % 4096)))
	sub=$((RANDOM % 256))
	SR_NS_A=sr-$id-a
	SR_NS_B=sr-$id-b
	SR_VETH_A=srv${id}a
	SR_VETH_B=srv${id}b
	SR_IP_A=198.18.$sub.1
	SR_IP_B=198.18.$sub.2

	sr_netns_add "$SR_NS_A"
	sr_netns_add "$SR_NS_B"

	echo "+ namespaces $SR_NS_A ($SR_IP_A on $SR_VETH_A) <-> $SR_NS_B ($SR_IP_B on $SR_VETH_B)"
	ip link add "$SR_VETH_A" netns "$SR_NS_A" type veth peer name "$SR_VETH_B" netns "$SR_NS_B" \
		2>"$SR_TMP/netns.err" ||
		sr_skip "cannot create a veth pair: $(cat "$SR_TMP/netns.err")"
	if ! { ip -n "$SR_NS_A" link set lo up &&
		ip -n "$SR_NS_B" link set lo up &&
		ip -n "$SR_NS_A" link set "$SR_VETH_A" mtu 1500 &&
		ip -n "$SR_NS_B" link set "$SR_VETH_B" mtu 1500 &&
		ip -n "$SR_NS_A" addr add "$SR_IP_A/24" dev "$SR_VETH_A" &&
		ip -n "$SR_NS_B" addr add "$SR_IP_B/24" dev "$SR_VETH_B" &&
		ip -n "$SR_NS_A" link set "$SR_VETH_A" up &&
		ip -n "$SR_NS_B" link set "$SR_VETH_B" up; }; then
		sr_die "cannot configure the veth pair"
	fi
	for i in $(seq 1 50); do
		ip -n "$SR_NS_A" link show "$SR_VETH_A" | grep -q 'state UP' &&
			ip -n "$SR_NS_B" link show "$SR_VETH_B" | grep -q 'state UP' && break
		sleep 0.1
	done

	SR_CONF_A=$SR_TMP/softrdma-a.conf
	SR_CONF_B=$SR_TMP/softrdma-b.conf
	sr_write_conf "$SR_CONF_A" "$SR_VETH_A" "$type"
	sr_write_conf "$SR_CONF_B" "$SR_VETH_B" "$type"
	# The program prefixes that run a command as host A or host B.
	# shellcheck disable=SC2034 # used by the tests
	SR_AT_A=(ip netns exec "$SR_NS_A" env SOFTRDMA_CONF="$SR_CONF_A" "$SR_RUN")
	# shellcheck disable=SC2034
	SR_AT_B=(ip netns exec "$SR_NS_B" env SOFTRDMA_CONF="$SR_CONF_B" "$SR_RUN")
}

# sr_netns_hosts TYPE: after sr_netns_setup, sets HOST_A and HOST_B to the
# command prefixes that run a program through softrdma-run on host A and on
# host B with a device of TYPE: the namespaces' own RoCE devices (SR_AT_A,
# SR_AT_B), or for iwarp a Soft-iWARP device on each veth.
sr_netns_hosts() {
	HOST_A=("${SR_AT_A[@]}")
	HOST_B=("${SR_AT_B[@]}")
	if [ "$1" = iwarp ]; then
		sr_write_conf "$SR_TMP/iw-a.conf" "$SR_VETH_A" iwarp
		sr_write_conf "$SR_TMP/iw-b.conf" "$SR_VETH_B" iwarp
		HOST_A=(ip netns exec "$SR_NS_A" env SOFTRDMA_CONF="$SR_TMP/iw-a.conf" "$SR_RUN")
		HOST_B=(ip netns exec "$SR_NS_B" env SOFTRDMA_CONF="$SR_TMP/iw-b.conf" "$SR_RUN")
	fi
}

# sr_mpi_agent FILE: after sr_netns_setup, writes FILE, an rsh agent for
# Open MPI's mpirun (--mca plm_rsh_agent FILE): "FILE HOST COMMAND..." runs
# COMMAND through softrdma-run in the namespace that owns HOST's address
# (SR_IP_A, SR_IP_B) with that host's configuration, as ssh would on
# another host.
sr_mpi_agent() {
	cat >"$1" <<AGENT_EOF
#!/bin/sh
host=\$1
shift
case \$host in
$SR_IP_A) ns=$SR_NS_A conf=$SR_CONF_A ;;
$SR_IP_B) ns=$SR_NS_B conf=$SR_CONF_B ;;
*) echo "netns-agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" env SOFTRDMA_CONF="\$conf" "$SR_RUN" sh -c "\$*"
AGENT_EOF
	chmod +x "$1"
}

# sr_netns_add NAME: a network namespace with lo up, deleted at exit.
# Skips without root or `ip netns`.
sr_netns_add() {
	[ "$(id -u)" -eq 0 ] || sr_skip "needs root to create network namespaces"
	command -v ip >/dev/null 2>&1 || sr_skip "ip (iproute2) is not installed"
	ip netns add "$1" 2>"$SR_TMP/netns.err" ||
		sr_skip "cannot create a network namespace: $(cat "$SR_TMP/netns.err")"
	sr_on_exit "sr_netns_delete $1"
	SR_NETNS_LIST="$SR_NETNS_LIST $1"
	ip -n "$1" link set lo up || sr_die "cannot bring lo up in $1"
}

# Kills what still runs in namespace NS, then deletes it.
sr_netns_delete() {
	local pids
	pids=$(ip netns pids "$1" 2>/dev/null)
	if [ -n "$pids" ]; then
		# shellcheck disable=SC2086 # one pid per word
		kill -TERM $pids 2>/dev/null
		sleep 0.5
		pids=$(ip netns pids "$1" 2>/dev/null)
		# shellcheck disable=SC2086
		[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	fi
	ip netns del "$1" 2>/dev/null
}

# sr_gid_index AT-PREFIX-NAME IPV4: the GID index whose GID is the
# IPv4-mapped address IPV4 as a RoCE v2 GID, as ibv_devinfo -v shows it;
# 0 if none is found.  Kernel rxe puts the MAC-derived link-local GID
# first, so index 0 is not the IPv4 one everywhere.
sr_gid_index() {
	local -n at=$1
	local idx
	idx=$(timeout -k 5 "$SR_TIMEOUT" "${at[@]}" ibv_devinfo -v -d rxe0 2>/dev/null |
		sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:${2//./\\.}, RoCE v2\$/\1/p" |
		head -n 1)
	echo "${idx:-0}"
}

# perftest -R makes two rdma_cm connections (control, then test QPs); its
# client may reach the port between the server's two listens and get
# REJECTED (reason 8): a race in perftest itself, which the kernel's CM
# meets the same way.  Debian's perftest 4.5+0.17 retries, but its retry
# reuses the ids it has just destroyed and crashes (SIGSEGV; fixed upstream
# in 3d9d8d0, "Fix crashes and logical flaws in RDMA CM connection retry",
# which retries up to 10 times).  Measured here: 2 of 20 runs on a quiet
# machine meet it, 9 of 20 under strace.  sr_perftest_raced: the last
# sr_pair failed only that way; takes its failure back and says so.
#
# perftest also gives up when its own clock calibration fails on a loaded
# machine (get_cpu_mhz: "Correlation coefficient r^2: ... < 0.9", then
# "Can't produce a report"; seen once under ASan with both cores busy),
# after a run that moved its data; that counts as the same kind of
# failure: perftest's, not the device's.
sr_perftest_raced() {
	if grep -q 'RDMA_CM_EVENT_REJECTED; error: 8' "$SR_CLIENT_OUT"; then
		echo "# perftest's second connection raced its server's second listen; once more"
	elif grep -q 'Correlation coefficient r^2' "$SR_CLIENT_OUT" "$SR_SERVER_OUT"; then
		echo "# perftest could not calibrate its clock on this loaded machine (no report); once more"
	else
		return 1
	fi
	SR_NFAIL=$((SR_NFAIL - 1))
}

# sr_perftest_tries CMD...: runs CMD (one sr_pair of a perftest pair,
# choosing its own port; SR_TRY tells it which try this is) up to 10 times,
# as upstream perftest's mended retry does, while it fails only in one of
# those two ways.  Any other failure counts at once.  Every perftest pair
# of the suite goes through it: the clock calibration can fail in any of
# them, the listen race only with -R.
sr_perftest_tries() {
	local rc
	for ((SR_TRY = 1; SR_TRY <= 10; SR_TRY++)); do
		"$@" && rc=0 || rc=$?
		if [ "$rc" = 0 ] || [ "$SR_TRY" = 10 ] || ! sr_perftest_raced; then
			SR_TRY=1
			return "$rc"
		fi
	done
}

# sr_try_desc DESC: DESC, and which try it is from sr_perftest_tries's
# second on
sr_try_desc() {
	if [ "${SR_TRY:-1}" -gt 1 ]; then echo "$1 (try $SR_TRY)"; else echo "$1"; fi
}

# sr_pingpong_suite PROG VARIANT...: Debian's PROG (ibv_rc_pingpong,
# ibv_uc_pingpong) with its data check (-c) at 1 B, 4 KiB, 64 KiB and 1 MiB,
# once per VARIANT (a list of options; "" for none): the client exchanged
# every message and received intact data.
sr_pingpong_suite() {
	local prog=$1 size iters variant port
	local -a args
	shift
	for size in 1 4096 65536 1048576; do
		iters=200
		[ "$size" -ge 1048576 ] && iters=20
		for variant in "$@"; do
			port=$(sr_free_port)
			# shellcheck disable=SC2206 # variant is a list of options
			args=(-g 0 -c -s "$size" -n "$iters" -p "$port" $variant)
			if sr_pair "${prog#ibv_} size $size${variant:+ $variant}" "$port" \
				-- "$SR_RUN" "$prog" "${args[@]}" \
				-- "$SR_RUN" "$prog" "${args[@]}" 127.0.0.1; then
				sr_expect "$SR_CLIENT_OUT" "^$((size * iters * 2)) bytes in " "  client exchanged all $iters messages"
				sr_reject "$SR_CLIENT_OUT" 'invalid data' "  client received intact data"
			fi
		done
	done
}

# sr_tool_pair DESC TOOL ARGS...: TOOL ARGS as server and client on a free
# TCP port (-p), the client to 127.0.0.1: the pingpongs and perftest
# without rdma_cm.  For sr_perftest_tries.
sr_tool_pair() {
	local desc tool=$2 port
	desc=$(sr_try_desc "$1")
	shift 2
	port=$(sr_free_port)
	sr_pair "$desc" "$port" -- "$SR_RUN" "$tool" -p "$port" "$@" -- "$SR_RUN" "$tool" -p "$port" "$@" 127.0.0.1
}

# sr_perftest_once DESC LISTEN ARGS...: one perftest -R pair (ARGS) on
# this host, the client to 127.0.0.1; LISTEN as for sr_perftest_ns_once.
# For sr_perftest_tries.
sr_perftest_once() {
	local desc listen=$2
	desc=$(sr_try_desc "$1")
	shift 2
	P=$(sr_free_port)
	sr_pair "$desc" "$listen$P" -- "$SR_RUN" "$@" -R -p "$P" -- "$SR_RUN" "$@" -R -p "$P" 127.0.0.1
}

# sr_perftest_ns_once DESC LISTEN ARGS...: one perftest -R pair (ARGS) from
# host A to a server on host B, after sr_netns_setup; LISTEN is "cm:" where
# the server's rdma_cm listen shows in B's softrdmad table (RoCE), "" where
# it is B's TCP port (iWARP).  For sr_perftest_tries.
sr_perftest_ns_once() {
	local desc=$1 listen=$2
	shift 2
	desc=$(sr_try_desc "$desc")
	P=$(sr_free_port "$SR_NS_B")
	sr_pair --ns "$SR_NS_B" "$desc" "$listen$P" -- "${SR_AT_B[@]}" "$@" -R -p "$P" \
		-- "${SR_AT_A[@]}" "$@" -R -p "$P" "$SR_IP_B"
}

# ---- rdma_cm pieces shared by t_rdma_cm.sh and t_iwarp_cm.sh --------------
# LISTEN is what sr_wait_listen waits for: cm:PORT on RoCE (softrdmad's
# listen table), the TCP PORT itself on iWARP.

# ERRTO FILE CMD...: CMD with its stderr in FILE, so that rping's unbuffered
# messages cannot land inside its buffered ping data lines
# shellcheck disable=SC2016 # expanded by the inner shell
ERRTO=(bash -c 'f=$1; shift; exec "$@" 2>"$f"' errto)

# sr_rping_data_match COUNT: rping's client and server (SR_CLIENT_OUT,
# SR_SERVER_OUT) printed the same COUNT ping data lines
sr_rping_data_match() {
	local n
	n=$(grep -c '^ping data: rdma-ping-' "$SR_CLIENT_OUT")
	if [ "$n" -ne "$1" ]; then
		sr_fail "  client printed $n ping data lines, expected $1"
		sr_dump "$SR_CLIENT_OUT" client
		return 1
	fi
	if diff <(sed -n 's/^server ping data: //p' "$SR_SERVER_OUT") \
		<(sed -n 's/^ping data: //p' "$SR_CLIENT_OUT") >"$SR_TMP/rping.diff"; then
		sr_pass "  server and client ping data match ($1 lines)"
		return 0
	fi
	sr_fail "  server and client ping data differ"
	head -n 20 "$SR_TMP/rping.diff" | cut -c1-200 | sed 's/^/    >> /'
	return 1
}

# sr_cm_cmtime LISTEN PORT: cmtime -c 100 against a cmtime server (which
# runs until stopped: the client's table is the result)
sr_cm_cmtime() {
	local listen=$1 port=$2 spid
	echo "--- cmtime, 100 connections"
	sr_new_log cmtime-server
	timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" cmtime -b 127.0.0.1 -p "$port" >"$SR_OUTFILE" 2>&1 </dev/null &
	spid=$!
	SR_PIDS+=("$spid")
	if sr_wait_listen "$listen" "$spid"; then
		if sr_run "cmtime -c 100" -- "$SR_RUN" cmtime -s 127.0.0.1 -p "$port" -c 100; then
			sr_expect "$SR_OUT" '^connect +:' "  connect timings reported"
			sed -n '/^step/,$p' "$SR_OUT" | sed 's/^/    /'
		fi
	else
		sr_fail "cmtime server did not listen"
	fi
	sr_reap "$spid"
}

# sr_cm_ten_clients LISTEN PORT: ten ucmatose client processes at once
# against one server expecting ten
sr_cm_ten_clients() {
	local listen=$1 port=$2 spid srv_out nok i
	local -a cpids=()
	echo "--- ten client processes at once"
	sr_new_log ucmatose-server-10
	srv_out=$SR_OUTFILE
	timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" ucmatose -p "$port" -c 10 -C 50 >"$srv_out" 2>&1 </dev/null &
	spid=$!
	SR_PIDS+=("$spid")
	if ! sr_wait_listen "$listen" "$spid"; then
		sr_fail "ucmatose server did not listen"
		sr_reap "$spid"
		return
	fi
	for i in $(seq 1 10); do
		timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" ucmatose -s 127.0.0.1 -p "$port" -c 1 -C 50 \
			>"$SR_TMP/ten.$i.out" 2>&1 </dev/null &
		cpids+=($!)
	done
	nok=0
	for i in $(seq 1 10); do
		if wait "${cpids[$((i - 1))]}"; then
			nok=$((nok + 1))
		else
			sr_dump "$SR_TMP/ten.$i.out" "client $i"
		fi
	done
	if wait "$spid"; then
		sr_pass "ucmatose server accepted ten client processes and exchanged 50 messages with each"
	else
		sr_fail "ucmatose server with ten client processes failed"
		sr_dump "$srv_out" server
	fi
	sr_forget "$spid"
	if [ "$nok" -eq 10 ]; then
		sr_pass "  all ten clients succeeded"
	else
		sr_fail "  only $nok of ten clients succeeded"
	fi
}

# sr_cm_killed_server LISTEN PORT EXPECT: an rping server killed in the
# middle of a connection; its client must end by itself within 10 s, its
# output matching EXPECT (an extended regular expression)
sr_cm_killed_server() {
	local listen=$1 port=$2 expect=$3 spid cpid killed rc
	echo "--- server killed mid-connection"
	sr_new_log rping-victim-server
	timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" rping -s -a 127.0.0.1 -p "$port" -C 100000000 >"$SR_OUTFILE" 2>&1 \
		</dev/null &
	spid=$!
	SR_PIDS+=("$spid")
	if ! sr_wait_listen "$listen" "$spid"; then
		sr_fail "victim rping server did not listen"
		return
	fi
	timeout -k 5 90 "$SR_RUN" rping -c -a 127.0.0.1 -p "$port" -C 100000000 -v >"$SR_TMP/victim.out" 2>&1 \
		</dev/null &
	cpid=$!
	for _ in $(seq 1 100); do
		grep -q '^ping data' "$SR_TMP/victim.out" && break
		sleep 0.1
	done
	sleep 0.5
	pkill -KILL -P "$spid" # rping itself, the child of timeout
	killed=$SECONDS
	wait "$cpid"
	rc=$?
	if [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ $((SECONDS - killed)) -le 10 ]; then
		sr_pass "client of a killed server ends by itself ($(sr_status_str "$rc") after $((SECONDS - killed)) s)"
		sr_expect "$SR_TMP/victim.out" "$expect" "  it saw DISCONNECTED or an error"
	else
		sr_fail "client of a killed server: $(sr_status_str "$rc")"
		sr_dump "$SR_TMP/victim.out" client
	fi
	sr_reap "$spid"
}

# ---- packet captures -------------------------------------------------------

# sr_capture_start FILE FILTER [TSHARK-ARGS...]: tshark on lo writing FILE,
# running (and reaped at exit) once it says it captures; sr_capture_stop
# ends it.  SR_CAPTURE_IFS (interfaces instead of lo), SR_CAPTURE_NS (the
# namespace they are in) and SR_CAPTURE_MAX (seconds, default 300) change
# where and how long.
sr_capture_start() {
	local file=$1 filter=$2 i
	local -a ifs=() at=()
	shift 2
	for i in ${SR_CAPTURE_IFS:-lo}; do ifs+=(-i "$i"); done
	[ -n "${SR_CAPTURE_NS:-}" ] && at=(ip netns exec "$SR_CAPTURE_NS")
	timeout -k 5 "${SR_CAPTURE_MAX:-300}" "${at[@]}" tshark -q "$@" "${ifs[@]}" -f "$filter" -w "$file" \
		>"$SR_TMP/tshark.log" 2>&1 &
	SR_CAPTURE_PID=$!
	SR_PIDS+=("$SR_CAPTURE_PID")
	# tshark loads its dissectors first: seconds on a loaded host
	for i in $(seq 300); do
		grep -q "Capturing on" "$SR_TMP/tshark.log" && break
		sleep 0.1
	done
	[ "$i" -lt 300 ] || echo "tshark did not start capturing within 30 s: $(cat "$SR_TMP/tshark.log")" >&2
	sleep 0.5
}

sr_capture_stop() {
	kill -INT "$SR_CAPTURE_PID" 2>/dev/null
	wait "$SR_CAPTURE_PID" 2>/dev/null
	sr_forget "$SR_CAPTURE_PID"
}

# ---- storage: Debian's tgtd as iSCSI/iSER target, libiscsi initiators -----
# One tgtd per call of sr_tgt_start, with its management socket in SR_TMP
# (TGT_IPC_SOCKET), an iSCSI/TCP portal and an iSER portal, and two targets
# on one file-backed LUN: SR_TGT_IQN_TCP (tid 1, driver iscsi) and
# SR_TGT_IQN_ISER (tid 2, driver iser).  tgt 1.0.85's iSER driver admits an
# initiator only when both an address ACL and an initiator-name ACL match
# (fixed upstream in tgt b73c64d), so the iSER target binds ALL addresses
# and the names in SR_ISCSI_INITIATORS, which every libiscsi command here
# passes with -i (and iscsi-test-cu's second session with -I).

SR_ISCSI_INI=iqn.2026-01.org.softrdma:initiator
SR_ISCSI_INI2=iqn.2026-01.org.softrdma:initiator-2
SR_ISCSI_INITIATORS="$SR_ISCSI_INI $SR_ISCSI_INI2"
SR_TGT_IQN_TCP=iqn.2026-01.org.softrdma:tcp
SR_TGT_IQN_ISER=iqn.2026-01.org.softrdma:iser

# Debian's libiscsi 1.19 reads memory it never set: its iSER transport
# takes struct iser_conn from malloc (iscsi_init_iser_transport) and, on
# RDMA_CM_EVENT_ESTABLISHED, walks the tx_desc list in it (iser_reg_mr,
# ISCSI_LIST_ADD_END) before anything set it.  Under MALLOC_PERTURB_ that
# is a 0x5a5a... pointer and every iser:// login crashes in libiscsi's CM
# thread (fixed upstream in libiscsi b4ba920, "iser: fix segfault at
# iser_reg_mr").  Not softrdma's doing, so the storage tests run without it.
sr_need_storage() {
	sr_need_cmd tgtd tgtadm iscsi-inq iscsi-readcapacity16 iscsi-perf iscsi-ls
	[ -x "$SR_BUILD_DIR/bin/sr-iscsi-io" ] ||
		sr_skip "sr-iscsi-io was not built (libiscsi-dev missing: scripts/install-deps.sh installs it)"
	SR_ISCSI_IO=$SR_BUILD_DIR/bin/sr-iscsi-io
	unset MALLOC_PERTURB_
}

# sr_tgtadm ARGS...: tgtadm against the tgtd of the last sr_tgt_start
sr_tgtadm() {
	TGT_IPC_SOCKET=$SR_TGT_SOCK timeout -k 5 30 tgtadm -C 0 "$@"
}

# sr_tgt_start NAME TYPE ADDR TCP-PORT ISER-PORT LUN-FILE [AT-PREFIX-NAME]:
# tgtd under softrdma-run on the device of SOFTRDMA_CONF (TYPE roce or
# iwarp; with the prefix named, e.g. SR_AT_A or (env SOFTRDMA_CONF=F
# softrdma-run), run through that prefix instead), its TCP portal on ADDR:TCP-PORT, iSER on ISER-PORT (tgt
# listens on the IPv4 and the IPv6 wildcard); waits until both listen and
# makes the two targets.  Sets SR_TGT_PID, SR_TGT_LOG, SR_TGT_SOCK.
# Returns 1 (after a failed check) if tgtd does not come up.
sr_tgt_start() {
	local name=$1 type=$2 addr=$3 tport=$4 iport=$5 file=$6 at=${7:-} ns='' ilisten ini
	local -a run=("$SR_RUN")
	if [ -n "$at" ]; then
		local -n atref=$at
		run=("${atref[@]}")
		# the namespace, when the prefix is `ip netns exec NS ...`
		[ "${atref[*]:0:3}" = "ip netns exec" ] && ns=${atref[3]}
	fi
	SR_TGT_SOCK=$SR_TMP/tgtd-$name.sock
	sr_new_log tgtd-"$name"
	SR_TGT_LOG=$SR_OUTFILE
	TGT_IPC_SOCKET=$SR_TGT_SOCK timeout -k 5 "${SR_TGT_TIMEOUT:-600}" "${run[@]}" tgtd -f -C 0 \
		--iscsi portal="$addr:$tport" --iser port="$iport" >"$SR_TGT_LOG" 2>&1 </dev/null &
	SR_TGT_PID=$!
	SR_PIDS+=("$SR_TGT_PID")
	sr_on_exit "TGT_IPC_SOCKET=$SR_TGT_SOCK tgtadm -C 0 --op delete --mode system >/dev/null 2>&1"
	# RoCE listens through softrdmad (cm:PORT), iWARP on TCP itself
	ilisten=cm:$iport
	[ "$type" = iwarp ] && ilisten=$iport
	if ! sr_wait_listen "$tport" "$SR_TGT_PID" "$ns" || ! sr_wait_listen "$ilisten" "$SR_TGT_PID" "$ns"; then
		sr_fail "tgtd $name did not listen on TCP $tport and iSER $iport"
		sr_dump "$SR_TGT_LOG" tgtd
		return 1
	fi
	if ! { sr_tgtadm --lld iscsi --op new --mode target --tid 1 -T "$SR_TGT_IQN_TCP" &&
		sr_tgtadm --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$file" &&
		sr_tgtadm --lld iscsi --op bind --mode target --tid 1 -I ALL &&
		sr_tgtadm --lld iser --op new --mode target --tid 2 -T "$SR_TGT_IQN_ISER" &&
		sr_tgtadm --lld iser --op new --mode logicalunit --tid 2 --lun 1 -b "$file" &&
		sr_tgtadm --lld iser --op bind --mode target --tid 2 -I ALL; } >"$SR_TMP/tgtadm.out" 2>&1; then
		sr_fail "tgtadm could not set up the targets of tgtd $name"
		sed 's/^/    | /' "$SR_TMP/tgtadm.out"
		return 1
	fi
	for ini in $SR_ISCSI_INITIATORS; do
		sr_tgtadm --lld iser --op bind --mode target --tid 2 -Q "$ini" || return 1
	done
	sr_pass "tgtd $name: iSCSI/TCP on $addr:$tport, iSER on port $iport, targets made"
}

# sr_tgt_stop: tgtd ignores SIGTERM; `tgtadm --op delete --mode system`
# stops it (then SIGKILL if it has not gone within 5 s)
sr_tgt_stop() {
	local pid=${1:-$SR_TGT_PID} i
	sr_tgtadm --op delete --mode system >/dev/null 2>&1
	for i in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && pkill -KILL -P "$pid"
	wait "$pid" 2>/dev/null
	sr_forget "$pid"
}
