#!/bin/bash
# `cmake --install` into temporary roots (DESTDIR), prefixes /usr and
# /opt/softrdma: the installed layout (programs in bin/ and sbin/, the
# libraries only in the private <libdir>/softrdma, no path into the build
# tree), then the installed copy at work: softrdma-run finds its libraries
# and the library finds the installed softrdmad with no environment
# variable, the demo and conformance tests pass from the installed files,
# and a program built with `pkg-config --cflags --libs softrdma` runs on
# the installed libraries without softrdma-run.
# As root the build tree is hidden (a tmpfs over it, in a private mount
# namespace) while the installed copy runs.
. "$(dirname "$0")/../conformance/lib.sh"
sr_init
sr_need_cmd cmake readelf pkg-config cc
build=$(cd "$SR_BUILD_DIR" && pwd -P)

# sr_install ROOT PREFIX: install the build tree there.
sr_install() {
	sr_run "cmake --install --prefix $2 with DESTDIR" -- \
		env DESTDIR="$1" cmake --install "$build" --prefix "$2"
}

# check_layout ROOT PREFIX
check_layout() {
	local root=$1 prefix=$2 p=$1$2 f bad lib
	for f in bin/softrdma-run bin/softrdma-cfg bin/softrdma-demo sbin/softrdmad; do
		[ -x "$p/$f" ] && sr_pass "$prefix/$f installed" || sr_fail "$prefix/$f missing"
	done
	lib=$(cd "$p" && find . -name libibverbs.so.1 | sed 's|^\./||')
	case $lib in
	lib/softrdma/libibverbs.so.1 | lib/*-linux-gnu*/softrdma/libibverbs.so.1)
		sr_pass "libibverbs.so.1 in the private directory $prefix/${lib%/*}" ;;
	*) sr_fail "libibverbs.so.1 found at '$lib', expected <libdir>/softrdma only" ;;
	esac
	pkglib=$p/${lib%/*}
	for f in libibverbs.so.1 libibverbs.so librdmacm.so.1 librdmacm.so libmlx5.so.1 libefa.so.1; do
		[ -e "$pkglib/$f" ] && sr_pass "$f in the private directory" || sr_fail "$f missing from $pkglib"
	done
	for f in softrdma-run.1 softrdma-cfg.8 softrdmad.8 softrdma-demo.1 softrdma.conf.5; do
		f=$(MANPATH=$p/share/man man -w "${f%.*}" 2>/dev/null)
		case $f in
		"$p"/share/man/man?/*) sr_pass "man finds $(basename "$f") in $prefix/share/man" ;;
		*) sr_fail "man -w does not find the installed page (got '$f')" ;;
		esac
	done
	# nothing that could shadow rdma-core outside the private directory
	bad=$(cd "$root" && find . \( -name 'libibverbs*' -o -name 'librdmacm*' -o -name 'libmlx5*' -o -name 'libefa*' \) \
		! -path "*/softrdma/*")
	[ -z "$bad" ] && sr_pass "no RDMA library outside <libdir>/softrdma" || sr_fail "shadowing files: $bad"
	# no run path or string pointing into the build tree
	bad=
	for f in $(cd "$root" && find . -type f); do
		if readelf -d "$root/$f" 2>/dev/null | grep -E 'R(UN)?PATH' | grep -q "$build"; then
			bad="$bad $f"
		fi
	done
	[ -z "$bad" ] && sr_pass "no run path into the build tree" || sr_fail "build-tree run paths in:$bad"
	# (binaries keep it in their debugging information only)
	if grep -rlIF "$build" "$root" >"$SR_TMP/refs" 2>/dev/null; then
		sr_fail "text files naming the build tree: $(tr '\n' ' ' <"$SR_TMP/refs")"
	else
		sr_pass "no installed text file names the build tree"
	fi
}

# "${HIDE[@]}" CMD...: run CMD with the build tree out of sight when we can.
HIDE=()
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	HIDE=(unshare -m sh -c 'mount -t tmpfs sr-hidden "$0" && exec "$@"' "$build")
else
	echo "# not root: the build tree stays visible while the installed copy runs"
fi

check_runs() {
	local p=$1$2 prefix=$2 sock v pid exe
	v=$(LD_LIBRARY_PATH= "$p/bin/softrdma-run" sh -c 'echo "$LD_LIBRARY_PATH"')
	[ "$v" = "$(cd "$pkglib" && pwd)" ] && sr_pass "$prefix: softrdma-run puts $v first" ||
		sr_fail "$prefix: softrdma-run sets LD_LIBRARY_PATH='$v', wanted $pkglib"
	# A daemon of our own (fresh socket name) proves which softrdmad the
	# installed library starts when left to itself.
	sock=sr-t-install-$$-${prefix//\//_}
	if sr_run "$prefix: installed softrdma-demo (build tree hidden), no SOFTRDMA_DAEMON" -- \
		"${HIDE[@]}" env -u SOFTRDMA_DAEMON SOFTRDMA_DAEMON_SOCK="$sock" "$p/bin/softrdma-demo"; then
		sr_expect "$SR_OUT" 'RESULT: PASS' "  $prefix: demo reports PASS"
	fi
	sr_run "$prefix: softrdma-run ibv_devinfo" -- \
		"${HIDE[@]}" env SOFTRDMA_DAEMON_SOCK="$sock" "$p/bin/softrdma-run" ibv_devinfo &&
		sr_expect "$SR_OUT" 'hca_id:[[:space:]]+rxe0' "  $prefix: ibv_devinfo sees rxe0"
	pid=$(SOFTRDMA_DAEMON_SOCK=$sock "$p/bin/softrdma-cfg" status | sed -n 's/^Daemon: running (pid \([0-9]*\)).*/\1/p')
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null)
	[ -n "$pid" ] && [ "$exe" = "$(readlink -f "$p/sbin/softrdmad")" ] &&
		sr_pass "$prefix: the library started the installed daemon $exe" ||
		sr_fail "$prefix: daemon pid '$pid' runs '$exe', wanted $p/sbin/softrdmad"
	SOFTRDMA_DAEMON_SOCK=$sock "$p/bin/softrdma-cfg" stop >/dev/null 2>&1
}

