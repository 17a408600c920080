#!/usr/bin/env bash
# Install every Debian 12 package softrdma's build, tests, demo and
# benchmarks use.  Idempotent: returns at once when all are present.
set -euo pipefail

pkgs=(build-essential cmake pkg-config libibverbs-dev librdmacm-dev libisal-dev
      ibverbs-utils rdmacm-utils perftest qperf tshark iproute2 nftables
      clang valgrind gdb strace python3 iperf3 procps time gnuplot-nox)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=sudo
	else
		echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture: answer no, without a prompt
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || {
	echo "install-deps: apt-get install failed" >&2
	exit 1
}
