#!/bin/bash
# rdma-core's own test suite (Debian's python3-pyverbs ships run_tests.py
# and tests/test_*.py under /usr/share/doc/rdma-core/tests) through
# softrdma-run, whole, on Soft-RoCE and on Soft-iWARP.
#
# Soft-RoCE: no test may fail or error, and every skip must give a reason
# of one of the kinds below: vendor-only (mlx5, efa, CUDA, VFIO),
# something the kernel's rxe of Debian 12 (6.1) lacks as well, or
# something of this machine.  A new kind of skip fails.
# As root the suite runs where sysfs names the device's netdev
# (with_netdev_entry), which the rdma_cm tests need (SR_PYVERBS_RDMACM=0:
# not, and they skip).
# Soft-iWARP: the tests connect RC QPs by modify_qp alone, which an iWARP
# QP refuses (EINVAL at RTS: it is connected through rdma_cm, as siw's
# is), and siw's QPs report INIT after creation; every other test must
# pass, skip as above, or fail as on siw (below).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SUITE=/usr/share/doc/rdma-core/tests
[ -x "$PY" ] && $PY -c 'import pyverbs' 2>/dev/null || sr_skip "python3-pyverbs is not installed"
[ -e "$SUITE/run_tests.py" ] || sr_skip "rdma-core's test suite ($SUITE) is not installed"
sr_init
cp -r "$SUITE" "$SR_TMP/suite" && gunzip -fq "$SR_TMP"/suite/*.gz 2>/dev/null
mv "$SR_TMP/suite" "$SR_TMP/tests"

# Skip reasons: vendor-only, absent from rxe/siw on Debian 12, this machine.
ALLOWED='non MLX5 device|not an MLX5 device|non EFA device|cuda-python|PCI device must be passed'
ALLOWED+='|Allocating dmabuf is not supported'
ALLOWED+='|Create QP type 8 is not supported|Raw Packet QP'
# RC atomic write (IBV_QP_EX_WITH_ATOMIC_WRITE): rxe has it from Linux 6.2, not 6.1
ALLOWED+='|Extended QP is not supported on this device'
# tag matching: a CQ with IBV_WC_EX_WITH_TM_INFO is refused (docs/verbs.md)
ALLOWED+='|^Extended CQ is not supported'
# mlx5dv_ts_to_ns converts a free-running timestamp: mlx5's own
ALLOWED+='|Converting timestamp to nanoseconds is not supported'
ALLOWED+='|no huge pages of size'
# the rdma_cm tests find the device's netdev only in the kernel's sysfs
# (/sys/class/infiniband/DEV/device/net/), where a userspace device has no entry
ALLOWED+="|^Device (rxe|siw)0 doesn't have net interface"
# and on iWARP what siw lacks: UC, UD, atomics, memory windows (ibv_alloc_mw: EOPNOTSUPP),
# extended QPs (siw's provider has no create_qp_ex)
IW_ALLOWED='Create (UC|UD) QP|Create QP type 4 is not supported|Atomic operations are not supported'
IW_ALLOWED+='|Create MW is not supported|Create memory window of type 3 is not supported'
# ODP of what iWARP does not carry (UD, atomics): odp_caps say so
IW_ALLOWED+='|ODP is unavailable - Operation not supported on this device'
# and XRC (siw has none)
IW_ALLOWED+='|Create XRCD is not supported'
# mlx5's UDP source port test wants a RoCEv2 GID, which an iWARP port has none of
IW_ALLOWED+="|^No supported port is up, can't run traffic"
# rdma_cm multicast is UD's
IW_ALLOWED+='|^Multicast is not supported on this device'


# skip_reasons FILE: each skipped test's reason, one a line (unittest quotes it
# with ' or, when it holds a ', with ")
skip_reasons() {
	sed -n "s/.* \.\.\. skipped '\(.*\)'\$/\1/p; s/.* \.\.\. skipped \"\(.*\)\"\$/\1/p" "$1"
}

# with_netdev_entry DEV NETDEV CMD...: runs CMD where the kernel's sysfs
# names NETDEV as DEV's network interface (/sys/class/infiniband/DEV/device/net/NETDEV),
# the one place the rdma_cm tests look for it: as root, in a mount
# namespace of its own whose /sys/class is a tmpfs holding that entry, with
# every other class bound back as it is; otherwise CMD as it is (those
# tests skip: a userspace device has no sysfs entry).
netdev_entry() {
	[ "${SR_PYVERBS_RDMACM:-1}" = 1 ] && [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null
}
with_netdev_entry() {
	local dev=$1 net=$2
	shift 2
	if ! netdev_entry; then
		"$@"
		return
	fi
	mkdir -p "$SR_TMP/class"
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare -m -- bash -c 'set -e; t=$1 dev=$2 net=$3; shift 3
		mount --make-rprivate /
		mount --bind /sys/class "$t"
		mount -t tmpfs softrdma-class /sys/class
		for c in "$t"/*; do
			[ "${c##*/}" = infiniband ] && continue
			mkdir "/sys/class/${c##*/}" && mount --bind "$c" "/sys/class/${c##*/}"
		done
		mkdir -p "/sys/class/infiniband/$dev/device/net/$net"
		exec "$@"' with_netdev_entry "$SR_TMP/class" "$dev" "$net" "$@"
}

