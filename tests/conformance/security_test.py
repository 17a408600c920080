#!/usr/bin/env python3
# softrdmad and another local user (issue 15 items 1, 3-6; issue 11 item 5):
# a second Unix user ("mallory", created by t_security.sh) must not take
# over root's listens, reach root's QPs with datagrams it forges, claim QP1,
# exhaust what all users share, turn CM wills into a flood, predict QPNs,
# or wedge the daemon with malformed, oversized or flooding IPC.
#
# Run as root by t_security.sh in a private network namespace, with root's
# daemon running (SOFTRDMA_DAEMON_SOCK names it).  Mallory's connections
# are made with mallory's effective uid and gid (setegid/seteuid around
# connect(): SO_PEERCRED reports the effective ids of the connecting
# process, so to the daemon they are mallory's); the victim's are root's.
# Usage: security_test.py MALLORY_UID MALLORY_GID   (exit 0 pass, 1 fail)
# Standard library only.
import errno
import os
import resource
import socket
import struct
import sys
import threading
import time

from sr_ipc import (ALLOC_COMM_ID, ALLOC_QPN, CLAIM, CM_WILL, FREE_COMM_ID, FREE_QPN, HELLO, JOIN, LISTEN, PKT,
                    QP_PORT, QP_PORT_GET, STATUS, Client, bth, counters, failed, listen_body, mapped, ok, port_body,
                    qpn_body, sockaddr6)

MUID, MGID = int(sys.argv[1]), int(sys.argv[2])
# Per-user quotas of a daemon serving other users (ipc.h, "Users")
Q_CLIENTS, Q_QPN, Q_COMM_ID, Q_LISTEN, Q_WILL, Q_MCAST = 1024, 1 << 17, 1 << 16, 4096, 16384, 256
WILL_BURST, WILL_RATE = 1000, 1000
REQ, DREQ = 0x10, 0x15


def as_mallory(fn):
    os.setegid(MGID)
    os.seteuid(MUID)
    try:
        return fn()
    finally:
        os.seteuid(0)
        os.setegid(0)


def mallory(hello=True):
    return as_mallory(lambda: Client(hello))


def status_counters():
    c = Client()
    k = counters(c.status())
    c.close()
    return k


def chunked(c, t, bodies, chunk=512):
    """Pipelined requests, in chunks so that neither side's socket fills."""
    out = []
    for i in range(0, len(bodies), chunk):
        out += c.calls(t, bodies[i:i + chunk])
    return out


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def cm_mad(attr, local_id, remote_id=0):
    m = bytearray(256)
    m[0:4] = bytes([1, 7, 2, 3])  # MAD v1, class CM v2, Send
    m[16:18] = struct.pack(">H", attr)
    m[24:28] = struct.pack(">I", local_id)
    m[28:32] = struct.pack(">I", remote_id)
    return bytes(m)


def will_body(comm_id, m, peer="127.0.0.2"):
    return struct.pack("<II", comm_id, len(m)) + sockaddr6("127.0.0.1") + sockaddr6(peer) + m


def gsi(m):
    """A CM MAD as a QP1 datagram (ICRC left zero: the daemon does not check it)."""
    return (bytes([0x64, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1]) + struct.pack(">II", 0x80010000, 1) + m +
            bytes(4))


def view(c):
    """c's STATUS text without the uptime line (the one line that moves by itself)."""
    return "\n".join(line for line in c.status().splitlines() if not line.startswith("uptime "))


