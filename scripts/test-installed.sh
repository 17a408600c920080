#!/bin/bash
# Runs the conformance tests (tests/conformance/t_*.sh) against an installed
# copy of softrdma instead of the build tree.
#
#   scripts/test-installed.sh [--build DIR] [--root DIR] [--prefix P] [TEST...]
#
# Without --root, installs the build tree DIR (default build/) into a
# temporary root with `cmake --install --prefix P` (default /usr) and
# DESTDIR, and removes it afterwards.  With --root DIR, tests what is
# already installed under DIR (DIR=/ for the system itself: a .deb).
# TEST names (t_devinfo ...) select tests; default: all of them.
#
# The conformance scripts find their programs as $SR_BUILD_DIR/bin/X; this
# script hands them a directory of symbolic links to the installed files
# (bin/softrdmad -> sbin/softrdmad, lib/softrdma -> the private library
# directory), so every program, library and daemon they run is the
# installed one.  Prints one line per test and "N passed, N failed,
# N skipped"; exits 1 if any failed.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
root=
prefix=/usr
tests=()
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--root) root=$2; shift 2 ;;
	--prefix) prefix=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "test-installed: unknown option $1" >&2; exit 2 ;;
	*) tests+=("$1"); shift ;;
	esac
done

tmp=$(mktemp -d /tmp/sr-installed.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
if [ -z "$root" ]; then
	root=$tmp/root
	DESTDIR=$root cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
		{ cat "$tmp/install.log"; echo "test-installed: cmake --install failed"; exit 1; }
fi
root=$(cd "$root" && pwd)

# Find the installed files wherever GNUInstallDirs put them.
find_one() { # DIR NAME TYPE
	find "$root$prefix" -path "$root$prefix/$1" -type "$3" 2>/dev/null | head -1
}
run=$(find_one 'bin/softrdma-run' x f)
cfg=$(find_one 'bin/softrdma-cfg' x f)
demo=$(find_one 'bin/softrdma-demo' x f)
daemon=$(find_one 'sbin/softrdmad' x f)
lib=$(find "$root$prefix" -name libibverbs.so.1 -path '*/softrdma/*' 2>/dev/null | head -1)
for f in run cfg demo daemon lib; do
	[ -n "${!f}" ] || { echo "test-installed: no installed $f under $root$prefix"; exit 1; }
done

view=$tmp/view
mkdir -p "$view/bin" "$view/lib" "$view/tests"
ln -s "$run" "$view/bin/softrdma-run"
ln -s "$cfg" "$view/bin/softrdma-cfg"
ln -s "$demo" "$view/bin/softrdma-demo"
ln -s "$daemon" "$view/bin/softrdmad"
ln -s "$(dirname "$lib")" "$view/lib/softrdma"
# test programs some scripts drive (test_mcast) stay the build tree's; run
# through softrdma-run, they load the installed library first
[ -d "$build/tests" ] && for f in "$build"/tests/*; do ln -s "$f" "$view/tests/"; done
echo "# installed copy: $run, $daemon, $(dirname "$lib")"

if [ ${#tests[@]} -eq 0 ]; then
	for t in "$src"/tests/conformance/t_*.sh; do tests+=("$(basename "$t" .sh)"); done
fi
pass=0 fail=0 skip=0
for t in "${tests[@]}"; do
	t=${t%.sh}
	SR_BUILD_DIR=$view SR_SOURCE_DIR=$src \
		bash "$src/tests/conformance/$t.sh" >"$tmp/$t.log" 2>&1
	rc=$?
	case $rc in
	0) pass=$((pass + 1)); echo "ok: $t" ;;
	77) skip=$((skip + 1)); echo "skip: $t ($(grep -m1 '^SKIP' "$tmp/$t.log"))" ;;
	*) fail=$((fail + 1)); echo "FAIL: $t (exit $rc)"; sed 's/^/    /' "$tmp/$t.log" | grep -v '^    ok:' | tail -40 ;;
	esac
done
echo "installed: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