# check_pkgconfig ROOT PREFIX: build a verbs + rdma_cm program with
# `pkg-config --cflags --libs softrdma` alone and run it without softrdma-run.
check_pkgconfig() {
	local p=$1$2 prefix=$2 pc san=
	pc=$(cd "$p" && find . -name softrdma.pc | sed 's|^\./||')
	case $pc in
	lib/pkgconfig/softrdma.pc | lib/*-linux-gnu*/pkgconfig/softrdma.pc) sr_pass "$prefix/$pc installed" ;;
	*) sr_fail "softrdma.pc at '$pc', expected <libdir>/pkgconfig"; return ;;
	esac
	export PKG_CONFIG_PATH=$p/${pc%/*}
	sr_run "$prefix: pkg-config --modversion softrdma" -- pkg-config --modversion softrdma &&
		sr_expect "$SR_OUT" '^[0-9]+\.[0-9]+\.[0-9]+$' "  a version number"
	sr_run "$prefix: pkg-config --variable=libdir softrdma" -- pkg-config --variable=libdir softrdma &&
		[ "$(cd "$(cat "$SR_OUT")" && pwd -P)" = "$(cd "$pkglib" && pwd -P)" ] &&
		sr_pass "  it is the private directory" || sr_fail "  libdir '$(cat "$SR_OUT")' is not $pkglib"
	# a sanitizer build's libraries need the program built with the runtime
	grep -q "^san_preload='..*'" "$p/bin/softrdma-run" && san=-fsanitize=address,undefined
	# shellcheck disable=SC2046 # pkg-config's words
	sr_run "$prefix: cc pc_verbs.c \$(pkg-config --cflags --libs softrdma)" -- \
		cc $san -I"$SR_SOURCE_DIR/tests/verbs" -I"$SR_SOURCE_DIR/src" -o "$SR_TMP/pc_verbs" "$SR_SOURCE_DIR/tests/install/pc_verbs.c" \
		$(pkg-config --cflags --libs softrdma)
	unset PKG_CONFIG_PATH
	[ -x "$SR_TMP/pc_verbs" ] || return
	sr_run "$prefix: pc_verbs runs without softrdma-run (build tree hidden)" -- \
		"${HIDE[@]}" env -u LD_LIBRARY_PATH SOFTRDMA_DAEMON_SOCK="sr-t-install-pc-$$" \
		"$SR_TMP/pc_verbs" "$(cd "$pkglib" && pwd -P)" &&
		sr_expect "$SR_OUT" '^pc_verbs: [0-9]+ passed, 0 failed' "  pc_verbs: every check passed"
	SOFTRDMA_DAEMON_SOCK=sr-t-install-pc-$$ "$p/bin/softrdma-cfg" stop >/dev/null 2>&1
	rm -f "$SR_TMP/pc_verbs"
}

root=$SR_TMP/usr-root
sr_install "$root" /usr && {
	check_layout "$root" /usr
	check_runs "$root" /usr
	check_pkgconfig "$root" /usr
	# the conformance scripts, run against the installed files
	sr_run "conformance tests against the installed copy" -- \
		bash "$SR_SOURCE_DIR/scripts/test-installed.sh" --build "$build" --root "$root" --prefix /usr \
		t_devinfo t_rc_pingpong t_iwarp_devinfo t_cfg &&
		sr_expect "$SR_OUT" '^installed: 4 passed, 0 failed' "  4 conformance tests pass on the installed copy"
}
root=$SR_TMP/opt-root
sr_install "$root" /opt/softrdma && {
	check_layout "$root" /opt/softrdma
	check_runs "$root" /opt/softrdma
	check_pkgconfig "$root" /opt/softrdma
}
sr_finish
