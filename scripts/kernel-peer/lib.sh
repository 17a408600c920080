# shellcheck shell=bash
# The kernel peer: a qemu guest running Debian's 6.1 kernel with rxe0 and
# siw0, wired to softrdma on this host.  Sourced after
# tests/conformance/lib.sh (and its sr_init); see docs/interop.md.
#
#   namespace KP_NS_H (softrdma)          namespace KP_NS_B (qemu, bridges)
#   veth KP_VETH_H0 198.18.S.1 ------ veth -- bridge KP_BR0 -- tap -- guest eth0 198.18.S.2 rxe0
#   veth KP_VETH_H1 198.19.S.1 ------ veth -- bridge KP_BR1 -- tap -- guest eth1 198.19.S.2 siw0
#
# Link 0 carries RoCE (softrdma's rxe0 on KP_VETH_H0), link 1 iWARP
# (softrdma's siw0 on KP_VETH_H1).  KP_ROCE / KP_IWARP are the command
# prefixes that run a program through softrdma-run on the host with that
# device; `kp-guest run SCRIPT` (KP_GUEST) runs one in the guest.

KP_DIR=$SR_SOURCE_DIR/scripts/kernel-peer
KP_OUT=${KP_OUT:-$SR_BUILD_DIR/kernel-peer}
KP_MTU=${KP_MTU:-9000}
KP_GUEST=("$KP_DIR/kp-guest" run)

# kp_g SCRIPT: runs SCRIPT in the guest now (short commands only).
kp_g() {
	"$KP_DIR/kp-guest" exec "$1"
}

# kp_guest_listening PORT: a TCP listener or an rdma_cm listener on PORT
# in the guest (sr_port_listening's guest:PORT).
kp_guest_listening() {
	local hex
	hex=$(printf '%04X' "$1")
	kp_g "awk '\$2 ~ /:$hex\$/ && \$4 == \"0A\" { f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6 ||
		rdma res show cm_id | grep -q 'state LISTEN .*src-addr [^ ]*:$1 '" >/dev/null 2>&1
}

