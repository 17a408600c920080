#!/bin/bash
# softrdmad as the host's shared QP1 (CM): Communication IDs and listens,
# CM MADs routed to the process they belong to, REJ / SIDR_REP / DREP sent
# by the daemon for requests nobody takes (ICRC checked), rate limiting of
# those answers, malformed QP1 datagrams dropped and counted, CLAIM_QP1
# kept below the CM routing, everything freed on disconnect.  The checks
# are in daemon_cm_test.py (python3, standard library only).
#
# Which daemon in a SO_REUSEPORT group gets a datagram is up to the kernel,
# so the checks need a daemon alone on UDP port 4791: as root the test
# re-runs itself in a private network namespace; without root it runs only
# if nothing else holds the port.
#
# Exit: 0 pass, 1 fail, 77 skip.
set -u

B=${SR_BUILD_DIR:-}/bin
HERE=$(cd "$(dirname "$0")" && pwd)
SAMPLES=${SR_SOURCE_DIR:-$HERE/../..}/tests/data/wire-samples
if [ -z "${SR_BUILD_DIR:-}" ] || [ ! -x "$B/softrdmad" ] || [ ! -x "$B/softrdma-cfg" ]; then
	echo "SKIP: SR_BUILD_DIR not set or softrdmad/softrdma-cfg not built"
	exit 77
fi
if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not found"
	exit 77
fi

if [ -z "${SR_T_DAEMON_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	command -v ip >/dev/null && unshare -n true 2>/dev/null; then
	export SR_T_DAEMON_NETNS=1
	exec unshare -n bash "$0" "$@"
fi
if [ -n "${SR_T_DAEMON_NETNS:-}" ]; then
	ip link set lo up || { echo "FAIL: cannot bring lo up in the private netns"; exit 1; }
	echo "running in a private network namespace"
elif ! command -v ss >/dev/null; then
	echo "SKIP: not root and no ss(8) to see whether UDP port 4791 is free"
	exit 77
elif [ -n "$(ss -Hlun 'sport = :4791' 2>/dev/null)" ]; then
	echo "SKIP: UDP port 4791 is in use and a private network namespace needs root"
	exit 77
fi

tmp=$(mktemp -d /tmp/t_daemon_cm.XXXXXX)
export SOFTRDMA_DAEMON_SOCK=sr-t-daemon-cm-$$
export SOFTRDMA_CONF=$tmp/softrdma.conf
export SOFTRDMA_DAEMON_LOG=$tmp/daemon.log
export SOFTRDMA_DAEMON=$B/softrdmad
fails=0
pid=

cleanup() {
	"$B/softrdma-cfg" stop >/dev/null 2>&1
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# --idle-exit: should this script be killed, the daemon still goes away.
if ! timeout 20 "$B/softrdma-cfg" start --idle-exit 60 >"$tmp/start.out" 2>&1; then
	cat "$tmp/start.out"
	echo "FAIL: softrdma-cfg start"
	exit 1
fi
pid=$("$B/softrdma-cfg" status 2>/dev/null | sed -n 's/^Daemon: running (pid \([0-9]*\)).*/\1/p')
if [ -z "$pid" ]; then
	echo "FAIL: no daemon after start"
	exit 1
fi
echo "daemon pid $pid"

timeout 120 python3 "$HERE/daemon_cm_test.py" "$SAMPLES" || fails=$((fails + 1))

if kill -0 "$pid" 2>/dev/null; then
	echo "ok: daemon survives"
else
	echo "FAIL: daemon died"
	fails=$((fails + 1))
fi
"$B/softrdma-cfg" status | sed -n '/^  cm rx/p;/^  dropped /p'

if [ $fails -ne 0 ]; then
	echo "--- daemon log ---"
	tail -30 "$SOFTRDMA_DAEMON_LOG" 2>/dev/null
	echo "t_daemon_cm: failed"
	exit 1
fi
echo "t_daemon_cm: all checks passed"
exit 0
