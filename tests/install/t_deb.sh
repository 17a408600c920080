#!/bin/bash
# The Debian package, installed into an isolated root, and the system-wide
# mode there.  Root only: the root is an overlay of / (writes go to a
# tmpfs) in a private mount namespace, entered with chroot, with the source
# and build trees hidden, so only the package's files can answer.
#  - scripts/make-deb.sh --from-build packs this build tree (no compiling;
#    `make deb` packs a hardened build of its own with the same script);
#    dpkg-deb shows the fields and the files where they belong;
#  - dpkg -i installs it; the demo, softrdma-run ibv_devinfo and
#    ibv_rc_pingpong run from /usr, the library starts /usr/sbin/softrdmad,
#    man finds the pages, pkg-config the .pc;
#  - softrdma-cfg system enable: plain ibv_devinfo and ibv_rc_pingpong
#    (no softrdma-run) use softrdma; disable restores rdma-core's library;
#    enable is refused while a kernel RDMA device shows in /sys;
#  - dpkg -r removes every file it installed.
. "$(dirname "$0")/../conformance/lib.sh"
sr_init
[ "$(id -u)" = 0 ] || sr_skip "needs root (mount namespace, overlay root, dpkg)"
sr_need_cmd dpkg dpkg-deb dpkg-shlibdeps fakeroot unshare chroot ibv_devinfo ibv_rc_pingpong
unshare -m true 2>/dev/null || sr_skip "cannot make a mount namespace"
build=$(cd "$SR_BUILD_DIR" && pwd -P)
src=$(cd "$SR_SOURCE_DIR" && pwd -P)

# packing moves no packets: only SR_MAX_TIME bounds it (xz of a sanitized build is slow)
if ! SR_TIMEOUT=$SR_MAX_TIME sr_run "make-deb.sh --from-build" -- bash "$src/scripts/make-deb.sh" --from-build "$build" "$SR_TMP"; then
	sr_finish
fi
deb=$(tail -1 "$SR_OUT")
case $deb in
"$SR_TMP"/softrdma_*_"$(dpkg --print-architecture)".deb) sr_pass "package $(basename "$deb")" ;;
*) sr_fail "unexpected package name '$deb'" ;;
esac
sr_run "dpkg-deb --info" -- dpkg-deb --info "$deb" &&
	sr_expect "$SR_OUT" '^ Package: softrdma$' "  Package: softrdma" &&
	sr_expect "$SR_OUT" '^ Depends: .*libc6' "  Depends computed (libc6 ...)" &&
	sr_reject "$SR_OUT" '^ Depends: .*libibverbs1' "  no dependency on rdma-core's libibverbs1"
dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./||; /\/$/d' >"$SR_TMP/files"
bad=$(grep -Ev '^usr/(bin/softrdma-(run|cfg|demo)|sbin/softrdmad|lib/([^/]*/)?softrdma/lib[a-z0-9_-]+\.so(\.[0-9.]+)?|lib/([^/]*/)?pkgconfig/softrdma\.pc|share/man/man[158]/softrdma[a-z.-]*\.[158]\.gz|share/doc/softrdma/(copyright|changelog\.gz|README\.md\.gz))$' "$SR_TMP/files")
[ -z "$bad" ] && sr_pass "every file of the package is where it belongs ($(wc -l <"$SR_TMP/files") files)" ||
	sr_fail "files out of place: $bad"

