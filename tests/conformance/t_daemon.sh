#!/bin/bash
# softrdmad: start/stop through softrdma-cfg, --background hygiene (no
# inherited pipes), survival of garbage datagrams and malformed IPC, drop
# counters, QPN allocation, QP1 claim, routing by destination QPN, deferred
# replies, idle exit and clean SIGTERM.
#
# Uses its own abstract socket name, so a softrdmad serving other processes
# is not disturbed.  UDP port 4791 is shared by every daemon in a network
# namespace (SO_REUSEPORT), so as root the test re-runs itself in a private
# network namespace where the port is its alone; without that, checks that
# depend on which daemon gets a datagram are relaxed (SR_T_DAEMON_SHARED=1
# forces that mode).
#
# Exit: 0 pass, 1 fail, 77 skip.
set -u

B=${SR_BUILD_DIR:-}/bin
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${SR_BUILD_DIR:-}" ] || [ ! -x "$B/softrdmad" ] || [ ! -x "$B/softrdma-cfg" ]; then
	echo "SKIP: SR_BUILD_DIR not set or softrdmad/softrdma-cfg not built"
	exit 77
fi

if [ -z "${SR_T_DAEMON_NETNS:-}" ] && [ -z "${SR_T_DAEMON_SHARED:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	command -v ip >/dev/null && unshare -n true 2>/dev/null; then
	export SR_T_DAEMON_NETNS=1
	exec unshare -n bash "$0" "$@"
fi
private=0
if [ -n "${SR_T_DAEMON_NETNS:-}" ]; then
	ip link set lo up || { echo "FAIL: cannot bring lo up in the private netns"; exit 1; }
	private=1
	echo "running in a private network namespace"
else
	echo "running in the shared network namespace (UDP checks relaxed)"
fi

tmp=$(mktemp -d /tmp/t_daemon.XXXXXX)
export SOFTRDMA_DAEMON_SOCK=sr-t-daemon-$$
export SOFTRDMA_CONF=$tmp/softrdma.conf
export SOFTRDMA_DAEMON_LOG=$tmp/daemon.log
export SOFTRDMA_DAEMON=$B/softrdmad
fails=0
pids_to_kill=

cleanup() {
	for p in $pids_to_kill; do kill "$p" 2>/dev/null; done
	"$B/softrdma-cfg" stop >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}

daemon_pid() { "$B/softrdma-cfg" status 2>/dev/null | sed -n 's/^Daemon: running (pid \([0-9]*\)).*/\1/p'; }
# counter NAME: value of NAME=N on the daemon's "dropped" status line
counter() { "$B/softrdma-cfg" status | tr ' ' '\n' | sed -n "s/^$1=//p"; }
gone() { ! kill -0 "$1" 2>/dev/null || grep -q '^[^)]*) [ZX]' "/proc/$1/stat" 2>/dev/null; }

# --- command line ---
check "softrdmad --help exits 0" sh -c "'$B/softrdmad' --help >/dev/null"
"$B/softrdmad" --bogus >/dev/null 2>&1
check "softrdmad rejects an unknown option with 2" [ $? -eq 2 ]
"$B/softrdmad" --idle-exit x >/dev/null 2>&1
check "softrdmad rejects a bad --idle-exit with 2" [ $? -eq 2 ]

# --- start ---
check "status says the daemon is not running" bash -c "'$B/softrdma-cfg' status | grep -q '^Daemon: not running'"
# Output goes to a file: if the daemon kept our pipe, a $(...) would hang.
# --idle-exit: should this script be killed, the daemon still goes away.
timeout 20 "$B/softrdma-cfg" start --idle-exit 60 >"$tmp/start.out" 2>&1
rc=$?
cat "$tmp/start.out"
if [ $rc -ne 0 ] && [ $private = 0 ] && grep -q 'Address already in use' "$tmp/start.out"; then
	echo "SKIP: UDP port 4791 is held by a socket softrdmad cannot share (kernel rxe?)"
	exit 77
fi
check "softrdma-cfg start succeeds" [ $rc -eq 0 ]
pid=$(daemon_pid)
if [ -z "$pid" ]; then
	bad "daemon is running after start"
	exit 1
fi
pids_to_kill="$pid"
check "status shows the daemon (pid $pid)" kill -0 "$pid"
check "start printed the same pid" grep -q "pid $pid" "$tmp/start.out"
pipes=$(ls -l "/proc/$pid/fd" 2>/dev/null | grep -c 'pipe:')
check "daemon holds no pipes (has $pipes)" [ "$pipes" -eq 0 ]
nfd=$(ls "/proc/$pid/fd" | wc -l)
check "daemon holds only its own fds ($nfd)" [ "$nfd" -le 12 ]
check "daemon is a session leader" bash -c "[ \"\$(ps -o sid= -p $pid | tr -d ' ')\" = $pid ]"
check "daemon cwd is /" [ "$(readlink "/proc/$pid/cwd")" = / ]
check "daemon stdin is /dev/null" [ "$(readlink "/proc/$pid/fd/0")" = /dev/null ]
check "daemon logs to SOFTRDMA_DAEMON_LOG" grep -q 'started' "$SOFTRDMA_DAEMON_LOG"
out=$(timeout 20 "$B/softrdma-cfg" start 2>&1)
check "second start reports the running daemon" grep -q "already running (pid $pid)" <<<"$out"
out=$(timeout 10 "$B/softrdmad" --background 2>&1)
rc=$?
check "softrdmad --background with one running exits 0 quietly" [ $rc -eq 0 -a -z "$out" ]
timeout 10 "$B/softrdmad" --foreground >/dev/null 2>"$tmp/fg.err"
rc=$?
check "softrdmad --foreground with one running fails" [ $rc -eq 1 ]
check "... saying it is already running" grep -q 'already running' "$tmp/fg.err"
check "the first daemon is still the one" [ "$(daemon_pid)" = "$pid" ]

# --- garbage datagrams ---
before=$(counter short)
for i in $(seq 1 40); do
	# each redirection is a new socket, so a new source port: in the
	# shared netns that spreads them over every daemon in the group
	printf 'x' >/dev/udp/127.0.0.1/4791
	printf '\x64\x00\xff\xff\x00\xab\xcd\xef\x00\x00\x00\x00' >/dev/udp/127.0.0.1/4791
	printf '\x64\x00\xff\xff\x00\x00\x00\x01\x00\x00\x00\x00' >/dev/udp/127.0.0.1/4791
done 2>/dev/null
sleep 0.5
check "daemon survives garbage datagrams" kill -0 "$pid"
short=$(counter short)
unknown=$(counter unknown_qpn)
noqp1=$(counter no_qp1_owner)
echo "counters: short=$short unknown_qpn=$unknown no_qp1_owner=$noqp1"
if [ $private = 1 ]; then
	check "40 short datagrams counted" [ "$((short - before))" -eq 40 ]
	check "40 unknown-QPN datagrams counted" [ "$unknown" -eq 40 ]
	check "40 QP1 datagrams without an owner counted" [ "$noqp1" -eq 40 ]
else
	check "drops are counted" [ "$((short + unknown + noqp1))" -gt 0 ]
fi

# --- protocol: QPNs, QP1, routing, malformed IPC (needs python3) ---
if command -v python3 >/dev/null; then
	python3 "$HERE/daemon_ipc_test.py" $private || fails=$((fails + 1))
	if [ $private = 1 ]; then
		check "the daemon logged the deferred reply" grep -q 'reply deferred' "$SOFTRDMA_DAEMON_LOG"
	fi
	check "daemon survives the protocol tests" kill -0 "$pid"
else
	echo "skip: python3 not found, protocol checks not run"
fi

# --- stop ---
timeout 20 "$B/softrdma-cfg" stop
check "softrdma-cfg stop succeeds" [ $? -eq 0 ]
check "daemon process is gone" gone "$pid"
check "status says not running" bash -c "'$B/softrdma-cfg' status | grep -q '^Daemon: not running'"
check "stop when not running is not an error" "$B/softrdma-cfg" stop

# --- idle exit and SIGTERM (foreground) ---
SOFTRDMA_DAEMON_SOCK=sr-t-daemon-idle-$$ timeout 20 "$B/softrdmad" --foreground --idle-exit 1 2>"$tmp/idle.log" &
idle=$!
pids_to_kill="$pids_to_kill $idle"
sleep 0.3
SOFTRDMA_DAEMON_SOCK=sr-t-daemon-idle-$$ "$B/softrdma-cfg" status >/dev/null
wait $idle
check "--idle-exit 1 exits 0 by itself" [ $? -eq 0 ]
check "... saying why" grep -q 'no clients' "$tmp/idle.log"
SOFTRDMA_DAEMON_SOCK=sr-t-daemon-term-$$ "$B/softrdmad" --foreground --idle-exit 0 2>"$tmp/term.log" &
term=$!
pids_to_kill="$pids_to_kill $term"
sleep 0.3
kill -TERM $term
wait $term
check "SIGTERM makes the daemon exit 0" [ $? -eq 0 ]

if [ $fails -ne 0 ]; then
	echo "t_daemon: $fails check(s) failed"
	echo "--- daemon log ---"
	cat "$SOFTRDMA_DAEMON_LOG" 2>/dev/null | tail -30
	exit 1
fi
echo "t_daemon: all checks passed"
exit 0