def status_oracle(v, m):
    """Issue 41 item 1: nothing mallory can ask the daemon tells her which
    QPNs are live -- not her STATUS view while datagrams go to root's QPN
    or to a free one, not FREE_QPN, not what becomes of the datagrams she
    hands over."""
    q = v.call(ALLOC_QPN, qpn_body())[0]
    free = q ^ 0x5a5a5  # free: a few hundred of 2^24 QPNs are live
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    k0 = status_counters()
    s0 = view(m)
    for _ in range(200):
        u.sendto(bth(q, b"probe"), ("127.0.0.1", 4791))
    got = 0
    while got < 200 and v.pkt(1) is not None:
        got += 1
    s1 = view(m)
    for _ in range(200):
        u.sendto(bth(free, b"probe"), ("127.0.0.1", 4791))
    time.sleep(0.3)
    s2 = view(m)
    k1 = status_counters()
    ok("root sees the 200 datagrams to its QPN %#x forwarded (%d) and the 200 to a free one dropped (%d)" %
       (q, k1.get("forwarded", 0) - k0.get("forwarded", 0), k1.get("unknown_qpn", 0) - k0.get("unknown_qpn", 0)),
       got == 200 and k1.get("unknown_qpn", 0) - k0.get("unknown_qpn", 0) == 200)
    changed = [a + " -> " + b for a, b in zip(s0.splitlines(), s1.splitlines()) if a != b]
    ok("mallory's STATUS is the same before and after them (%s)" % ("; ".join(changed[:3]) or "no line moved"),
       s0 == s1 == s2)
    ok("  and is her own user's view", ("view uid %d" % MUID) in s0 and " uid 0 " not in s0)
    ok("mallory's FREE_QPN of root's QPN is -ENOENT, as of a free one",
       m.call(FREE_QPN, qpn_body(q))[0] == -errno.ENOENT == m.call(FREE_QPN, qpn_body(free))[0])
    v.call(QP_PORT, port_body(q, 52345))
    ok("root's QP's port is not told to mallory (QP_PORT_GET -ENOENT, as of a free QPN), to root it is",
       m.call(QP_PORT_GET, port_body(q))[0] == -errno.ENOENT == m.call(QP_PORT_GET, port_body(free))[0] and
       Client().call(QP_PORT_GET, port_body(q))[0] == 52345)
    c0 = counters(m.status())
    m.forward(bth(q, b"x"), ("127.0.0.1", 4791), ("127.0.0.1", 4791))
    time.sleep(0.2)
    c1 = counters(m.status())
    m.forward(bth(free, b"x"), ("127.0.0.1", 4791), ("127.0.0.1", 4791))
    time.sleep(0.2)
    c2 = counters(m.status())
    moved1 = {k: c1[k] - c0.get(k, 0) for k in c1 if c1[k] != c0.get(k, 0)}
    moved2 = {k: c2[k] - c1.get(k, 0) for k in c2 if c2[k] != c1.get(k, 0)}
    ok("a datagram she hands over for root's QPN and one for a free QPN count alike in her view (%s, %s)" %
       (moved1, moved2), moved1 == moved2)
    v.call(FREE_QPN, qpn_body(q))