# suite LABEL CONF DEV [ALLOWED]: runs the suite; sets OUT
suite() {
	local label=$1 conf=$2 dev=$3 allowed=$ALLOWED${4:+|$4}
	LABEL=$label
	sr_new_log "$SR_RUN" "$PY" tests/run_tests.py -v
	OUT=$SR_OUTFILE
	# the suite's own DeprecationWarnings would split a test's "... ok" line
	(cd "$SR_TMP" && PYTHONWARNINGS=ignore::DeprecationWarning SOFTRDMA_CONF=$conf \
		with_netdev_entry "$dev" lo timeout -k 5 600 "$SR_RUN" "$PY" tests/run_tests.py -v) >"$OUT" 2>&1
	local ran skipped failed errors
	# unittest's summary: "Ran N tests", then "OK (skipped=S)" or
	# "FAILED (failures=F, errors=E, skipped=S)"; passed is what is left
	ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$OUT")
	skipped=$(sed -n 's/^\(OK\|FAILED\) (.*skipped=\([0-9]*\).*/\2/p' "$OUT")
	failed=$(sed -n 's/^FAILED (.*failures=\([0-9]*\).*/\1/p' "$OUT")
	errors=$(sed -n 's/^FAILED (.*errors=\([0-9]*\).*/\1/p' "$OUT")
	PASSED=$((${ran:-0} - ${skipped:-0} - ${failed:-0} - ${errors:-0}))
	N_BAD=$((${failed:-0} + ${errors:-0}))
	echo "# $label: ran ${ran:-?}, passed $PASSED, skipped ${skipped:-0}, failed ${failed:-0}, errors ${errors:-0}"
	skip_reasons "$OUT" >"$SR_TMP/skips"
	sort "$SR_TMP/skips" | uniq -c | sort -rn | sed 's/^/#   skip: /'
	[ "$(grep -c '' "$SR_TMP/skips")" -eq "${skipped:-0}" ] && sr_pass "$label: every skip's reason was read" ||
		sr_fail "$label: $(grep -c '' "$SR_TMP/skips") skip reasons read, ${skipped:-0} skips"
	if grep -Ev "$allowed" "$SR_TMP/skips" >"$SR_TMP/odd-skips"; then
		sr_fail "$label: skips for reasons rxe/siw would not give: $(sort -u "$SR_TMP/odd-skips" | tr '\n' ' ')"
	else
		sr_pass "$label: every skip is vendor-only, absent from rxe/siw, or of this machine"
	fi
	[ "${ran:-0}" -ge 250 ] && sr_pass "$label: the whole suite ran ($ran tests)" ||
		sr_fail "$label: only ${ran:-no} tests ran"
}

suite "Soft-RoCE" "$SR_CONF" rxe0
sr_expect "$OUT" '^OK \(skipped=[0-9]+\)$' "Soft-RoCE: no test failed or errored" || true
[ "$PASSED" -ge 89 ] && sr_pass "Soft-RoCE: at least 89 tests passed" || sr_fail "Soft-RoCE: only $PASSED tests passed"
# passed NAME...: in the last suite's output, each test's own line (or, for a test with a docstring,
# the line after it) ends in "... ok"
passed() {
	local t
	for t in "$@"; do
		if awk -v t="$t" 'index($0, "." t ")") { w = 2 } w && /\.\.\. ok$/ { ok = 1 } w { w-- } END { exit !ok }' "$OUT"; then
			sr_pass "$LABEL: $t passed"
		else
			sr_fail "$LABEL: $t did not pass: $(grep -A1 "\.$t)" "$OUT" | tr '\n' ' ')"
		fi
	done
}
# memory windows, as rxe has them
passed test_mw_type1 test_invalidate_mw_type1 test_mw_type2 test_mw_type2_invalidate_local \
	test_mw_type2_invalidate_remote test_mw_type2_invalidate_dealloc test_reg_mw_wrong_type test_qp_ex_rc_bind_mw
# completion timestamps
passed test_timestamp_real_time_rc_traffic
# device memory
passed test_create_dm test_destroy_dm test_create_dm_bad_flow test_destroy_dm_bad_flow test_dm_write \
	test_dm_write_bad_flow test_dm_read test_multi_process_alloc_dm test_create_dm_mr test_dm_bad_access \
	test_dm_bad_registration test_dm_traffic test_dm_remote_traffic
