#!/bin/busybox sh
# /init of the kernel-peer guest: loads rdma_rxe and siw, addresses the two
# NICs from the kernel command line, adds rxe0 on eth0 and siw0 on eth1,
# then serves the host's commands on the virtio-serial port "sri.ctl".
#
# Kernel command line: sri.ip0=ADDR/LEN sri.ip1=ADDR/LEN [sri.mtu=N]
#
# Control protocol, one request a line: "TAG BASE64", BASE64 a shell
# script.  It runs with its output in a file; the answer is that output,
# then a line "@@TAG@@ STATUS".  A request that starts a program in the
# background (the host's kp_gstart) returns at once.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
ulimit -l unlimited

for ko in /lib/modules/*.ko; do
	insmod "$ko" || echo "sri-guest: insmod $ko failed"
done

ip0= ip1= mtu=1500
for arg in $(cat /proc/cmdline); do
	case $arg in
	sri.ip0=*) ip0=${arg#sri.ip0=} ;;
	sri.ip1=*) ip1=${arg#sri.ip1=} ;;
	sri.mtu=*) mtu=${arg#sri.mtu=} ;;
	esac
done
ip link set lo up
# The NICs and the control port appear once their drivers have probed.
for i in $(seq 1 100); do
	[ -e /sys/class/net/eth1 ] && [ -n "$(ls /sys/class/virtio-ports 2>/dev/null)" ] && break
	sleep 0.1
done
# Two NICs on two links: rdma_cm binds an address to the one RDMA device
# on its interface.
ip link set eth0 mtu "$mtu" up
ip link set eth1 mtu "$mtu" up
ip addr add "$ip0" dev eth0
ip addr add "$ip1" dev eth1
rdma link add rxe0 type rxe netdev eth0 || echo "sri-guest: rdma link add rxe0 failed"
rdma link add siw0 type siw netdev eth1 || echo "sri-guest: rdma link add siw0 failed"

port=
for n in /sys/class/virtio-ports/*; do
	[ "$(cat "$n/name" 2>/dev/null)" = sri.ctl ] && port=/dev/$(basename "$n")
done
echo "sri-guest: ready ($(uname -r), control ${port:-none})"
[ -n "$port" ] || exec sh

# Reads return end-of-file while no host is connected: wait and read on.
exec 3<>"$port"
while :; do
	while read -r tag b64 <&3; do
		echo "$b64" | base64 -d >/tmp/req.sh 2>/dev/null
		(cd /tmp && sh /tmp/req.sh) >/tmp/req.out 2>&1 </dev/null
		rc=$?
		{
			cat /tmp/req.out
			echo
			echo "@@$tag@@ $rc"
		} >&3
	done
	sleep 0.2
done
