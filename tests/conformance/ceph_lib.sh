# shellcheck shell=bash
# A Ceph cluster for t_ceph.sh and bench/ceph.sh (sourced after lib.sh and
# sr_init): 1 mon, 1 mgr, 3 OSDs on memstore, auth none, every daemon and
# client through a command prefix (softrdma-run, on the host it runs on).
# Needs ceph-mon, ceph-mgr, ceph-osd, ceph-common (python3-rados).

CEPH_IO=(/usr/bin/python3 "$SR_SOURCE_DIR/tests/conformance/ceph_io.py")
HEALTH_BOUND=${SR_CEPH_HEALTH_BOUND:-150} # seconds from the mon's start to HEALTH_OK

# ceph_need: skips unless Debian's Ceph is installed
ceph_need() {
	sr_need_cmd ceph-mon ceph-mgr ceph-osd ceph rados monmaptool
	/usr/bin/python3 -c 'import rados' 2>/dev/null || sr_skip "python3-rados is not installed (ceph-common brings it)"
}

# CL: the cluster's directory; CONF its ceph.conf; MON_AT, OSD_AT[i],
# CLIENT_AT: the command prefixes that run each process (softrdma-run, on
# the host it belongs to); DAEMON[name]: the PID of each running daemon.
declare -A DAEMON

# ceph_make NAME MON-ADDR PUBLIC-NETWORK CONF-LINE...: a cluster's
# directory, ceph.conf, monmap and the mon's store (made on MON_AT)
ceph_make() {
	local name=$1 addr=$2 net=$3 fsid line
	shift 3
	CL=$SR_TMP/$name
	CONF=$CL/ceph.conf
	mkdir -p "$CL/run" "$CL/log"
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon_host = [v2:$addr:3300,v1:$addr:6789]
public_network = $net
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
mon_warn_on_insecure_global_id_reclaim_allowed = false
osd_objectstore = memstore
memstore_device_bytes = 1073741824
osd_pool_default_size = 3
osd_pool_default_min_size = 2
osd_pool_default_pg_num = 16
osd_crush_chooseleaf_type = 0
osd_heartbeat_interval = 2
osd_heartbeat_grace = 10
mon_osd_min_down_reporters = 1
osd_recovery_sleep = 0
mon_data_avail_warn = 2
mon_allow_pool_delete = true
run_dir = $CL/run
admin_socket = $CL/run/\$name.asok
log_file = $CL/log/\$name.log
pid_file = $CL/run/\$name.pid
mon_data = $CL/\$name
osd_data = $CL/\$name
mgr_data = $CL/\$name
EOF
	for line in "$@"; do echo "$line" >>"$CONF"; done
	mkdir -p "$CL/mon.a" "$CL/mgr.x"
	# the mon's mkfs looks for public_network among the interfaces of its host
	if ! { monmaptool --create --addv a "[v2:$addr:3300,v1:$addr:6789]" --fsid "$fsid" "$CL/monmap" &&
		timeout -k 5 60 "${MON_AT[@]}" ceph-mon -c "$CONF" --mkfs -i a --monmap "$CL/monmap"; } \
		>"$CL/log/mkfs.out" 2>&1 </dev/null; then
		sr_fail "$name: monmaptool and ceph-mon --mkfs"
		sed 's/^/    | /' "$CL/log/mkfs.out"
		return 1
	fi
}

# ceph_daemon NAME PREFIX-VAR CMD...: CMD (a daemon, in the foreground)
# through the prefix named, in the background; DAEMON[NAME] is its PID
ceph_daemon() {
	local name=$1
	local -n at=$2
	shift 2
	"${at[@]}" "$@" -c "$CONF" -f >>"$CL/log/$name.out" 2>&1 </dev/null &
	DAEMON[$name]=$!
	SR_PIDS+=("$!")
}

# ceph_stop NAME [SIGNAL]: stops a daemon (SIGTERM, or SIGNAL) and reaps it
ceph_stop() {
	local pid=${DAEMON[$1]} i
	[ -n "$pid" ] || return 0
	kill "-${2:-TERM}" "$pid" 2>/dev/null
	for i in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	sr_forget "$pid"
	unset "DAEMON[$1]"
}

# ceph_stop_all: the OSDs first, the mon last (a daemon without its mon
# takes long to stop)
ceph_stop_all() {
	local d
	for d in osd.0 osd.1 osd.2 mgr.x mon.a; do ceph_stop "$d"; done
}

# cephc ARGS...: the ceph CLI, as a client on CLIENT_AT
cephc() {
	timeout -k 5 60 "${CLIENT_AT[@]}" ceph -c "$CONF" "$@"
}

# ceph_health DESC [PGS]: HEALTH_OK, 3 OSDs, at least PGS placement
# groups, within HEALTH_BOUND seconds of START
ceph_health() {
	local desc=$1 left=$((HEALTH_BOUND - (SECONDS - START)))
	[ "$left" -lt 10 ] && left=10
	sr_run "$desc" -- "${CLIENT_AT[@]}" "${CEPH_IO[@]}" health "$CONF" "$left" 3 "${2:-0}" &&
		sed 's/^/    /' "$SR_OUT" | grep -v verify_prereq
}

# ceph_start NAME: the mon, the mgr and the three OSDs of the cluster made
# by ceph_make, until HEALTH_OK, and a pool "p" for the checks
ceph_start() {
	local name=$1 i uuid id
	START=$SECONDS
	ceph_daemon mon.a MON_AT ceph-mon -i a
	for i in $(seq 1 100); do
		cephc mon stat >"$CL/log/mon-stat.out" 2>&1 && break
		kill -0 "${DAEMON[mon.a]}" 2>/dev/null || break
		sleep 0.3
	done
	if ! grep -q quorum "$CL/log/mon-stat.out"; then
		sr_fail "$name: the mon answers"
		sr_dump "$CL/log/mon-stat.out" "ceph mon stat"
		sr_dump "$CL/log/mon.a.out" mon
		return 1
	fi
	ceph_daemon mgr.x MON_AT ceph-mgr -i x
	for i in 0 1 2; do
		uuid=$(cat /proc/sys/kernel/random/uuid)
		id=$(cephc osd new "$uuid" 2>"$CL/log/osd-new.err" | grep -v verify_prereq)
		if [ "$id" != "$i" ]; then
			sr_fail "$name: ceph osd new gave '$id', expected $i"
			sed 's/^/    | /' "$CL/log/osd-new.err"
			return 1
		fi
		mkdir -p "$CL/osd.$i"
		local -n osd_at="OSD_AT_$i"
		# --mkfs asks the mon for the monmap: a client of the cluster
		if ! timeout -k 5 60 "${osd_at[@]}" ceph-osd -c "$CONF" -i "$i" --mkfs --osd-uuid "$uuid" \
			>"$CL/log/osd.$i.mkfs" 2>&1 </dev/null; then
			sr_fail "$name: ceph-osd --mkfs of osd.$i"
			sr_dump "$CL/log/osd.$i.mkfs"
			return 1
		fi
		ceph_daemon "osd.$i" "OSD_AT_$i" ceph-osd -i "$i"
	done
	ceph_health "$name: mon, mgr and 3 OSDs HEALTH_OK within ${HEALTH_BOUND}s" || return 1
	sr_run "$name: pool p (16 PGs, 3 replicas)" -- "${CLIENT_AT[@]}" ceph -c "$CONF" osd pool create p 16 16 &&
		sr_run "  for rados" -- "${CLIENT_AT[@]}" ceph -c "$CONF" osd pool application enable p rados &&
		ceph_health "  p's placement groups active+clean" 17 || return 1
}

