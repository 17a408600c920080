#!/bin/bash
# softrdma-cfg add/remove/mtu/crc/status on a temporary SOFTRDMA_CONF,
# exit codes for bad arguments (2) and runtime errors (1), the strict
# parser as seen from the tool, and the softrdma-run wrapper.
#
# As root the test re-runs itself in a private network namespace and adds
# a veth (or dummy) interface to check MTU mapping and the built-in default device;
# otherwise it uses lo only.
#
# Exit: 0 pass, 1 fail, 77 skip.
set -u

B=${SR_BUILD_DIR:-}/bin
if [ -z "${SR_BUILD_DIR:-}" ] || [ ! -x "$B/softrdma-cfg" ]; then
	echo "SKIP: SR_BUILD_DIR not set or softrdma-cfg not built"
	exit 77
fi

if [ -z "${SR_T_CFG_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	command -v ip >/dev/null && unshare -n true 2>/dev/null; then
	export SR_T_CFG_NETNS=1
	exec unshare -n bash "$0" "$@"
fi
netns=0
if [ -n "${SR_T_CFG_NETNS:-}" ]; then
	ip link set lo up && netns=1
	echo "running in a private network namespace"
fi

tmp=$(mktemp -d /tmp/t_cfg.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export SOFTRDMA_CONF=$tmp/conf/softrdma.conf
export SOFTRDMA_DAEMON_SOCK=sr-t-cfg-$$   # status must not find anyone's daemon
cfg=$B/softrdma-cfg
fails=0

ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect RC DESCRIPTION ARGS...: run softrdma-cfg ARGS, check the exit code;
# output is kept in $out
expect() {
	local want=$1 what=$2
	shift 2
	out=$("$cfg" "$@" 2>&1)
	local rc=$?
	if [ $rc -eq "$want" ]; then
		ok "$what (exit $rc)"
	else
		bad "$what: exit $rc, wanted $want; output:"
		echo "$out" | sed 's/^/    /'
	fi
}
has() { # has DESCRIPTION PATTERN: $out matches PATTERN (grep -E)
	if grep -qE -- "$2" <<<"$out"; then ok "$1"; else
		bad "$1: no /$2/ in:"
		echo "$out" | sed 's/^/    /'
	fi
}
file_has() {
	if grep -qE -- "$2" "$SOFTRDMA_CONF" 2>/dev/null; then ok "$1"; else
		bad "$1: no /$2/ in the file:"
		sed 's/^/    /' "$SOFTRDMA_CONF" 2>/dev/null
	fi
}
file_lacks() {
	if ! grep -qE -- "$2" "$SOFTRDMA_CONF" 2>/dev/null; then ok "$1"; else
		bad "$1: /$2/ found in the file"
	fi
}

# --- help and bad arguments: exit 2 ---
expect 0 "--help" --help
has "--help shows usage" "^Usage: softrdma-cfg"
expect 0 "help" help
expect 2 "unknown command" frobnicate
has "unknown command prints usage" "Usage"
expect 2 "add without NETDEV" add
expect 2 "add with a bad type" add lo --type rxe
expect 2 "add with --type missing its value" add lo --type
expect 2 "add with a bad name" add lo --name 'a b'
expect 2 "add with an unknown option" add lo --bogus
expect 2 "add with two netdevs" add lo lo
expect 2 "remove without an argument" remove
expect 2 "remove with two arguments" remove a b
expect 2 "mtu without a value" mtu
expect 2 "mtu 1500 (not an IB MTU)" mtu 1500
expect 2 "mtu with a non-number" mtu rxe0 big
expect 2 "mtu with too many arguments" mtu a b c
expect 2 "crc without a value" crc
expect 2 "crc maybe" crc maybe
expect 2 "status with an argument" status now
expect 2 "start with a bad --idle-exit" start --idle-exit -1
expect 2 "stop with an argument" stop now
[ ! -e "$SOFTRDMA_CONF" ] && ok "no file written by bad commands" || bad "a bad command wrote the file"

# --- built-in default ---
expect 0 "status without a file" status
has "status says built-in default" "^Configuration: built-in default"
has "status names the file changes go to" "changes go to $SOFTRDMA_CONF"
has "status shows CRC enabled" "^CRC: enabled"
has "default has one device rxe0 (roce)" "^  rxe0: type roce, netdev "
has "status reports the daemon as not running" "^Daemon: not running"
expect 0 "status is the default command"
has "no-argument output is the status" "^Configuration: built-in default"

# --- add ---
expect 1 "add a nonexistent netdev" add nonexistent0
has "... saying it does not exist" "does not exist"
[ ! -e "$SOFTRDMA_CONF" ] && ok "failed add wrote no file" || bad "failed add wrote a file"
expect 0 "add lo" add lo
has "add names rxe0" "added rxe0 \(roce on lo\)"
file_has "file written with [rxe0]" '^\[rxe0\]$'
file_has "file has netdev = lo" '^netdev = lo$'
file_has "file has the header comment" '^# softrdma configuration'
n=$(grep -c '^\[' "$SOFTRDMA_CONF")
[ "$n" = 1 ] && ok "adding to the default starts a file with just that device" || bad "file has $n devices, wanted 1"
expect 0 "status with the file" status
has "status names the file" "^Configuration: $SOFTRDMA_CONF\$"
has "status shows rxe0 on lo" "^  rxe0: type roce, netdev lo \(up"
has "lo's active MTU is 4096" "active mtu 4096$"
if ip -4 addr show dev lo 2>/dev/null | grep -q 127.0.0.1; then
	has "lo's GIDs include ::ffff:127.0.0.1" "gid ::ffff:127\.0\.0\.1"
fi
expect 1 "add lo again (roce already on lo)" add lo
has "... naming the device" "rxe0 \(roce\) is already configured on lo"
expect 0 "add lo --type iwarp" add lo --type iwarp
has "iwarp device named siw0" "added siw0 \(iwarp on lo\)"
file_has "file has type = iwarp" '^type = iwarp$'
expect 1 "add with a taken name" add lo --type=iwarp --name rxe0
has "... saying the name is taken" "already exists"

# --- mtu ---
expect 0 "mtu rxe0 1024" mtu rxe0 1024
file_has "file has mtu = 1024" '^mtu = 1024$'
expect 0 "status after mtu" status
has "rxe0 active MTU capped to 1024" "active mtu 1024 \(cap 1024\)"
expect 1 "mtu on an unknown device" mtu nosuch 1024
expect 0 "mtu 2048 on all devices" mtu 2048
n=$(grep -c '^mtu = 2048$' "$SOFTRDMA_CONF")
[ "$n" = 2 ] && ok "both devices have mtu = 2048" || bad "$n devices have mtu = 2048, wanted 2"

# --- crc ---
expect 0 "crc disable" crc disable
file_has "file has crc = off" '^crc = off$'
expect 0 "status after crc disable" status
has "status shows CRC disabled" "^CRC: disabled"
expect 0 "crc enable" crc enable
file_has "file has crc = on" '^crc = on$'

# --- remove ---
expect 1 "remove an unknown name" remove nosuch
expect 0 "remove siw0" remove siw0
file_lacks "siw0 gone from the file" '^\[siw0\]'
file_has "rxe0 still there" '^\[rxe0\]'
expect 0 "add lo --type iwarp --name siwlo" add lo --type iwarp --name siwlo
expect 0 "remove lo (every device on lo)" remove lo
has "removed rxe0" "removed rxe0"
has "removed siwlo" "removed siwlo"
expect 0 "status with no devices" status
has "status shows no devices" "^Devices: 0"
has "an empty file is not the default" "^Configuration: $SOFTRDMA_CONF\$"

# --- strict parser errors reach the user ---
printf 'crc = on\n[rxe0]\nnetdev = lo\nspeed = 100\n' >"$SOFTRDMA_CONF"
expect 1 "status with an unknown key in the file" status
has "error names file and line" "^$SOFTRDMA_CONF:4: unknown key 'speed'"
expect 1 "add refuses to rewrite a broken file" add lo
printf '[rxe0]\nnetdev = lo\n[rxe0]\nnetdev = lo\n' >"$SOFTRDMA_CONF"
expect 1 "status with a duplicate device" status
has "error names the duplicate" ":3: duplicate device name 'rxe0'"

# --- removing from the built-in default writes an empty configuration ---
rm -f "$SOFTRDMA_CONF"
expect 0 "remove rxe0 from the built-in default" remove rxe0
expect 0 "status after that" status
has "no devices, from the file" "^Devices: 0"

# --- interfaces other than lo (private netns only) ---
if [ $netns = 1 ] && { ip link add d0 type veth peer name d0p 2>/dev/null ||
	ip link add d0 type dummy 2>/dev/null; }; then
	ip link set d0p up 2>/dev/null   # carrier for the veth end we use
	rm -f "$SOFTRDMA_CONF"
	expect 0 "default without another interface up" status
	has "default device is on lo" "^  rxe0: type roce, netdev lo "
	ip link set d0 mtu 1500 up
	ip link set d0p mtu 9000 2>/dev/null
	ip addr add 192.0.2.10/24 dev d0
	ip addr add 2001:db8::10/64 dev d0 nodad
	expect 0 "default with d0 up and addressed" status
	has "default device is on d0" "^  rxe0: type roce, netdev d0 "
	has "1500-byte netdev gives active MTU 1024" "active mtu 1024$"
	has "d0 GID from its IPv4 address" "gid ::ffff:192\.0\.2\.10"
	has "d0 GID from its IPv6 address" "gid 2001:db8::10"
	gids=$(grep -E '^ +gid ' <<<"$out" | sed 's/.*gid //')
	first=$(head -1 <<<"$gids")
	[ "$first" = "::ffff:192.0.2.10" ] && ok "IPv4 GID first" || bad "first GID is $first"
	last=$(grep -v -e '^::ffff:127\.' -e '^::1$' <<<"$gids" | tail -1)
	case $last in fe80:*) ok "link-local GID last of d0's own" ;; *) echo "note: no link-local address on d0 ($last)" ;; esac
	lo_gids=$(tail -2 <<<"$gids" | tr '\n' ' ')
	[ "$lo_gids" = "::ffff:127.0.0.1 ::1 " ] && ok "then lo's addresses (no device on lo: the default answers on loopback)" ||
		bad "the last GIDs are $lo_gids, expected ::ffff:127.0.0.1 ::1"
	expect 0 "add d0 --type iwarp" add d0 --type iwarp
	ip link set d0 mtu 9000
	expect 0 "status at mtu 9000" status
	has "9000-byte netdev gives 4096" "active mtu 4096$"
	ip link set d0 mtu 2000
	expect 0 "status at mtu 2000" status
	has "2000-byte netdev gives 1024 (IPv4/UDP/BTH/ICRC overhead)" "active mtu 1024$"
	ip link set d0 mtu 4180
	expect 0 "status at mtu 4180" status
	has "4180 = 4096 + 84 gives 4096" "active mtu 4096$"
	ip link set d0 mtu 4179
	expect 0 "status at mtu 4179" status
	has "4179 gives 2048 (a full WRITE with immediate over IPv6 would not fit)" "active mtu 2048$"
	ip link set d0 down
	expect 0 "status with d0 down" status
	has "status shows d0 down" "netdev d0 \(down"
	ip link del d0
	expect 0 "status with d0 deleted" status
	has "status shows the netdev missing" "netdev d0 \(not present\)"
	expect 0 "remove d0 by netdev" remove d0
