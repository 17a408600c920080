#!/usr/bin/env bash
# make test-interop / test-interop-full: builds the guest here, where the
# package registry is reachable (the test runs in namespaces of its own,
# without a network), then runs tests/interop/t_kernel_peer.sh.
#   run.sh BUILD-DIR [ci|full]
# A skip (exit 77: no qemu, no root, no guest, too slow a guest) is said
# and is not a failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD-DIR [ci|full]}
bash "$here/build-guest.sh" "$build/kernel-peer"
rc=$?
if [ "$rc" -eq 0 ]; then
	SR_BUILD_DIR=$(cd "$build" && pwd) KP_SUITE=${2:-ci} bash "$here/../../tests/interop/t_kernel_peer.sh"
	rc=$?
fi
if [ "$rc" -eq 77 ]; then
	echo "test-interop: skipped (the reason is above)"
	exit 0
fi
exit "$rc"
