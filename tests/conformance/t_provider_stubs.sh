#!/bin/bash
# softrdma's stand-ins for rdma-core's libmlx5.so.1 and libefa.so.1 export
# every function (at its version node) that Debian's pyverbs, perftest,
# UCX and libfabric import from them, read from their ELF dependencies;
# and every pyverbs module, the mlx5 and efa ones included, imports under
# softrdma-run (pyverbs is linked with -z now: one missing symbol and the
# import fails).
. "$(dirname "$0")/lib.sh"
sr_init
LIBDIR=$SR_BUILD_DIR/lib/softrdma
PY=/usr/bin/python3

consumers=()
for f in /usr/lib/python3/dist-packages/pyverbs/*.so /usr/lib/python3/dist-packages/pyverbs/providers/*/*.so \
	/usr/bin/ib_*_bw /usr/bin/ib_*_lat /usr/lib/x86_64-linux-gnu/ucx/*.so.0 /usr/lib/x86_64-linux-gnu/libfabric.so.1; do
	[ -e "$f" ] && consumers+=("$f")
done
[ ${#consumers[@]} -gt 0 ] || sr_skip "none of pyverbs, perftest, UCX, libfabric is installed"

for lib in mlx5 efa; do
	# "symbol node" pairs the consumers import from the library's nodes
	case $lib in mlx5) node=MLX5_ ;; efa) node=EFA_ ;; esac
	objdump -T "${consumers[@]}" 2>/dev/null |
		awk -v n="($node" '$0 ~ /\*UND\*/ && index($0, n) { v = $(NF - 1); gsub(/[()]/, "", v); print $NF, v }' |
		sort -u >"$SR_TMP/need-$lib"
	objdump -T "$LIBDIR/lib$lib.so.1" | awk '$2 == "g" && $3 == "DF" { print $NF, $(NF - 1) }' |
		sort -u >"$SR_TMP/have-$lib"
	missing=$(comm -23 "$SR_TMP/need-$lib" "$SR_TMP/have-$lib")
	if [ -z "$missing" ]; then
		sr_pass "lib$lib.so.1 stand-in exports all $(wc -l <"$SR_TMP/need-$lib") functions the consumers import, at their nodes"
	else
		sr_fail "lib$lib.so.1 stand-in lacks: $(echo "$missing" | tr '\n' ' ')"
	fi
done

if [ -x "$PY" ] && $PY -c 'import pyverbs' 2>/dev/null; then
	mods=$(cd /usr/lib/python3/dist-packages && find pyverbs -name '*.so' | sed 's/\.cpython.*//; s|/|.|g' | sort)
	sr_run "every pyverbs module imports under softrdma-run ($(echo "$mods" | wc -l) modules)" \
		-- "$SR_RUN" "$PY" -c "import importlib, sys
bad = []
for m in '''$mods'''.split():
    try:
        importlib.import_module(m)
    except Exception as e:
        bad.append('%s: %s' % (m, e))
print('\n'.join(bad) or 'all imported')
sys.exit(1 if bad else 0)"
fi
sr_finish