# kp_setup: builds the guest if needed (skips the test when this host
# cannot), makes the two namespaces and links, boots the guest and waits
# for it.  Everything goes at exit.
kp_setup() {
	local id sub k rc qemu
	[ "$(id -u)" -eq 0 ] || sr_skip "needs root (network namespaces, tap devices)"
	qemu=$(command -v qemu-system-x86_64) || sr_skip "qemu-system-x86_64 is not installed (scripts/install-deps.sh installs it)"
	[ -e /dev/net/tun ] || sr_skip "/dev/net/tun is missing: no tap device for the guest"
	bash "$KP_DIR/build-guest.sh" "$KP_OUT" >"$SR_TMP/build-guest.log" 2>&1
	rc=$?
	# (inside the test's namespace no registry is reachable: make
	# test-interop builds the guest before it enters one)
	[ "$rc" -eq 77 ] && sr_skip "cannot build the guest: $(tail -n 1 "$SR_TMP/build-guest.log")"
	[ "$rc" -eq 0 ] || { cat "$SR_TMP/build-guest.log"; sr_die "building the guest failed"; }
	tail -n 1 "$SR_TMP/build-guest.log"

	id=$(printf '%03x%03x' $(($$ % 4096)) $((RANDOM % 4096)))
	sub=$((RANDOM % 256))
	KP_NS_H=sri-$id-h
	KP_NS_B=sri-$id-b
	sr_netns_add "$KP_NS_H"
	sr_netns_add "$KP_NS_B"
	KP_IP_H0=198.18.$sub.1 KP_IP_G0=198.18.$sub.2
	KP_IP_H1=198.19.$sub.1 KP_IP_G1=198.19.$sub.2
	for k in 0 1; do
		local vh=sriv$id${k}h vb=sriv$id${k}b br=srib$id$k tap=srit$id$k ip
		ip=KP_IP_H$k
		ip link add "$vh" netns "$KP_NS_H" type veth peer name "$vb" netns "$KP_NS_B" &&
			ip -n "$KP_NS_B" link add "$br" type bridge &&
			ip -n "$KP_NS_B" tuntap add dev "$tap" mode tap &&
			ip -n "$KP_NS_B" link set "$vb" master "$br" &&
			ip -n "$KP_NS_B" link set "$tap" master "$br" &&
			ip -n "$KP_NS_H" link set "$vh" mtu "$KP_MTU" &&
			ip -n "$KP_NS_B" link set "$vb" mtu "$KP_MTU" &&
			ip -n "$KP_NS_B" link set "$tap" mtu "$KP_MTU" &&
			ip -n "$KP_NS_B" link set "$br" mtu "$KP_MTU" &&
			ip -n "$KP_NS_H" addr add "${!ip}/24" dev "$vh" &&
			ip -n "$KP_NS_H" link set "$vh" up &&
			ip -n "$KP_NS_B" link set "$vb" up &&
			ip -n "$KP_NS_B" link set "$tap" up &&
			ip -n "$KP_NS_B" link set "$br" up ||
			sr_die "cannot make link $k ($vh, $br, $tap)"
		printf -v "KP_VETH_H$k" %s "$vh"
		printf -v "KP_VETH_B$k" %s "$vb"
		printf -v "KP_BR$k" %s "$br"
		printf -v "KP_TAP$k" %s "$tap"
	done
	echo "+ $KP_NS_H ($KP_IP_H0 $KP_VETH_H0, $KP_IP_H1 $KP_VETH_H1) <-> bridges $KP_BR0 $KP_BR1 in $KP_NS_B <-> guest ($KP_IP_G0 rxe0, $KP_IP_G1 siw0)"

	sr_write_conf "$SR_TMP/kp-roce.conf" "$KP_VETH_H0" roce
	sr_write_conf "$SR_TMP/kp-iwarp.conf" "$KP_VETH_H1" iwarp
	# shellcheck disable=SC2034 # used by the tests
	KP_ROCE=(ip netns exec "$KP_NS_H" env SOFTRDMA_CONF="$SR_TMP/kp-roce.conf" "$SR_RUN")
	# shellcheck disable=SC2034
	KP_IWARP=(ip netns exec "$KP_NS_H" env SOFTRDMA_CONF="$SR_TMP/kp-iwarp.conf" "$SR_RUN")

	export KP_SOCK=$SR_TMP/kp-ctl.sock
	KP_CONSOLE=$SR_TMP/kp-console.log
	KP_PIDFILE=$SR_TMP/kp-qemu.pid
	sr_on_exit 'kp_shutdown'
	# One vCPU: the host has two cores and softrdma needs the other.
	ip netns exec "$KP_NS_B" "$qemu" -machine q35 -cpu max -smp 1 -m 1024 \
		-nodefaults -no-user-config -display none -no-reboot \
		-kernel "$KP_OUT/vmlinuz" -initrd "$KP_OUT/initrd.cpio" \
		-append "console=ttyS0 panic=-1 mitigations=off sri.ip0=$KP_IP_G0/24 sri.ip1=$KP_IP_G1/24 sri.mtu=$KP_MTU" \
		-serial "file:$KP_CONSOLE" \
		-device virtio-serial-pci -chardev "socket,id=ctl,path=$KP_SOCK,server=on,wait=off" \
		-device virtserialport,chardev=ctl,name=sri.ctl \
		-netdev "tap,id=n0,ifname=$KP_TAP0,script=no,downscript=no" -device virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:5e:00:01 \
		-netdev "tap,id=n1,ifname=$KP_TAP1,script=no,downscript=no" -device virtio-net-pci,netdev=n1,romfile=,mac=52:54:00:5e:00:02 \
		-pidfile "$KP_PIDFILE" -daemonize >"$SR_TMP/qemu.log" 2>&1 ||
		sr_skip "qemu cannot start here: $(tail -n 2 "$SR_TMP/qemu.log")"
	kp_wait_boot || return 1
	KP_KERNEL=$(kp_g 'uname -r')
	# The IPv4 RoCE v2 GIDs (the kernel lists its link-local one first).
	KP_GIDX_H=$(sr_gid_index KP_ROCE "$KP_IP_H0")
	KP_GIDX_G=$(kp_g 'ibv_devinfo -v -d rxe0' |
		sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:${KP_IP_G0//./\\.}, RoCE v2\$/\1/p" | head -n 1)
	echo "+ guest up: kernel $KP_KERNEL, $(kp_g 'rdma link show | cut -d" " -f2,4,6 | tr "\n" " "')GID index host $KP_GIDX_H guest ${KP_GIDX_G:-?}"
}

# Boot is bounded by progress: the console keeps growing while the kernel
# and init work; KP_BOOT_STALL seconds with no new console output (or
# KP_BOOT_MAX in all) and the guest is too slow here: skip.
kp_wait_boot() {
	local start=$SECONDS last=$SECONDS size prev=0
	while ! grep -q '^sri-guest: ready' "$KP_CONSOLE" 2>/dev/null; do
		kill -0 "$(cat "$KP_PIDFILE" 2>/dev/null)" 2>/dev/null ||
			{ tail -n 30 "$KP_CONSOLE"; sr_die "qemu ended during boot"; }
		size=$(stat -c %s "$KP_CONSOLE" 2>/dev/null || echo 0)
		[ "$size" != "$prev" ] && prev=$size && last=$SECONDS
		if [ $((SECONDS - last)) -ge "${KP_BOOT_STALL:-120}" ] || [ $((SECONDS - start)) -ge "${KP_BOOT_MAX:-600}" ]; then
			tail -n 20 "$KP_CONSOLE"
			sr_skip "the guest did not boot in $((SECONDS - start)) s (TCG too slow here)"
		fi
		sleep 0.5
	done
	grep -E 'sri-guest: .*failed' "$KP_CONSOLE" && sr_die "the guest's set-up failed (console above)"
	echo "+ guest booted in $((SECONDS - start)) s"
	return 0
}

kp_shutdown() {
	local pid
	pid=$(cat "$KP_PIDFILE" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null
}
