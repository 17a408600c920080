#!/bin/sh
# Installs the Debian 12 packages that softrdma's build, tests, demo and
# benchmarks need.  Safe to run again: returns at once when everything is
# there, and otherwise runs `apt-get update` once and installs only what
# is missing.  Needs root (or sudo).  Exit status 0 when all packages are
# installed, non-zero with a message otherwise.
set -u

PACKAGES="
build-essential cmake pkg-config
libibverbs-dev librdmacm-dev libisal-dev
ibverbs-utils rdmacm-utils perftest qperf
tshark iproute2 nftables
clang libclang-rt-dev valgrind gdb strace
python3 iperf3 procps time gnuplot-nox
ucx-utils openmpi-bin libopenmpi-dev libfabric-bin python3-pyverbs
tgt libiscsi-bin libiscsi-dev fio linux-perf libdapl2 dapl2-utils
ceph-mon ceph-mgr ceph-osd ceph-common
man-db dpkg-dev fakeroot lintian
qemu-system-x86 busybox-static linux-source-6.1 linux-headers-amd64 kmod cpio
"

die() {
	echo "install-deps: $*" >&2
	exit 1
}

missing=
for p in $PACKAGES; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
	[ "$status" = "install ok installed" ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "install-deps: all packages are installed"
	exit 0
fi
echo "install-deps: installing:$missing"

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script is for Debian 12"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || die "run as root (or install sudo)"
	SUDO=sudo
fi

export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer "no" ahead of
# time so that the installation never stops at a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
	$SUDO debconf-set-selections || die "debconf-set-selections failed"

$SUDO apt-get update || die "apt-get update failed"
# shellcheck disable=SC2086 # one package per word
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing ||
	die "apt-get install failed for:$missing"

still=
for p in $missing; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
	[ "$status" = "install ok installed" ] || still="$still $p"
done
[ -z "$still" ] || die "still not installed:$still"
echo "install-deps: done"
