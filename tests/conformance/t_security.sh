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
#  - mallory's own RC, UD and rdma_cm programs work with root's daemon;
#  - issue 41, against root's live ib_write_bw (security_attack.py as
#    mallory): the QPN cannot be found from /proc/net/udp plus STATUS
#    within 1000 probes; no port root's QPs send from can be bound by
#    mallory; forged requests with future PSNs at 8-15x the victim's packet
#    rate (lo limited to 25 Mbit/s, so that the victim's rate is the
#    link's, not the loaded CPUs') cost it less than 20% of its bandwidth
#    beside the same flood to a QPN nobody has, alternated in one run.
# Skips (77) without root.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || sr_skip "needs root (creates a user and a network namespace)"
sr_need_cmd useradd userdel runuser unshare ip python3 pgrep ibv_rc_pingpong ibv_ud_pingpong rping ib_write_bw tc stdbuf
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
cp "$B/softrdmad" "$B/softrdma-run" "$B/softrdma-cfg" "$HERE/security_attack.py" "$HERE/sr_ipc.py" "$STAGE/bin/" &&
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
# --- issue 41: root's live RC connection, as mallory sees it ---
# victim DUR [ARGS...]: root's ib_write_bw pair for DUR seconds in the
# background, connected: VS_QPN (the server's QP, the WRITEs' responder),
# VC_PSN (the client's first PSN), VS_PID/VC_PID, outputs VS_OUT/VC_OUT.
victim() {
	local dur=$1 port
	shift
	port=$(sr_free_port)
	sr_new_log ib_write_bw server
	VS_OUT=$SR_OUTFILE
	stdbuf -oL "$SR_RUN" ib_write_bw -x 0 -D "$dur" -p "$port" "$@" >"$VS_OUT" 2>&1 </dev/null &
	VS_PID=$!
	SR_PIDS+=("$VS_PID")
	sr_wait_listen "$port" "$VS_PID" || return 1
	sr_new_log ib_write_bw client
	VC_OUT=$SR_OUTFILE
	stdbuf -oL "$SR_RUN" ib_write_bw -x 0 -D "$dur" -p "$port" "$@" 127.0.0.1 >"$VC_OUT" 2>&1 </dev/null &
	VC_PID=$!
	SR_PIDS+=("$VC_PID")
	for _ in $(seq 100); do grep -q 'remote address' "$VS_OUT" && break; sleep 0.1; done
	VS_QPN=$(sed -n 's/.*local address:.* QPN \(0x[0-9a-f]*\).*/\1/p' "$VS_OUT")
	VC_QPN=$(sed -n 's/.*local address:.* QPN \(0x[0-9a-f]*\).*/\1/p' "$VC_OUT")
	VC_PSN=$(sed -n 's/.*remote address:.* PSN \(0x[0-9a-f]*\).*/\1/p' "$VS_OUT")
	[ -n "$VS_QPN" ] && [ -n "$VC_PSN" ]
}
# victim_end: waits for both; VBW: the client's average MB/s (empty if either failed)
victim_end() {
	local crc src
	wait "$VC_PID"
	crc=$?
	wait "$VS_PID"
	src=$?
	sr_forget "$VC_PID"
	sr_forget "$VS_PID"
	VBW=
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] && VBW=$(awk '/BW average/ { getline; print $4; exit }' "$VC_OUT")
}
ATTACK=(env PYTHONPATH="$STAGE/bin" python3 "$STAGE/bin/security_attack.py")
if victim 30 -s 65536; then
	sr_pass "root's ib_write_bw runs (server QP $VS_QPN, client QP $VC_QPN)"
	sleep 2 # its flows set up
	sr_run "mallory's search for the QPN (/proc/net/udp, STATUS, 1000 probes)" -- "$AS_MALLORY" "${ATTACK[@]}" find-qpn 1000
	cat "$SR_OUT"
	found=$(sed -n 's/^found \(0x[0-9a-f]*\).*/\1/p' "$SR_OUT")
	if [ -n "$found" ] && { [ $((found)) -eq $((VS_QPN)) ] || [ $((found)) -eq $((VC_QPN)) ]; }; then
		sr_fail "  mallory found root's QPN $found: $(grep '^found' "$SR_OUT")"
	else
		sr_pass "  mallory did not find root's QPNs ($(tail -n 1 "$SR_OUT"))"
	fi
	sr_run "mallory cannot bind a port root's QPs send from" -- "$AS_MALLORY" "${ATTACK[@]}" bind-ports
	cat "$SR_OUT"
	kill "$VC_PID" "$VS_PID" 2>/dev/null
	victim_end
