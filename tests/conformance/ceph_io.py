#!/usr/bin/python3
"""librados client of t_ceph.sh and bench/ceph.sh (Debian's python3-rados).

  ceph_io.py health CONF SECONDS OSDS [PGS]
      waits until the cluster is HEALTH_OK with OSDS OSDs up and in, a
      manager active and every placement group (at least PGS of them)
      active+clean; prints how long it took, or the last status and exits
      1 after SECONDS.
  ceph_io.py up CONF SECONDS OSDS
      waits until the mon counts OSDS OSDs up (after one was killed: until
      it is marked down).
  ceph_io.py write CONF POOL LOG STOP [MAX]
      writes objects ack-N, ack-N+1, ... (N: the lines LOG has; 4 KiB to
      256 KiB, contents drawn from the object's name) until the file STOP
      exists or MAX objects are written; appends "NAME SIZE" to LOG after
      each write the cluster acknowledged.
  ceph_io.py verify CONF POOL LOG
      reads back every object LOG names: exits 1 unless each is intact.

It is run under softrdma-run with the cluster's ceph.conf, so it speaks
whichever messenger that file selects.
"""
import json
import os
import random
import sys
import time

import rados


def contents(name, size):
    return random.Random(name).randbytes(size)


def connect(conf):
    cluster = rados.Rados(conffile=conf)
    cluster.connect(timeout=60)
    return cluster


def status(cluster):
    ret, out, err = cluster.mon_command(json.dumps({"prefix": "status", "format": "json"}), b"", timeout=20)
    if ret != 0:
        raise RuntimeError("status: %d %s" % (ret, err))
    return json.loads(out)


def healthy(st, osds, pgs=0):
    osdmap = st["osdmap"].get("osdmap", st["osdmap"])
    pgmap = st["pgmap"]
    clean = sum(s["count"] for s in pgmap.get("pgs_by_state", []) if s["state_name"] == "active+clean")
    checks = [
        st["health"]["status"] == "HEALTH_OK",
        osdmap["num_up_osds"] == osds and osdmap["num_in_osds"] == osds,
        st["mgrmap"].get("available", False),
        clean == pgmap["num_pgs"] >= pgs,
    ]
    return all(checks)


def summary(st):
    osdmap = st["osdmap"].get("osdmap", st["osdmap"])
    states = ", ".join("%d %s" % (s["count"], s["state_name"]) for s in st["pgmap"].get("pgs_by_state", []))
    detail = "; ".join("%s: %s" % (k, v["summary"]["message"]) for k, v in st["health"].get("checks", {}).items())
    return "%s, %d/%d OSDs up/in, mgr %s, pgs: %s%s" % (
        st["health"]["status"], osdmap["num_up_osds"], osdmap["num_in_osds"],
        "active" if st["mgrmap"].get("available") else "not active", states or "none",
        " (" + detail + ")" if detail else "")


def wait(conf, seconds, done):
    start = time.monotonic()
    cluster = connect(conf)
    st = None
    while time.monotonic() - start < float(seconds):
        st = status(cluster)
        if done(st):
            print("after %.1f s: %s" % (time.monotonic() - start, summary(st)))
            return 0
        time.sleep(0.5)
    print("not there after %s s: %s" % (seconds, summary(st) if st else "no status"))
    return 1


def cmd_health(conf, seconds, osds, pgs=0):
    return wait(conf, seconds, lambda st: healthy(st, int(osds), int(pgs)))


def cmd_up(conf, seconds, osds):
    return wait(conf, seconds, lambda st: st["osdmap"].get("osdmap", st["osdmap"])["num_up_osds"] == int(osds))


def cmd_write(conf, pool, log, stop, limit=None):
    cluster = connect(conf)
    io = cluster.open_ioctx(pool)
    first = n = sum(1 for _ in open(log)) if os.path.exists(log) else 0
    with open(log, "a") as f:
        while not os.path.exists(stop) and (limit is None or n - first < int(limit)):
            name = "ack-%d" % n
            size = random.Random(n).randrange(4096, 256 * 1024)
            io.write_full(name, contents(name, size))
            f.write("%s %d\n" % (name, size))
            f.flush()
            n += 1
    print("%d objects written and acknowledged" % (n - first))
    return 0


def cmd_verify(conf, pool, log):
    cluster = connect(conf)
    io = cluster.open_ioctx(pool)
    good = bad = 0
    with open(log) as f:
        for line in f:
            name, size = line.split()
            size = int(size)
            data = io.read(name, size + 1)
            if data == contents(name, size):
                good += 1
            else:
                bad += 1
                print("%s: %d bytes read, %d written%s" % (name, len(data), size,
                                                          "" if len(data) != size else ", contents differ"))
    print("%d objects intact, %d not" % (good, bad))
    return 1 if bad or not good else 0


def main(argv):
    cmds = {"health": (cmd_health, 3, 4), "up": (cmd_up, 3, 3), "write": (cmd_write, 4, 5), "verify": (cmd_verify, 3, 3)}
    if len(argv) < 2 or argv[1] not in cmds or not cmds[argv[1]][1] <= len(argv) - 2 <= cmds[argv[1]][2]:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