# The isolated root: / overlaid in a private mount namespace.
R=$SR_TMP/root
cat >"$SR_TMP/inside.sh" <<'EOF'
# runs as: unshare -m bash inside.sh TMP BUILD SRC DEB -- in a fresh mount namespace
set -u
T=$1 B=$2 S=$3 DEB=$4 R=$1/root
# a sanitizer build's libraries need its runtime first in programs that
# were not built with it; softrdma-run does that, plain programs need it
PLAIN=(env)
[ -n "${5:-}" ] && PLAIN=(env LD_PRELOAD="$5" ASAN_OPTIONS=detect_leaks=0)
mount --make-rprivate /
mount -t tmpfs sr-ovl "$T/ovl" || exit 90
mkdir -p "$T/ovl/u" "$T/ovl/w" "$R"
mount -t overlay overlay -o lowerdir=/,upperdir="$T/ovl/u",workdir="$T/ovl/w" "$R" || exit 91
mount --bind /proc "$R/proc" && mount --bind /dev "$R/dev" || exit 92
mount -t tmpfs sr-tmp "$R/tmp" && mount -t tmpfs sr-run "$R/run" || exit 93
mkdir -p "$R/dev/shm" && mount -t tmpfs sr-shm "$R/dev/shm" || exit 94
# nothing of the build or source trees is visible inside (a tree under
# /tmp or /run is gone already: those are fresh inside)
for d in "$B" "$S"; do
	[ ! -e "$R$d" ] || mount -t tmpfs sr-hide "$R$d" || exit 95
done
cp "$DEB" "$R/tmp/softrdma.deb"
# man-db's trigger would rebuild the whole manual database (a minute)
rm -f "$R/var/lib/man-db/auto-update"
printf 'crc = on\n[rxe0]\ntype = roce\nnetdev = lo\n' >"$R/tmp/lo.conf"
export SOFTRDMA_CONF=/tmp/lo.conf SOFTRDMA_DAEMON_SOCK=sr-t-deb-$$
unset SOFTRDMA_DAEMON LD_LIBRARY_PATH LD_PRELOAD SR_BUILD_DIR
step() { echo "=== $1"; shift; chroot "$R" "$@"; echo "=== rc $?"; }
pingpong() { # ARGS-PREFIX...: a 100-message ibv_rc_pingpong pair in the root
	local port=$((20000 + RANDOM % 20000))
	chroot "$R" "$@" ibv_rc_pingpong -g 0 -n 100 -p $port >"$R/tmp/pp-srv" 2>&1 &
	sleep 1
	chroot "$R" "$@" ibv_rc_pingpong -g 0 -n 100 -p $port 127.0.0.1 2>&1
	local rc=$?
	wait
	return $rc
}
step "dpkg -i" dpkg -i /tmp/softrdma.deb
step "dpkg -L" dpkg -L softrdma
step "demo" softrdma-demo
step "softrdma-run ibv_devinfo" softrdma-run ibv_devinfo
echo "=== softrdma-run ibv_rc_pingpong"; pingpong softrdma-run; echo "=== rc $?"
step "daemon" sh -c 'pid=$(softrdma-cfg status | sed -n "s/^Daemon: running (pid \([0-9]*\)).*/\1/p"); readlink /proc/$pid/exe'
step "man -w" man -w softrdma-cfg softrdma-run softrdmad softrdma.conf softrdma-demo
step "pkg-config" sh -c 'pkg-config --modversion softrdma && pkg-config --libs softrdma'
step "plain ibv_devinfo before" ibv_devinfo -l
step "system status" softrdma-cfg system status
step "system enable" softrdma-cfg system enable
step "ldconfig -p" sh -c 'ldconfig -p | grep "libibverbs.so.1 "'
step "plain ibv_devinfo enabled" "${PLAIN[@]}" ibv_devinfo
echo "=== plain ibv_rc_pingpong enabled"; pingpong "${PLAIN[@]}"; echo "=== rc $?"
step "system disable" softrdma-cfg system disable
step "plain ibv_devinfo disabled" ibv_devinfo -l
step "ld.so.conf.d after disable" ls /etc/ld.so.conf.d
mkdir -p "$R/sys/class/infiniband/mlx5_0"
step "system enable with a kernel device" softrdma-cfg system enable
step "system status with a kernel device" softrdma-cfg system status
rmdir "$R/sys/class/infiniband/mlx5_0" "$R/sys/class/infiniband"
chroot "$R" softrdma-cfg stop >/dev/null 2>&1
step "dpkg -r" dpkg -r softrdma
step "left after dpkg -r" sh -c 'ls /usr/bin/softrdma-* /usr/sbin/softrdmad /usr/lib/*/softrdma /usr/lib/softrdma /usr/share/man/man8/softrdma* 2>/dev/null; true'
EOF
mkdir -p "$SR_TMP/ovl"
sr_run "install into an isolated root and use it" -- \
	unshare -m bash "$SR_TMP/inside.sh" "$SR_TMP" "$build" "$src" "$deb" \
	"$(sed -n "s/^san_preload='\(.*\)'$/\1/p" "$build/bin/softrdma-run")"