else
	sr_fail "root's ib_write_bw did not connect"
	sr_dump "$VS_OUT"
fi

# Forged future-PSN requests from mallory at 10x the victim's packets,
# against the same flood to a QPN nobody has: their bandwidths alternate
# within this run.  lo limited to 25 Mbit/s (tail drop) sets the victim's
# rate, whatever the load on the CPUs: at a faster link a loaded or
# sanitized build is CPU-bound, and any flood costs it CPU, not link.
tc qdisc add dev lo root tbf rate 25mbit burst 32k limit 150000 || sr_die "tc tbf on lo failed"
sr_on_exit 'tc qdisc del dev lo root 2>/dev/null'
if victim 3 -s 65536 && victim_end && bw0=$VBW && [ -n "$bw0" ]; then
	pps=$(awk -v b="$bw0" 'BEGIN { printf "%d", b * 1048576 / 4096 }') # 4 KiB packets on lo
	rate=$((15 * pps)) # aimed above 10x: a loaded machine slows the flooder
	echo "# victim alone: $bw0 MB/s, ~$pps packets/s: the flood aims at $rate a second"
	declare -A bw
	for round in 1 2; do
		for target in nobody victim; do
			if ! victim 3 -s 65536; then
				sr_fail "root's ib_write_bw did not connect ($target round $round)"
				continue
			fi
			q=0x7ffff1
			[ "$target" = victim ] && q=$VS_QPN
			"$AS_MALLORY" "${ATTACK[@]}" flood "$q" $((VC_PSN + 0x400000)) "$rate" 5 >"$SR_TMP/flood.out" 2>&1 &
			fpid=$!
			victim_end
			bw[$target$round]=$VBW
			wait "$fpid"
			echo "# round $round, flood to $target ($q): ${bw[$target$round]:-failed} MB/s; $(cat "$SR_TMP/flood.out")"
			reached=$(sed -n 's/.*, \([0-9]*\) a second$/\1/p' "$SR_TMP/flood.out")
			[ "${reached:-0}" -ge $((8 * pps)) ] ||
				sr_fail "  the flood reached ${reached:-0} datagrams a second, not 8x the victim's $pps"
		done
	done
	ratio=$(awk -v a="${bw[victim1]:-0}" -v b="${bw[victim2]:-0}" -v c="${bw[nobody1]:-0}" -v d="${bw[nobody2]:-0}" \
		'BEGIN { if (c + d > 0) printf "%.2f", (a + b) / (c + d); else print 0 }')
	if awk -v r="$ratio" 'BEGIN { exit !(r >= 0.8) }'; then
		sr_pass "forged future-PSN requests at 8-15x its packet rate cost the victim less than 20% (bandwidth ratio $ratio)"
	else
		sr_fail "forged future-PSN requests cost the victim more than 20%: bandwidth ratio $ratio (victim ${bw[victim1]} ${bw[victim2]}, nobody ${bw[nobody1]} ${bw[nobody2]} MB/s)"
	fi
else
	sr_fail "root's ib_write_bw alone under the 25 Mbit/s limit failed"
fi
tc qdisc del dev lo root

kill -0 "$dpid" 2>/dev/null && sr_pass "root's daemon is alive at the end" || sr_fail "root's daemon died"
"$B/softrdma-cfg" status | grep -E '^  (dropped|received|forwarded|cm wills|user)'
sr_finish
