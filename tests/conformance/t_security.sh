#!/bin/bash
# softrdma and another local Unix user (issue 15 items 1-6 and 8, issue 11
# item 5).  The test creates a user ("mallory", removed at exit) and runs
# in a network namespace of its own, so the daemon it starts is alone on
# UDP port 4791.  Checks:
#  - a daemon mallory started is not trusted by root's programs, and
#    softrdma-cfg status says whose it is;
#  - root's daemon keeps only CAP_NET_ADMIN, with no_new_privs;
#  - a setuid program does not take the daemon's path (or its socket
#    name, or its configuration) from the environment;
#  - security_test.py: listens, forged datagrams, QP1, quotas, CM wills,
#    QPN predictability, malformed and flooding IPC against root's daemon;
#  - mallory's rping on 127.0.0.1 cannot take the connections of root's
#    wildcard rping server;
#  - mallory's own RC, UD and rdma_cm programs work with root's daemon.
# Skips (77) without root.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || sr_skip "needs root (creates a user and a network namespace)"
sr_need_cmd useradd userdel runuser unshare ip python3 pgrep ibv_rc_pingpong ibv_ud_pingpong rping
sr_init
[ -n "${SR_IN_PRIVATE_NETNS:-}" ] || sr_skip "needs a network namespace of its own (sr_init makes one as root)"
HERE=$(cd "$(dirname "$0")" && pwd)
B=$SR_BUILD_DIR/bin
export SOFTRDMA_DAEMON_SOCK=sr-t-security-$$
export SOFTRDMA_DAEMON_LOG=$SR_TMP/daemon.log
SR_TIMEOUT=${SR_TIMEOUT:-60}

# mallory cannot read the build tree (it may be under /root): a copy of
# what she runs, readable by all.
chmod 755 "$SR_TMP"
chmod 644 "$SR_CONF"
STAGE=$SR_TMP/stage
mkdir -p "$STAGE/bin" "$STAGE/lib/softrdma"
cp "$B/softrdmad" "$B/softrdma-run" "$B/softrdma-cfg" "$STAGE/bin/" &&
	cp -P "$SR_BUILD_DIR"/lib/softrdma/* "$STAGE/lib/softrdma/" || sr_die "cannot stage the build"
chmod -R a+rX "$STAGE"

SR_USER=srsec$$
useradd -M -r -s /usr/sbin/nologin -d /nonexistent "$SR_USER" >"$SR_TMP/useradd.out" 2>&1 ||
	sr_die "useradd failed: $(cat "$SR_TMP/useradd.out")"
# Only this test's user is killed: every process it has, this test started.
sr_on_exit 'pkill -KILL -u "$SR_USER" 2>/dev/null; sleep 0.3; userdel "$SR_USER" 2>/dev/null'
MUID=$(id -u "$SR_USER")
MGID=$(id -g "$SR_USER")
echo "# second user $SR_USER uid $MUID"
# as_mallory CMD...: a script, so that timeout and sr_pair can run it
AS_MALLORY=$SR_TMP/as-mallory
cat >"$AS_MALLORY" <<EOF
#!/bin/sh
exec runuser -u "$SR_USER" -- env SOFTRDMA_DAEMON_SOCK="$SOFTRDMA_DAEMON_SOCK" SOFTRDMA_CONF="$SR_CONF" \
	SOFTRDMA_DAEMON_LOG="\${MALLORY_LOG:-}" "\$@"
EOF
chmod 755 "$AS_MALLORY"
daemon_pid() {
	"$B/softrdma-cfg" status 2>/dev/null | sed -n 's/^Daemon: running (pid \([0-9]*\)).*/\1/p'
}

# --- item 2: a daemon another user started is not trusted ---
export MALLORY_LOG=$SR_TMP/mallory-daemon.log
install -m 644 -o "$SR_USER" /dev/null "$MALLORY_LOG"
sr_run "mallory starts softrdmad first" -- "$AS_MALLORY" "$STAGE/bin/softrdmad" --background --idle-exit 120
MALLORY_LOG=
mpid=$(pgrep -u "$SR_USER" -x softrdmad)
port=$(sr_free_port)
SR_TIMEOUT=15 sr_run_fail "root's ibv_rc_pingpong does not use mallory's daemon" \
	-- "$SR_RUN" ibv_rc_pingpong -g 0 -p "$port"
sr_expect "$SR_OUT" "softrdmad .*uid $MUID" "  and says whose daemon it is"
sr_run "softrdma-cfg status" -- "$B/softrdma-cfg" status
sr_expect "$SR_OUT" "^Daemon: running \(pid $mpid\) as uid $MUID, not trusted" "  says the daemon is not trusted"
[ -n "$mpid" ] && kill "$mpid"
for _ in $(seq 50); do pgrep -u "$SR_USER" -x softrdmad >/dev/null || break; sleep 0.1; done

# --- item 6: a setuid program ignores SOFTRDMA_DAEMON (and the rest) ---
cp "$B/softrdma-cfg" "$STAGE/bin/softrdma-cfg-suid"
chmod 4755 "$STAGE/bin/softrdma-cfg-suid"
evil=$STAGE/evil
# (python3 keeps the euid it is started with; a shell would drop it)
printf '#!/usr/bin/python3\nimport os\nopen("%s", "w").write(str(os.geteuid()))\n' "$SR_TMP/evil.ran" >"$evil"
chmod 755 "$evil"
runuser -u "$SR_USER" -- env SOFTRDMA_DAEMON="$evil" SOFTRDMA_DAEMON_SOCK=sr-t-security-suid-$$ \
	SOFTRDMA_CONF=/etc/shadow timeout 20 "$STAGE/bin/softrdma-cfg-suid" start --idle-exit 1 >"$SR_TMP/suid.out" 2>&1