else
	echo "skip: interface checks need root, a private network namespace and veth or dummy links"
fi

# --- softrdma-run ---
run=$B/softrdma-run
if [ -x "$run" ]; then
	"$run" --help | grep -q '^Usage: softrdma-run' && ok "softrdma-run --help" || bad "softrdma-run --help"
	"$run" >/dev/null 2>&1
	[ $? -eq 2 ] && ok "softrdma-run without a command exits 2" || bad "softrdma-run without a command"
	"$run" --conf >/dev/null 2>&1
	[ $? -eq 2 ] && ok "softrdma-run --conf without a file exits 2" || bad "softrdma-run --conf without a file"
	"$run" --bogus true >/dev/null 2>&1
	[ $? -eq 2 ] && ok "softrdma-run with an unknown option exits 2" || bad "softrdma-run --bogus"
	# the script canonicalises its library directory (relative to itself:
	# ../lib/softrdma in the build tree, the installed layout's path when
	# installed) when it exists, else uses the configured path as is
	rel=$(sed -n "s/^relative_libdir='\(.*\)'$/\1/p" "$run")
	conf_libdir=$(sed -n "s/^configured_libdir='\(.*\)'$/\1/p" "$run")
	real_run=$(readlink -f "$run")
	libdir=$(cd "$(dirname "$real_run")/$rel" 2>/dev/null && pwd) || libdir=$conf_libdir
	v=$(LD_LIBRARY_PATH= "$run" sh -c 'echo "$LD_LIBRARY_PATH"')
	[ -n "$libdir" ] && [ "$v" = "$libdir" ] && ok "softrdma-run sets LD_LIBRARY_PATH=$v" ||
		bad "LD_LIBRARY_PATH is '$v', wanted '$libdir' (no trailing colon)"
	v=$(LD_LIBRARY_PATH=/x/y "$run" sh -c 'echo "$LD_LIBRARY_PATH"')
	[ "$v" = "$libdir:/x/y" ] && ok "softrdma-run keeps the old LD_LIBRARY_PATH after" || bad "LD_LIBRARY_PATH is '$v'"
	printf 'crc = on\n' >"$tmp/rel.conf"
	v=$(cd "$tmp" && "$run" --conf rel.conf -- sh -c 'echo "$SOFTRDMA_CONF"' 2>/dev/null)
	[ "$v" = "$tmp/rel.conf" ] && ok "--conf exports an absolute SOFTRDMA_CONF" || bad "SOFTRDMA_CONF is '$v'"
	v=$("$run" --conf="$tmp/rel.conf" sh -c 'echo "$SOFTRDMA_CONF"' 2>/dev/null)
	[ "$v" = "$tmp/rel.conf" ] && ok "--conf=FILE works" || bad "SOFTRDMA_CONF is '$v'"
	# a file that is not there: an error, not a run on the built-in default
	v=$("$run" --conf "$tmp/nonexistent.conf" sh -c 'echo ran' 2>"$tmp/run.err")
	rc=$?
	[ $rc -eq 2 ] && [ -z "$v" ] && grep -q 'nonexistent.conf' "$tmp/run.err" &&
		ok "--conf with a missing file exits 2, says so, runs nothing" || bad "--conf missing: exit $rc, ran '$v'"
	v=$("$run" -- sh -c 'exit 7')
	[ $? -eq 7 ] && ok "softrdma-run passes the exit status through" || bad "exit status not passed through"
	# a moved tree: the script finds its library directory relative to itself
	mkdir -p "$tmp/moved/bin" "$tmp/moved/bin/$rel"
	moved_lib=$(cd "$tmp/moved/bin/$rel" && pwd)
	cp "$run" "$tmp/moved/bin/"
	v=$(LD_LIBRARY_PATH= "$tmp/moved/bin/softrdma-run" sh -c 'echo "$LD_LIBRARY_PATH"')
	[ "$v" = "$moved_lib" ] && ok "a moved softrdma-run uses its own $rel" || bad "moved: '$v'"
	ln -s "$tmp/moved/bin/softrdma-run" "$tmp/link-run"
	v=$(LD_LIBRARY_PATH= "$tmp/link-run" sh -c 'echo "$LD_LIBRARY_PATH"')
	[ "$v" = "$moved_lib" ] && ok "a symlink to softrdma-run resolves to its tree" || bad "symlink: '$v'"
	rm -rf "$moved_lib"
	v=$(LD_LIBRARY_PATH= "$tmp/moved/bin/softrdma-run" sh -c 'echo "$LD_LIBRARY_PATH"')
	[ -n "$conf_libdir" ] && { [ "$v" = "$conf_libdir" ] || [ "$v" = "$(cd "$conf_libdir" 2>/dev/null && pwd)" ]; } &&
		ok "without $rel it falls back to $conf_libdir" || bad "fallback: '$v'"
else
	echo "skip: softrdma-run not generated"
fi

if [ $fails -ne 0 ]; then
	echo "t_cfg: $fails check(s) failed"
	exit 1
fi
echo "t_cfg: all checks passed"
exit 0