out=$SR_OUT
# section NAME: the output of one step; rc NAME: its exit status
section() { awk -v s="=== $1" '$0 == s { on = 1; next } /^=== rc / { if (on) exit } on' "$out"; }
rc() { awk -v s="=== $1" '$0 == s { on = 1; next } on && /^=== rc / { print $3; exit }' "$out"; }
expect() { # DESC STEP RC [ERE]
	local got
	got=$(rc "$2")
	if [ "$got" != "$3" ]; then
		sr_fail "$1: exit '$got', expected $3"
		section "$2" | tail -20 | sed 's/^/    | /'
	elif [ -n "${4:-}" ] && ! section "$2" | grep -Eq -- "$4"; then
		sr_fail "$1: no line matches /$4/"
		section "$2" | tail -20 | sed 's/^/    | /'
	else
		sr_pass "$1"
	fi
}
expect "dpkg -i installs the package" "dpkg -i" 0 'Setting up softrdma'
expect "dpkg -L lists the private library directory" "dpkg -L" 0 '/softrdma/libibverbs\.so\.1$'
expect "the installed demo passes (build tree hidden)" "demo" 0 'RESULT: PASS'
expect "softrdma-run ibv_devinfo shows rxe0" "softrdma-run ibv_devinfo" 0 'hca_id:[[:space:]]+rxe0'
expect "ibv_rc_pingpong through the installed softrdma-run" "softrdma-run ibv_rc_pingpong" 0 '^[0-9]+ bytes in '
expect "the library started /usr/sbin/softrdmad" "daemon" 0 '^/usr/sbin/softrdmad$'
expect "man finds all five pages" "man -w" 0 'softrdma-demo\.1\.gz'
expect "pkg-config finds softrdma.pc" "pkg-config" 0 '^-L/usr/lib/.*softrdma'
# rdma-core's own library, with no kernel RDMA here, finds no device at all
expect "without system mode, plain ibv_devinfo is rdma-core's" "plain ibv_devinfo before" 255 \
	'Failed to get IB devices list'
expect "system status: disabled, no kernel devices" "system status" 0 'kernel RDMA devices: none'
expect "system enable" "system enable" 0 'enabled: /etc/ld.so.conf.d/00-softrdma.conf'
expect "ldconfig resolves libibverbs.so.1 to softrdma's first" "ldconfig -p" 0 '=> /usr/lib/.*softrdma/libibverbs\.so\.1$'
expect "plain ibv_devinfo sees rxe0 in system mode" "plain ibv_devinfo enabled" 0 'hca_id:[[:space:]]+rxe0'
expect "plain ibv_rc_pingpong runs on softrdma in system mode" "plain ibv_rc_pingpong enabled" 0 '^[0-9]+ bytes in '
expect "system disable" "system disable" 0 'disabled'
expect "after disable, plain ibv_devinfo is rdma-core's again" "plain ibv_devinfo disabled" 255 \
	'Failed to get IB devices list'
if section "ld.so.conf.d after disable" | grep -q softrdma; then
	sr_fail "disable left its ld.so.conf.d entry"
else
	sr_pass "disable removed its ld.so.conf.d entry"
fi
expect "enable is refused with a kernel RDMA device present" "system enable with a kernel device" 1 \
	'refusing: this host has kernel RDMA devices \(/sys/class/infiniband/mlx5_0\)'
expect "  status names the kernel device" "system status with a kernel device" 0 'mlx5_0'
expect "dpkg -r removes the package" "dpkg -r" 0 'Removing softrdma'
if [ -z "$(section "left after dpkg -r")" ]; then
	sr_pass "  no file of it is left"
else
	sr_fail "  files left: $(section "left after dpkg -r" | tr '\n' ' ')"
fi
sr_finish
