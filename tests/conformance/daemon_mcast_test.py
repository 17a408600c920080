#!/usr/bin/env python3
# softrdmad's multicast protocol (src/common/ipc.h, "Multicast"), spoken
# directly: MCAST_JOIN / MCAST_LEAVE errors and references, and the fan-out
# of datagrams with BTH DestQP 0xFFFFFF to every client that joined the
# group on the interface they came in on (and to nobody else).
#
# Run by t_mcast.sh inside a private network namespace whose lo loops
# IPv4 multicast back, with the namespace's daemon running.
# Usage: daemon_mcast_test.py GROUP [OTHER-IFNAME]   (exit 0 pass, 1 fail)
# OTHER-IFNAME: an interface other than lo that is up, for the check that
# a membership on one interface does not receive what arrives on another.
# Standard library only.
import errno
import os
import socket
import struct
import sys
import time

from sr_ipc import JOIN, LEAVE, META, Client, failed, mapped, ok


def body(group, ifindex, flags=0):
    return mapped(group) + struct.pack("<iI", ifindex, flags)


LO = socket.if_nametoindex("lo")
G = sys.argv[1]
OTHER = sys.argv[2] if len(sys.argv) > 2 else None
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("4s4si", b"\0" * 4, b"\0" * 4, LO))
seq = 0


def send_dgram():
    """A UD SEND_ONLY to DestQP 0xFFFFFF (the daemon routes by BTH only)."""
    global seq
    seq += 1
    bth = struct.pack(">BBHI I", 0x64, 0, 0xFFFF, 0xFFFFFF, seq)
    data = bth + struct.pack(">II", 0x1234, 0x11) + b"mcast %d" % seq + b"\0" * 4
    sender.sendto(data, (G, 4791))
    return data


def got(c, data, what):
    b = c.pkt(2.0)
    if not ok(what + ": delivered", b is not None):
        return
    dst = b[28 + 8:28 + 24]
    n = struct.unpack("<I", b[56:60])[0]
    ok(what + ": meta dst is the group, the datagram intact", dst == mapped(G) and b[META:META + n] == data)


def none(c, what):
    ok(what, c.pkt(0.3) is None)


def drops(c):
    for line in c.status().splitlines():
        for w in line.split():
            if w.startswith("no_mcast_member="):
                return int(w.split("=")[1])
    return -1


a, b, c = Client(), Client(), Client()
E = -errno.EINVAL
ok("JOIN 10.1.2.3 (not multicast): -EINVAL", a.call(JOIN, body("10.1.2.3", LO))[0] == E)
ok("JOIN 240.0.0.1 (not multicast): -EINVAL", a.call(JOIN, body("240.0.0.1", LO))[0] == E)
ok("JOIN ifindex 0: -EINVAL", a.call(JOIN, body(G, 0))[0] == E)
ok("JOIN with flags 1: -EINVAL", a.call(JOIN, body(G, LO, 1))[0] == E)
ok("JOIN with a short body: -EINVAL", a.call(JOIN, body(G, LO)[:18])[0] == E)
ok("JOIN on an interface that does not exist: -ENODEV", a.call(JOIN, body(G, 99999))[0] == -errno.ENODEV)
ok("LEAVE a group never joined: -ENOENT", a.call(LEAVE, body(G, LO))[0] == -errno.ENOENT)
ok("a: JOIN", a.call(JOIN, body(G, LO))[0] == 0)
ok("a: JOIN again (a second reference)", a.call(JOIN, body(G, LO))[0] == 0)
ok("b: JOIN", b.call(JOIN, body(G, LO))[0] == 0)
st = a.status()
ok("STATUS: one group, 2 clients", "mcast groups 1\n" in st and
   ("mcast group ::ffff:%s ifindex %d clients 2 " % (G, LO)) in st)

d = send_dgram()
got(a, d, "datagram 1 to a")
got(b, d, "datagram 1 to b")
none(a, "datagram 1: a gets one copy (two references, one client)")
none(c, "datagram 1: c, not a member, gets nothing")

if OTHER:
    OIDX = socket.if_nametoindex(OTHER)
    ok("c: JOIN the group on %s" % OTHER, c.call(JOIN, body(G, OIDX))[0] == 0)
    d = send_dgram()
    got(a, d, "datagram 2 (arrives on lo) to a")
    none(c, "datagram 2: c, a member on %s only, gets nothing" % OTHER)
    ok("c: LEAVE on %s" % OTHER, c.call(LEAVE, body(G, OIDX))[0] == 0)
    b.drain()

ok("a: LEAVE (one reference left)", a.call(LEAVE, body(G, LO))[0] == 0)
d = send_dgram()
got(a, d, "datagram 3 to a, still a member")
got(b, d, "datagram 3 to b")
ok("a: LEAVE (the last reference)", a.call(LEAVE, body(G, LO))[0] == 0)
ok("a: LEAVE again: -ENOENT", a.call(LEAVE, body(G, LO))[0] == -errno.ENOENT)
d = send_dgram()
got(b, d, "datagram 4 to b")
none(a, "datagram 4: a, gone, gets nothing")

before = drops(c)
b.close()
for _ in range(50):
    st = c.status()
    if "mcast groups 0\n" in st:
        break
    time.sleep(0.1)
ok("b's connection closed: the daemon left the group", "mcast groups 0\n" in st)
send_dgram()
time.sleep(0.3)
ok("a datagram to the group now: the kernel keeps it out (no_mcast_member unchanged)", drops(c) == before)
a.close()
c.close()
sys.exit(1 if failed() else 0)