def main():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    v = Client()
    dpid = v.hello
    rss0 = rss_kib(dpid)
    print("daemon pid %d, VmRSS %d KiB" % (dpid, rss0))

    # --- item 1: listens overlap across users as TCP ports do ---
    S, T = 0x1064E21, 0x1064E22  # RDMA_PS_TCP, ports 20001, 20002
    ok("root listens on S, any address", v.listen(S) == 0)
    m = mallory()
    ok("mallory listening on S at 127.0.0.1 is refused: -EADDRINUSE", m.listen(S, "127.0.0.1") == -errno.EADDRINUSE)
    ok("... at ::ffff:0.0.0.0 (any IPv4): -EADDRINUSE", m.listen(S, "0.0.0.0") == -errno.EADDRINUSE)
    ok("... at ::1: -EADDRINUSE", m.listen(S, "::1") == -errno.EADDRINUSE)
    ok("mallory listens on T at 127.0.0.1", m.listen(T, "127.0.0.1") == 0)
    ok("then root's wildcard listen on T is refused: -EADDRINUSE", v.listen(T) == -errno.EADDRINUSE)
    ok("root listens on T at 127.0.0.2 (no overlap)", v.listen(T, "127.0.0.2") == 0)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = gsi(cm_mad(REQ, 0x5151) [:32] + struct.pack(">Q", S) + bytes(216))
    u.sendto(req, ("127.0.0.1", 4791))
    p = v.pkt(1)
    ok("a REQ for S to 127.0.0.1 reaches root's listener", p is not None and p[64:] == req)
    ok("... and not mallory", m.pkt(0.2) is None)

    # --- item 3: datagrams mallory forwards never reach root's QPs ---
    q = v.call(ALLOC_QPN, qpn_body())[0]
    ok("root allocates a QPN (%#x)" % q, q > 1)
    k0 = status_counters()
    m.forward(bth(q, b"forged"), ("10.9.8.7", 4791), ("127.0.0.1", 4791))
    ok("a datagram mallory forwards, posing as 10.9.8.7, does not reach root's QP", v.pkt(0.5) is None)
    m.forward(req, ("10.9.8.7", 4791), ("127.0.0.1", 4791))
    ok("a REQ mallory forwards does not reach root's listener", v.pkt(0.5) is None)
    nobody = gsi(cm_mad(REQ, 0x5252)[:32] + struct.pack(">Q", 0x1060FFF) + bytes(216))
    m.forward(nobody, ("10.9.8.7", 4791), ("127.0.0.1", 4791))
    time.sleep(0.3)
    k1 = status_counters()
    ok("a REQ for nobody mallory forwards is not answered (REJ to a forged address)",
       k1.get("rej_sent") == k0.get("rej_sent"))
    ok("the daemon counts them as dropped foreign_forward (%s)" % k1.get("foreign_forward"),
       k1.get("foreign_forward", 0) - k0.get("foreign_forward", 0) == 3)
    u.sendto(bth(q, b"real"), ("127.0.0.1", 4791))
    p = v.pkt(1)
    ok("a real datagram to root's QPN still reaches it", p is not None and p[64:] == bth(q, b"real"))
    mq = m.call(ALLOC_QPN, qpn_body())[0]
    m2 = mallory()
    m2.forward(bth(mq, b"own"), ("10.9.8.7", 4791), ("127.0.0.1", 4791))
    p = m.pkt(1)
    ok("mallory may forward to her own QPs", p is not None and p[64:] == bth(mq, b"own"))
    m2.close()

    status_oracle(v, m)

    # --- item 4: QP1 and quotas ---
    ok("mallory cannot claim QP1: -EPERM", m.call(CLAIM)[0] == -errno.EPERM)
    t0 = time.time()
    got = chunked(m, ALLOC_QPN, [qpn_body()] * (Q_QPN + 8))
    good = sum(1 for x in got if x > 0)
    ok("mallory gets %d QPNs, the quota (%d), then -EDQUOT (%.1f s)" % (good, Q_QPN - 1, time.time() - t0),
       good == Q_QPN - 1 and got[-1] == -errno.EDQUOT)
    ok("root still gets QPNs", v.call(ALLOC_QPN, qpn_body())[0] > 1)
    got = chunked(m, ALLOC_COMM_ID, [b""] * (Q_COMM_ID + 8))
    good = sum(1 for x in got if x > 0)
    ok("mallory gets %d Communication IDs, the quota, then -EDQUOT" % good,
       good == Q_COMM_ID and got[-1] == -errno.EDQUOT)
    ok("root still gets Communication IDs", v.alloc_id() > 0)
    ids = [x for x in got if x > 0]
    chunked(m, FREE_COMM_ID, [struct.pack("<II", i, 0) for i in ids[Q_WILL:]])
    got = chunked(m, LISTEN, [listen_body(0x1060000 + i, "127.0.0.3") for i in range(Q_LISTEN + 8)])
    good = sum(1 for x in got if x == 0)
    ok("mallory gets %d listens (one was made above), then -EDQUOT" % good,
       good == Q_LISTEN - 1 and got[-1] == -errno.EDQUOT)
    ok("root still listens", v.listen(0x1062000, "127.0.0.3") == 0)
    groups = [mapped("239.1.%d.%d" % (i >> 8, i & 255)) + struct.pack("<iI", 1, 0) for i in range(Q_MCAST + 8)]
    ma, mb = mallory(), mallory()
    got = chunked(ma, JOIN, groups[:Q_MCAST // 2]) + chunked(mb, JOIN, groups[Q_MCAST // 2:])
    good = sum(1 for x in got if x == 0)
    ok("mallory's two connections join %d multicast groups in all, then -EDQUOT" % good,
       good == Q_MCAST and got[-1] == -errno.EDQUOT)
    ma.close()
    mb.close()
    conns, refused = [], 0
    for i in range(Q_CLIENTS + 4):
        try:
            conns.append(mallory())
        except (EOFError, ConnectionError, socket.timeout):
            refused += 1
    ok("mallory's connections beyond %d are refused (%d open, %d refused)" % (Q_CLIENTS, len(conns) + 1, refused),
       len(conns) == Q_CLIENTS - 1 and refused == 5)
    vc = Client()
    ok("root still connects", vc.hello == dpid)
    vc.close()
    for c in conns:
        c.close()

    # --- item 5: CM wills ---
    wid = ids[0]
    ok("a will that is not a DREQ is refused: -EINVAL", m.call(CM_WILL, will_body(wid, cm_mad(REQ, wid)))[0] ==
       -errno.EINVAL)
    ok("a DREQ will naming another Local Comm ID is refused: -EINVAL",
       m.call(CM_WILL, will_body(wid, cm_mad(DREQ, wid + 1)))[0] == -errno.EINVAL)
    vid = v.alloc_id()
    ok("a will for root's Communication ID is refused: -ENOENT",
       m.call(CM_WILL, will_body(vid, cm_mad(DREQ, vid)))[0] == -errno.ENOENT)
    got = chunked(m, CM_WILL, [will_body(i, cm_mad(DREQ, i, 0x77)) for i in ids[:Q_WILL]])
    ok("mallory leaves %d DREQ wills (the quota)" % sum(1 for x in got if x == 0), all(x == 0 for x in got))
    mw = mallory()
    extra = mw.alloc_id()
    ok("one more is refused: -EDQUOT", mw.call(CM_WILL, will_body(extra, cm_mad(DREQ, extra)))[0] == -errno.EDQUOT)
    rss1 = rss_kib(dpid)
    k0 = status_counters()
    m.close()
    mw.close()
    time.sleep(1.0)
    k1 = status_counters()
    sent = k1["cm wills sent"] - k0["cm wills sent"]
    most = WILL_BURST + WILL_RATE * 1.5
    ok("mallory's %d wills go out paced: %d in the first second (at most %d), %d queued" %
       (Q_WILL, sent, most, k1.get("cm wills queued", -1)),
       0 < sent <= most and k1.get("cm wills queued", 0) > 0)
    t0 = time.time()
    v.status()
    ok("root is served meanwhile (%.0f ms)" % ((time.time() - t0) * 1000), time.time() - t0 < 1.0)

    # --- item 6: QPNs are not predictable ---
    qs = v.calls(ALLOC_QPN, [qpn_body()] * 64)
    close = sum(1 for a, b in zip(qs, qs[1:]) if 0 < b - a <= 64)
    ok("64 QPNs in a row are scattered (%d of 63 steps of 1..64)" % close, close < 8)

    # --- issue 11 item 5: malformed, oversized, flooding IPC ---
    b = mallory()
    b.send(HELLO, struct.pack("<i", 1), version=9)
    ok("wrong version: -EPROTO", b.reply()[0] == -errno.EPROTO)
    b.s.send(struct.pack("<HHI", ALLOC_QPN, 1, 100000) + qpn_body())
    ok("header length that lies: -EINVAL", b.reply()[0] == -errno.EINVAL)
    b.s.send(struct.pack("<HHI", STATUS, 1, 100000) + os.urandom(100000))
    ok("a 100 KB message (larger than any): -EINVAL", b.reply()[0] == -errno.EINVAL)
    b.s.send(struct.pack("<HHI", PKT, 1, 70000) + os.urandom(70000))
    b.forward(os.urandom(9300), ("10.0.0.1", 1), ("10.0.0.2", 2))
    ok("oversized PKT messages are dropped, the connection stays", b.call(HELLO, struct.pack("<i", 1))[0] == dpid)
    for t in (0, 99, 0xffff):
        b.send(t, os.urandom(40))
        ok("type %d: -EOPNOTSUPP" % t, b.reply()[0] == -errno.EOPNOTSUPP)
    b.close()
    junk = mallory(hello=False)
    junk.s.send(b"\1\2\3")
    try:
        junk.recv(2)
        dropped = False
    except (EOFError, ConnectionError):
        dropped = True
    ok("a message shorter than a header ends that connection", dropped)
    junk.close()

    # a client that never reads, one that floods: others still served
    stop = threading.Event()
    deaf = mallory()
    deaf.s.setblocking(False)
    sent_deaf = 0
    try:
        for _ in range(100000):
            deaf.send(ALLOC_QPN, qpn_body())
            sent_deaf += 1
    except BlockingIOError:
        pass
    flood = mallory()
    flood_n = [0]

    def flooder():
        flood.s.settimeout(1)
        while not stop.is_set():
            try:
                flood.forward(bth(q, b"x" * 1000), ("10.9.8.7", 4791), ("127.0.0.1", 4791))
                flood_n[0] += 1
            except (socket.timeout, OSError):
                pass

    th = threading.Thread(target=flooder)
    th.start()
    worst = 0
    for _ in range(50):
        t0 = time.time()
        r = v.call(ALLOC_QPN, qpn_body())[0]
        worst = max(worst, time.time() - t0)
        if r <= 0:
            break
        time.sleep(0.01)
    stop.set()
    th.join()
    # a wedged daemon would not answer at all while the flood lasts; the
    # bound leaves room for a loaded machine
    ok("while one connection does not read (%d requests sent) and one floods (%d PKTs), root's requests are"
       " answered within 1 s (worst %.1f ms)" % (sent_deaf, flood_n[0], worst * 1000), worst < 1.0)
    ok("none of the flood reached root's QP", v.pkt(0.2) is None)
    deaf.close()
    flood.close()
    rss2 = rss_kib(dpid)
    ok("daemon memory bounded: VmRSS %d -> %d (wills) -> %d KiB" % (rss0, rss1, rss2), rss2 - rss0 < 96 * 1024)
    try:
        os.kill(dpid, 0)
        alive = True
    except OSError:
        alive = False
    ok("the daemon is alive", alive)
    v.close()
    return 1 if failed() else 0


if __name__ == "__main__":
    sys.exit(main())