if [ -e "$SR_TMP/evil.ran" ]; then
	sr_fail "a setuid softrdma-cfg ran \$SOFTRDMA_DAEMON as euid $(cat "$SR_TMP/evil.ran")"
else
	sr_pass "a setuid softrdma-cfg does not run \$SOFTRDMA_DAEMON"
fi
if grep -q 'root:' "$SR_TMP/suid.out"; then
	sr_fail "a setuid softrdma-cfg printed /etc/shadow (\$SOFTRDMA_CONF)"
else
	sr_pass "  nor reads \$SOFTRDMA_CONF"
fi
rm -f "$STAGE/bin/softrdma-cfg-suid"
# the daemon it started (on the default socket name, as it ignored ours)
SOFTRDMA_DAEMON_SOCK=softrdmad-v1 "$B/softrdma-cfg" stop >/dev/null 2>&1

# --- root's daemon ---
sr_run "root starts softrdmad" -- "$B/softrdma-cfg" start --idle-exit 300
dpid=$(daemon_pid)
[ -n "$dpid" ] || sr_die "no daemon after softrdma-cfg start"
sr_on_exit "kill $dpid 2>/dev/null"

# --- item 6: capabilities ---
caps() { sed -n "s/^$1:[[:space:]]*//p" "/proc/$dpid/status"; }
net_admin=0000000000001000 # 1 << CAP_NET_ADMIN (12)
if [ "$(caps CapEff)" = $net_admin ] && [ "$(caps CapPrm)" = $net_admin ] && [ "$(caps CapBnd)" = $net_admin ]; then
	sr_pass "root's daemon keeps only CAP_NET_ADMIN (effective, permitted, bounding)"
else
	sr_fail "root's daemon capabilities: CapEff $(caps CapEff) CapPrm $(caps CapPrm) CapBnd $(caps CapBnd)"
fi
if [ "$(caps NoNewPrivs)" = 1 ]; then sr_pass "  and no_new_privs"; else sr_fail "  no_new_privs not set"; fi

# --- items 1, 3, 4, 5, 6, issue 11 item 5: the protocol ---
# (IPC only: no packet moves for long stretches, which the hang watchdog
# would take for a hang at its default)
SR_TIMEOUT=240 sr_run "security_test.py (mallory against root's daemon)" \
	-- timeout 240 python3 "$HERE/security_test.py" "$MUID" "$MGID"
cat "$SR_OUT"

# --- item 1 with rping: mallory on 127.0.0.1 vs root on any address ---
port=$(sr_free_port)
sr_new_log "$SR_RUN" rping -s -a 0.0.0.0 -p "$port" -C 3 -v
rout=$SR_OUTFILE
timeout -k 5 "$SR_TIMEOUT" "$SR_RUN" rping -s -a 0.0.0.0 -p "$port" -C 3 -v >"$rout" 2>&1 </dev/null &
rpid=$!
SR_PIDS+=("$rpid")
sr_wait_listen "cm:$port" "$rpid" || sr_fail "root's rping server did not listen"
SR_TIMEOUT=15 sr_run_fail "mallory's rping server on 127.0.0.1:$port fails (address in use)" \
	-- "$AS_MALLORY" "$STAGE/bin/softrdma-run" rping -s -a 127.0.0.1 -p "$port" -C 3
start=$SECONDS
sr_run "root's rping client reaches root's server" -- "$SR_RUN" rping -c -a 127.0.0.1 -p "$port" -C 3 -v
[ $((SECONDS - start)) -lt 5 ] && sr_pass "  within 5 s ($((SECONDS - start)) s)" ||
	sr_fail "  took $((SECONDS - start)) s"
wait "$rpid"
rc=$?
sr_forget "$rpid"
[ "$rc" -eq 0 ] && sr_pass "root's rping server served it" || { sr_fail "root's rping server: $(sr_status_str $rc)"; sr_dump "$rout"; }

# --- item 8: mallory's own programs with root's daemon ---
port=$(sr_free_port)
sr_pair "mallory's ibv_rc_pingpong with root's daemon" "$port" \
	-- "$AS_MALLORY" "$STAGE/bin/softrdma-run" ibv_rc_pingpong -g 0 -c -n 50 -s 4096 -p "$port" \
	-- "$AS_MALLORY" "$STAGE/bin/softrdma-run" ibv_rc_pingpong -g 0 -c -n 50 -s 4096 -p "$port" 127.0.0.1
port=$(sr_free_port)
sr_pair "mallory's ibv_ud_pingpong with root's daemon" "$port" \
	-- "$AS_MALLORY" "$STAGE/bin/softrdma-run" ibv_ud_pingpong -g 0 -n 200 -s 1024 -p "$port" \
	-- "$AS_MALLORY" "$STAGE/bin/softrdma-run" ibv_ud_pingpong -g 0 -n 200 -s 1024 -p "$port" 127.0.0.1
port=$(sr_free_port)
sr_pair "mallory's rping with root's daemon" "cm:$port" \
	-- "$AS_MALLORY" "$STAGE/bin/softrdma-run" rping -s -a 127.0.0.1 -p "$port" -C 20 -V \
	-- "$AS_MALLORY" "$STAGE/bin/softrdma-run" rping -c -a 127.0.0.1 -p "$port" -C 20 -V
kill -0 "$dpid" 2>/dev/null && sr_pass "root's daemon is alive at the end" || sr_fail "root's daemon died"
"$B/softrdma-cfg" status | grep -E '^  (dropped|received|forwarded|cm wills|user)'
sr_finish
