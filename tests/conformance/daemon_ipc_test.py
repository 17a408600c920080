#!/usr/bin/env python3
# softrdmad's core protocol spoken directly: HELLO, QPN allocation and
# freeing, CLAIM_QP1, request errors, routing of datagrams by destination
# QPN (from UDP and forwarded by clients), malformed messages, a reply
# deferred behind a full socket, what a disconnect frees.
#
# Run by t_daemon.sh with SOFTRDMA_DAEMON_SOCK naming the daemon's socket.
# Usage: daemon_ipc_test.py PRIVATE   (1: the daemon is alone on UDP 4791
# in a private network namespace; 0: shared, UDP checks relaxed)
# Exit 0 pass, 1 fail.  Standard library only.
import errno
import socket
import struct
import sys
import time

from sr_ipc import (ALLOC_QPN as ALLOC, CLAIM, FREE_QPN as FREE, HELLO, PKT, QP_PORT, QP_PORT_GET, REPLY, STATUS,
                    Client, bth, failed, ok, port_body, qpn_body)

PRIVATE = sys.argv[1] == "1"


def udp_send(dgram, copies):
    # in the shared netns another daemon may get a datagram: send several
    # from different source ports
    for _ in range(copies):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.sendto(dgram, ("127.0.0.1", 4791))
        u.close()
COPIES = 1 if PRIVATE else 16

a = Client(); b = Client()
pid = a.hello
ok("HELLO returns the daemon pid (%d)" % pid, pid > 1)
q = [a.call(ALLOC, qpn_body())[0] for _ in range(8)]
ok("ALLOC_QPN gives distinct QPNs >= 0x11 (%s)" % [hex(x) for x in q], len(set(q)) == 8 and min(q) >= 0x11)
r, _ = a.call(FREE, qpn_body(q[0]))
ok("FREE_QPN of an own QPN returns 0", r == 0)
r, _ = a.call(FREE, qpn_body(q[0]))
ok("FREE_QPN twice returns -ENOENT", r == -errno.ENOENT)
n1 = a.call(ALLOC, qpn_body())[0]
ok("a freed QPN is not reused at once", n1 != q[0])
r, _ = b.call(FREE, qpn_body(q[1]))
ok("FREE_QPN of another client's QPN returns -ENOENT, as for a free one", r == -errno.ENOENT)
ok("QP_PORT_GET of a QPN with no port set: -ENOENT", b.call(QP_PORT_GET, port_body(q[1]))[0] == -errno.ENOENT)
ok("QP_PORT sets an own QPN's port", a.call(QP_PORT, port_body(q[1], 51234))[0] == 0)
ok("QP_PORT_GET by another client of the same user tells it",
   b.call(QP_PORT_GET, port_body(q[1]))[0] == 51234)
ok("QP_PORT of another client's QPN: -ENOENT", b.call(QP_PORT, port_body(q[1], 50000))[0] == -errno.ENOENT)
ok("QP_PORT of port 80: -EINVAL", a.call(QP_PORT, port_body(q[1], 80))[0] == -errno.EINVAL)
ok("QP_PORT_GET of a free QPN: -ENOENT", b.call(QP_PORT_GET, port_body(q[0]))[0] == -errno.ENOENT)
ok("CLAIM_QP1 returns 0", a.call(CLAIM)[0] == 0)
ok("CLAIM_QP1 again by the owner returns 0", a.call(CLAIM)[0] == 0)
ok("CLAIM_QP1 by another client returns -EBUSY", b.call(CLAIM)[0] == -errno.EBUSY)
ok("unknown request type returns -EOPNOTSUPP", a.call(200)[0] == -errno.EOPNOTSUPP)
ok("wrong protocol version returns -EPROTO", a.call(HELLO, struct.pack("<i", 1), version=9)[0] == -errno.EPROTO)
ok("bad body length returns -EINVAL", a.call(FREE, b"\1")[0] == -errno.EINVAL)
r, text = b.call(STATUS)
ok("STATUS returns the client count and text", r >= 2 and b"clients" in text)

# routing of datagrams by destination QPN
udp_send(bth(q[1], b"hello"), COPIES)
p = a.pkt()
ok("UDP datagram for an allocated QPN reaches its owner", p is not None and p[64:] == bth(q[1], b"hello"))
if p is not None:
    fam, sport = struct.unpack("<HH", p[0:4])
    dst = p[28:56]
    ok("PKT meta: source is IPv4-mapped, data length right",
       fam == socket.AF_INET6 and p[8:24] == bytes(10) + b"\xff\xff\x7f\0\0\1" and struct.unpack("<I", p[56:60])[0] == len(p) - 64)
    ok("PKT meta: destination is 127.0.0.1:4791",
       dst[8:24] == bytes(10) + b"\xff\xff\x7f\0\0\1" and struct.unpack(">H", dst[2:4])[0] == 4791)
while a.pkt(0.2): pass
udp_send(bth(1, b"mad"), COPIES)
p = a.pkt()
ok("UDP datagram for QP1 reaches the QP1 owner", p is not None and p[64:] == bth(1, b"mad"))
while a.pkt(0.2): pass
b.forward(bth(q[2], b"fwd"))
p = a.pkt()
ok("a datagram forwarded by another client reaches the owner", p is not None and p[64:] == bth(q[2], b"fwd"))
a.forward(bth(q[2], b"loop"))
ok("a datagram forwarded by the owner itself is not sent back", a.pkt(0.5) is None)
b.forward(bth(q[0], b"freed"))
ok("a datagram for a freed QPN is dropped", a.pkt(0.5) is None)

# malformed messages are dropped, the connection and daemon survive
b.send(PKT, b"short")
b.send(PKT, bytes(56) + struct.pack("<II", 9999, 0) + b"x")
b.forward(b"")
ok("malformed PKT messages are ignored and the connection survives", b.call(HELLO, struct.pack("<i", 1))[0] == pid)
c = Client(hello=False); c.s.send(b"abc")
try:
    t, _ = c.recv(2); dropped = False
except (EOFError, ConnectionResetError):
    dropped = True
ok("a client sending less than a header is disconnected", dropped)
c.close()

# a reply to a client whose socket is full of packets is deferred, not lost
if PRIVATE:
    flood = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(60000):
        flood.sendto(bth(q[3], b"F" * 1000), ("127.0.0.1", 4791))
    time.sleep(0.3)
    a.send(ALLOC, qpn_body())
    time.sleep(0.5)
    got = None; n = 0
    while got is None:
        t, body = a.recv(5)
        if t == REPLY: got = struct.unpack("<q", body[:8])[0]
        else: n += 1
    ok("reply arrives after %d queued packets (val %#x)" % (n, got), got > 1)
    r, text = b.call(STATUS)
    ok("client_full drops were counted", b"client_full=0" not in text)

# disconnecting frees QPNs and the QP1 claim
a.close()
time.sleep(0.2)
ok("after the owner disconnects, QP1 can be claimed by another", b.call(CLAIM)[0] == 0)
r, text = b.call(STATUS)
ok("after the owner disconnects its QPNs are gone", b"qpns 0\n" in text)
b.close()
sys.exit(1 if failed() else 0)