# on-demand paging
passed test_odp_rc_traffic test_odp_rc_atomic_cmp_and_swp test_odp_rc_atomic_fetch_and_add \
	test_odp_rc_rdma_read test_odp_rc_rdma_write test_odp_implicit_rc_traffic test_odp_ud_traffic \
	test_odp_rc_srq_traffic test_odp_sync_prefetch_rc_traffic test_odp_async_prefetch_rc_traffic \
	test_odp_implicit_sync_prefetch_rc_traffic test_odp_implicit_async_prefetch_rc_traffic \
	test_odp_prefetch_sync_no_page_fault_rc_traffic test_odp_prefetch_async_no_page_fault_rc_traffic
# XRC
passed test_qp_ex_xrc_send test_qp_ex_xrc_send_imm test_xrc_traffic_cq_ex test_xrc_atomic_cmp_and_swap \
	test_xrc_atomic_fetch_and_add test_ro_xrc_traffic test_odp_xrc_traffic
# import (within one process)
passed test_imported_rc_ex_rdma_write test_import_dm
# rdma_cm, where the suite finds the device's netdev (with_netdev_entry)
netdev_entry &&
	passed test_rdmacm_sync_traffic test_rdmacm_async_traffic test_rdmacm_async_read test_rdmacm_async_write \
		test_rdmacm_async_reject_traffic test_rdmacm_async_traffic_external_qp test_rdmacm_async_udp_traffic \
		test_rdmacm_async_multicast_traffic test_rdmacm_async_ex_multicast_traffic \
		test_rdmacm_async_ex_leave_multicast_traffic
# parent domains
passed test_without_allocators_rc_traffic test_default_allocators_rc_traffic test_mem_align_rc_traffic \
	test_mem_align_ud_traffic test_mem_align_srq_excq_rc_traffic

IW_CONF=$SR_TMP/iwarp.conf
sr_write_conf "$IW_CONF" lo iwarp
suite "Soft-iWARP" "$IW_CONF" siw0 "$IW_ALLOWED"
# every failure and error must be one siw gives too: each test's first
# exception, beside its own verbose line (the rdma_cm tests' players are
# child processes: the test says only "Exception in active/passive side
# occurred", its line what each player got).  siw's:
#  - RTS by modify_qp without a connection: EINVAL; a new QP reports INIT;
#  - test_rdmacm_async_udp_traffic: a UD QP (EOPNOTSUPP: siw has none);
#  - test_rdmacm_async_traffic: asserts the ACK timeout it set, which an
#    iWARP QP has none of (siw's query gives 0; the assertion says nothing);
#  - test_rdmacm_async_traffic_external_qp: the passive player moves its
#    own QP through RTR to RTS before it accepts, as on IB, which an iWARP
#    QP refuses without its connection (EINVAL); and the active one waits
#    for CONNECT_RESPONSE, which iWARP never gives (its connect ends
#    ESTABLISHED).
#  - test_rdmacm_async_write, at times: the target reads its buffer once
#    the writer's WRITE has completed, which on iWARP (siw too) means sent,
#    not placed: no response acknowledges a Write.
SIW_BAD='Failed to modify QP state to RTS\. Errno: 22|^test_query_rc_qp => .*IBV_QPS_INIT: 1> != 0'
SIW_BAD+='|^test_rdmacm_async_udp_traffic => .*Failed to Create QP\. Errno: 95'
SIW_BAD+='|^test_rdmacm_async_traffic => Exception: .*Player (active|passive) got: ?$'
SIW_BAD+='|^test_rdmacm_async_traffic_external_qp => .*Failed to modify QP\. Errno: 22'
SIW_BAD+='|^test_rdmacm_async_write => .*Player passive got: Data validation failure'
awk '/^test_[a-z0-9_]+ \(tests\./ { v[$1] = $0 }
	/^(ERROR|FAIL): / { t = $2; next }
	t && /^[A-Za-z_.]*(Error|Exception): / { print t " => " $0 " | " v[t]; t = "" }' "$OUT" >"$SR_TMP/iw-bad"
n_bad=$(grep -c '' "$SR_TMP/iw-bad")
n_siw=$(grep -Ec "$SIW_BAD" "$SR_TMP/iw-bad")
if [ "$N_BAD" -eq "$n_bad" ] && [ "$n_bad" -eq "$n_siw" ]; then
	sr_pass "Soft-iWARP: all $N_BAD failures are siw's (RTS without a connection: EINVAL; a new QP reports INIT; rdma_cm: UD, the ACK timeout, CONNECT_RESPONSE)"
else
	sr_fail "Soft-iWARP: $N_BAD failures, $n_bad read, $n_siw of them siw's:"
	grep -Ev "$SIW_BAD" "$SR_TMP/iw-bad" | head
fi
[ "$PASSED" -ge 25 ] && sr_pass "Soft-iWARP: at least 25 tests passed" || sr_fail "Soft-iWARP: only $PASSED tests passed"
# what needs no connected QP
passed test_create_dm test_destroy_dm test_dm_write test_dm_read test_create_dm_mr test_dm_bad_access
sr_finish
