#!/bin/bash
# Builds the Debian package softrdma_VERSION_ARCH.deb (make deb).
#
#   scripts/make-deb.sh [--from-build DIR] [OUTDIR]   (default: the source tree's top)
#
# --from-build DIR packs an existing build tree (cmake --install --prefix
# /usr, no compiling: the install tests use it; the libraries then live in
# /usr/lib/softrdma, as GNUInstallDirs puts them for a tree configured for
# another prefix).  Without it the package is built as for Debian:
# a binary package made the way dh does it, without a debian/ source tree:
# the tree is configured for prefix /usr with dpkg-buildflags' hardening
# flags in build-deb/, installed into a staging root (cmake --install,
# DESTDIR), binaries stripped, man pages and changelog compressed, the
# dependencies computed by dpkg-shlibdeps, then dpkg-deb --root-owner-group.
# Runs lintian on the result when it is installed.  Prints the path of the
# .deb last.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
from=
if [ "${1:-}" = --from-build ]; then
	from=$(cd "$2" && pwd)
	shift 2
fi
out=${1:-$src}
build=${from:-$src/build-deb}
stage=$build/deb-stage
jobs=$(nproc)

version=$(sed -n 's/^project(softrdma VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
[ -n "$version" ] || { echo "make-deb: no version in CMakeLists.txt" >&2; exit 1; }

if [ -z "$from" ]; then
	# hardening and optimisation as every Debian package gets them
	export DEB_BUILD_MAINT_OPTIONS=hardening=+all
	CFLAGS=$(dpkg-buildflags --get CFLAGS)
	CPPFLAGS=$(dpkg-buildflags --get CPPFLAGS)
	LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
	cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=None -DCMAKE_INSTALL_PREFIX=/usr \
		-DCMAKE_C_FLAGS="$CFLAGS $CPPFLAGS" -DCMAKE_EXE_LINKER_FLAGS="$LDFLAGS" \
		-DCMAKE_SHARED_LINKER_FLAGS="$LDFLAGS" >/dev/null
	cmake --build "$build" -j"$jobs" >/dev/null
fi
rm -rf "$stage"
DESTDIR=$stage cmake --install "$build" --prefix /usr >/dev/null

# who builds it: as dch, DEBFULLNAME and DEBEMAIL, else git's identity
name=${DEBFULLNAME:-$(git -C "$src" config user.name 2>/dev/null || echo "softrdma developers")}
mail=${DEBEMAIL:-$(git -C "$src" config user.email 2>/dev/null || echo "softrdma@localhost")}
maint="$name <$mail>"

doc=$stage/usr/share/doc/softrdma
mkdir -p "$doc" "$stage/DEBIAN"
# strip as dh_strip does (no -dbgsym package)
find "$stage" -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c \
	'file -b "$1" | grep -q ELF && strip --remove-section=.comment --remove-section=.note --strip-unneeded "$1"' _ {} \;
find "$stage/usr/share/man" -type f -name '*.[0-9]' -exec gzip -9n {} +
cp "$src/README.md" "$doc/README.md"
gzip -9n "$doc/README.md"
cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: softrdma
Comment: softrdma's authors have not chosen a licence yet.  The headers
 it is built against are rdma-core's (libibverbs-dev, librdmacm-dev); no
 rdma-core code is included.

Files: *
Copyright: 2026 the softrdma authors
License: none-chosen
 No licence has been chosen yet; until one is, all rights are reserved
 by the softrdma authors.
EOF
changes=$(git -C "$src" log -1 --format='%h' 2>/dev/null || echo "a source tree")
date=$(git -C "$src" log -1 --format=%aD 2>/dev/null || date -R)
{
	echo "softrdma ($version) unstable; urgency=medium"
	echo
	echo "  * Built from commit $changes."
	echo
	echo " -- $maint  $date"
} | gzip -9n >"$doc/changelog.gz"

# dependencies: what the binaries need from other packages; softrdma's own
# private libraries resolve inside the staging root
mkdir -p "$build/shlibdeps/debian"
printf 'Source: softrdma\n\nPackage: softrdma\nArchitecture: any\n' >"$build/shlibdeps/debian/control"
elves=$(find "$stage/usr" -type f -exec sh -c 'file -b "$1" | grep -q ELF && echo "$1"' _ {} \;)
pkglib=$(dirname "$(find "$stage" -name libibverbs.so.1 | head -1)")
# shellcheck disable=SC2086 # one file per word
deps=$(cd "$build/shlibdeps" && dpkg-shlibdeps -O -l"$pkglib" $elves 2>/dev/null |
	sed -n 's/^shlibs:Depends=//p')
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<EOF
Package: softrdma
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $size
Depends: $deps
Recommends: ibverbs-utils, rdmacm-utils
Suggests: libibverbs-dev, librdmacm-dev, perftest
Section: net
Priority: optional
Description: userspace Soft-RoCE and Soft-iWARP (RDMA without RDMA hardware)
 softrdma is RDMA without RDMA hardware and without a kernel module: a
 userspace Soft-RoCE (RoCEv2 over UDP, wire-compatible with the kernel's
 rxe) and Soft-iWARP (RDMAP/DDP/MPA over TCP, wire-compatible with siw)
 behind libibverbs.so.1 and librdmacm.so.1 libraries that are
 ABI-compatible with rdma-core 44.  Unmodified RDMA programs
 (ibv_rc_pingpong, rping, perftest, your own) run on it through
 softrdma-run, in containers and on CI runners.
 .
 The libraries live in a private directory and never shadow a system
 rdma-core; softrdma-cfg system enable makes them the system's on hosts
 without RDMA hardware.
EOF
(cd "$stage" && find usr -type f -exec md5sum {} + | sort -k2) >"$stage/DEBIAN/md5sums"
deb=$out/softrdma_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
if command -v lintian >/dev/null 2>&1; then
	echo "make-deb: lintian $deb"
	lintian --info --display-info "$deb" || true
fi
echo "$deb"
