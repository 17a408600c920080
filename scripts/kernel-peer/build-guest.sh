#!/usr/bin/env bash
# Builds the kernel-peer guest: Debian's 6.1 kernel (rdma_rxe from its
# linux-image package, siw.ko built from linux-source-6.1 against the
# matching linux-headers, as Debian ships no siw) and an initramfs of
# busybox with rdma-core's tools and providers and their libraries copied
# from this host.
#
#   build-guest.sh OUTDIR
#
# OUTDIR gets vmlinuz, initrd.cpio and stamp.  Nothing is redone while the
# stamp (the versions of every input package and this directory's files)
# is unchanged.  Exit 0 when the guest is there, 77 when this host cannot
# build it (a package missing; scripts/install-deps.sh installs them), 1 on
# an error.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: build-guest.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

skip() {
	echo "build-guest: $*" >&2
	exit 77
}

# The guest's programs: Debian's, run unmodified on both sides.
PROGRAMS="ibv_devinfo ibv_devices ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong
ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat ib_atomic_bw ib_atomic_lat
rping ucmatose udaddy rdma_server rdma_client rstream riostream rdma"
# Kernel modules loaded at boot, each with its dependencies (modprobe
# --show-depends orders them).
MODULES="virtio_pci virtio_net virtio_console crc32_generic crc32c_generic rdma_rxe siw rdma_ucm"
PACKAGES="busybox-static ibverbs-providers ibverbs-utils rdmacm-utils perftest iproute2 libc6 linux-source-6.1"

command -v dpkg-query >/dev/null || skip "not a Debian system"
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		skip "package $p is not installed"
done
for c in depmod modprobe cpio make gcc; do
	command -v "$c" >/dev/null || skip "$c is not installed"
done

# The newest 6.1 headers installed name the kernel ABI to boot.
HDRS=$(find /usr/src -maxdepth 1 -name 'linux-headers-6.1.*-amd64' | sort -V | tail -n 1)
[ -n "$HDRS" ] || skip "no linux-headers-6.1.*-amd64 installed"
ABI=${HDRS#/usr/src/linux-headers-}
SRC_TAR=/usr/src/linux-source-6.1.tar.xz
[ -f "$SRC_TAR" ] || skip "$SRC_TAR not found"

# The stamp: every input's version and this directory's files.
stamp=$(
	{
		echo "abi $ABI"
		dpkg-query -W $PACKAGES "linux-headers-$ABI"
		for prog in $PROGRAMS; do
			sha256sum "$(command -v "$prog")"
		done
		cat "$HERE/build-guest.sh" "$HERE/guest-init.sh"
	} | sha256sum | cut -d' ' -f1
)
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$stamp" ] &&
	[ -f "$OUT/vmlinuz" ] && [ -f "$OUT/initrd.cpio" ]; then
	echo "build-guest: $OUT is up to date (kernel $ABI)"
	exit 0
fi
echo "build-guest: building the guest in $OUT (kernel $ABI)"
rm -f "$OUT/stamp"

WORK=$OUT/work
rm -rf "$WORK"
mkdir -p "$WORK/deb" "$WORK/kernel" "$WORK/siw" "$WORK/root"

# The kernel: Debian's image package, unpacked here (never installed on
# the host).
DEBS=$OUT/debs
mkdir -p "$DEBS"
deb=$(find "$DEBS" -name "linux-image-${ABI}_*.deb" | head -n 1)
if [ -z "$deb" ]; then
	(cd "$DEBS" && apt-get download "linux-image-$ABI") >"$WORK/download.log" 2>&1 ||
		skip "apt-get download linux-image-$ABI failed: $(tail -n 2 "$WORK/download.log")"
	deb=$(find "$DEBS" -name "linux-image-${ABI}_*.deb" | head -n 1)
fi
dpkg-deb -x "$deb" "$WORK/kernel"
KMOD=$WORK/kernel/lib/modules/$ABI

# siw.ko from the kernel's own source, against the headers of that kernel.
tar -xJf "$SRC_TAR" -C "$WORK/siw" --strip-components=5 linux-source-6.1/drivers/infiniband/sw/siw
make -s -C "$HDRS" M="$WORK/siw" CONFIG_RDMA_SIW=m modules -j2 >"$WORK/siw.log" 2>&1 || {
	tail -n 20 "$WORK/siw.log" >&2
	echo "build-guest: building siw.ko failed" >&2
	exit 1
}
mkdir -p "$KMOD/extra"
cp "$WORK/siw/siw.ko" "$KMOD/extra/"
depmod -b "$WORK/kernel" "$ABI"

R=$WORK/root
mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,run,lib/modules,usr/bin,usr/lib,etc/libibverbs.d}
cp /usr/bin/busybox "$R/bin/busybox"
for m in $MODULES; do
	modprobe -d "$WORK/kernel" -S "$ABI" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' >"$WORK/modules.list"
n=0
while read -r ko; do
	n=$((n + 1))
	cp "$ko" "$R/lib/modules/$(printf '%02d' "$n")-$(basename "$ko")"
done <"$WORK/modules.list"

# Programs and providers with every library they load, at the paths the
# host has them.
copy_with_libs() {
	local f lib
	for f in "$@"; do
		mkdir -p "$R$(dirname "$f")"
		cp -L "$f" "$R$f"
		for lib in $(ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]+ \(/ { print $1 }'); do
			[ -e "$R$lib" ] && continue
			mkdir -p "$R$(dirname "$lib")"
			cp -L "$lib" "$R$lib"
		done
	done
}
progs=()
for prog in $PROGRAMS; do
	progs+=("$(command -v "$prog")")
done
# glibc loads libgcc_s when a thread exits (pthread_exit, rping's threads).
copy_with_libs "${progs[@]}" /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so \
	/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so /usr/lib/x86_64-linux-gnu/libgcc_s.so.1
cp /etc/libibverbs.d/rxe.driver /etc/libibverbs.d/siw.driver "$R/etc/libibverbs.d/"
# /lib64 and /lib are where the host has its loader and libraries (usrmerge).
for d in lib lib64; do
	if [ -L "/$d" ] && [ -d "$R/usr/$d" ]; then
		cp -a "$R/$d/." "$R/usr/$d/" 2>/dev/null || true
		rm -rf "${R:?}/$d"
		ln -s "usr/$d" "$R/$d"
	fi
done
echo "root:x:0:0:root:/:/bin/sh" >"$R/etc/passwd"
echo "root:x:0:" >"$R/etc/group"
cp "$HERE/guest-init.sh" "$R/init"
chmod 755 "$R/init"

(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$OUT/initrd.cpio.new"
mv "$OUT/initrd.cpio.new" "$OUT/initrd.cpio"
cp "$WORK/kernel/boot/vmlinuz-$ABI" "$OUT/vmlinuz"
echo "$ABI" >"$OUT/abi"
rm -rf "$WORK"
echo "$stamp" >"$OUT/stamp"
echo "build-guest: done: $(du -h "$OUT/initrd.cpio" | cut -f1) initramfs, kernel $ABI"
