#!/bin/bash
# The README's demo: softrdma-demo forks a server and a client process that
# move and verify data over RC (WRITE, READ, SEND/RECV) on the test device.
. "$(dirname "$0")/lib.sh"
sr_init
[ -x "$SR_BUILD_DIR/bin/softrdma-demo" ] || sr_die "softrdma-demo is not built"
if sr_run "softrdma-demo verifies every transfer" -- "$SR_RUN" "$SR_BUILD_DIR/bin/softrdma-demo"; then
	sr_expect "$SR_OUT" 'RESULT: PASS' "  demo reports PASS"
fi
sr_finish
