#!/usr/bin/env python3
# softrdmad as the host's shared QP1: CM MADs routed to the process they
# belong to (listens by Service ID, Communication IDs), the daemon's own
# REJ / SIDR_REP / DREP answers (ICRC checked here), ID and listen
# bookkeeping, malformed QP1 datagrams, rate limiting, CLAIM_QP1 kept.
#
# Run by t_daemon_cm.sh against a daemon alone on UDP port 4791 (private
# network namespace), with SOFTRDMA_DAEMON_SOCK naming its socket.
# Usage: daemon_cm_test.py WIRE_SAMPLES_DIR   (exit 0 pass, 1 fail)
# Standard library only.
import errno
import os
import socket
import struct
import sys
import time

from sr_ipc import (CLAIM, FREE_COMM_ID, GSI_QKEY, LISTEN, META, Client, counters as parse_counters,
                    failed, icrc, mapped, ok)

SAMPLES = sys.argv[1] if len(sys.argv) > 1 else ""
REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP, LAP, APR = range(0x10, 0x1B)


def counters():
    c = Client()
    text = c.status()
    c.close()
    return parse_counters(text)


# ---- RoCEv2 CM datagrams ----

def pcapng_udp_payloads(path):
    """UDP payloads to port 4791 of an Ethernet/IPv4 pcapng file."""
    out = []
    try:
        data = open(path, "rb").read()
    except OSError:
        return out
    off = 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack("<II", data[off:off + 8])
        if blen < 12:
            break
        if btype == 6:  # Enhanced Packet Block
            caplen = struct.unpack("<I", data[off + 20:off + 24])[0]
            frame = data[off + 28:off + 28 + caplen]
            if len(frame) > 42 and frame[12:14] == b"\x08\x00":
                ip = frame[14:]
                ihl = (ip[0] & 15) * 4
                udp = ip[ihl:]
                if ip[9] == 17 and struct.unpack(">H", udp[2:4])[0] == 4791:
                    out.append(udp[8:])
        off += blen
    return out


def template(fname, attr):
    """A 256-byte MAD with this attribute from a kernel rxe capture, else None."""
    for p in pcapng_udp_payloads(os.path.join(SAMPLES, "roce-kernel-rxe", fname)):
        if len(p) == 280 and p[5:8] == b"\0\0\1" and struct.unpack(">H", p[36:38])[0] == attr:
            return bytearray(p[20:276])
    return None


REQ_TEMPLATE = template("rping_cm.pcap", REQ)
SIDR_TEMPLATE = template("udaddy_sidr.pcap", SIDR_REQ)


def mad(attr, tid=0x1234, base=None):
    m = bytearray(base) if base is not None else bytearray(256)
    m[0:4] = bytes([1, 7, 2, 3])  # base version, class CM, class version, Send
    m[4:8] = bytes(4)
    m[8:16] = struct.pack(">Q", tid)
    m[16:18] = struct.pack(">H", attr)
    return m


def req_mad(sid, local_id, guid=0x505400FFFE123452, tid=0x29CE1FF85):
    m = mad(REQ, tid, REQ_TEMPLATE)
    m[24:28] = struct.pack(">I", local_id)
    m[28:32] = bytes(4)
    m[32:40] = struct.pack(">Q", sid)
    m[40:48] = struct.pack(">Q", guid)
    return m


def sidr_req_mad(sid, request_id, tid=0x29CE1FF84):
    m = mad(SIDR_REQ, tid, SIDR_TEMPLATE)
    m[24:28] = struct.pack(">I", request_id)
    m[28:30] = b"\xff\xff"
    m[32:40] = struct.pack(">Q", sid)
    return m


def ids_mad(attr, local_id, remote_id, tid=0x77):
    m = mad(attr, tid)
    m[24:28] = struct.pack(">I", local_id)
    m[28:32] = struct.pack(">I", remote_id)
    return m


def sidr_rep_mad(request_id, status=0):
    m = mad(SIDR_REP)
    m[24:28] = struct.pack(">I", request_id)
    m[28] = status
    return m


psn = 0


def dgram(m, src, sport, dst, qkey=GSI_QKEY, pkey=0xFFFF, dqpn=1, opcode=0x64, byte1=0):
    global psn
    psn += 1
    bth = bytes([opcode, byte1]) + struct.pack(">H", pkey) + struct.pack(">I", dqpn & 0xFFFFFF)
    bth += struct.pack(">I", 0x80000000 | psn)
    deth = struct.pack(">I", qkey) + struct.pack(">I", 1)
    p = bth + deth + bytes(m) + bytes(4)
    return p[:-4] + struct.pack("<I", icrc(p, src, dst, sport))


class Wire:
    """A UDP socket sending to the daemon's port 4791 from src."""

    def __init__(self, src="127.0.0.1", dst="127.0.0.1"):
        fam = socket.AF_INET6 if ":" in src else socket.AF_INET
        self.u = socket.socket(fam, socket.SOCK_DGRAM)
        if fam == socket.AF_INET:
            # DF, so that the kernel writes IPv4 ID 0, which the ICRCs assume
            self.u.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_MTU_DISCOVER", 10),
                              getattr(socket, "IP_PMTUDISC_DO", 2))
        self.u.bind((src, 0))
        self.src, self.dst = src, dst
        self.sport = self.u.getsockname()[1]

    def send(self, m, **kw):
        p = dgram(m, self.src, self.sport, self.dst, **kw)
        self.u.sendto(p, (self.dst, 4791))
        return p

    def raw(self, b):
        self.u.sendto(b, (self.dst, 4791))


def payload(p):
    return p[META:] if p is not None else None


def attr_of(d):
    return struct.unpack(">H", d[36:38])[0]


def u32(d, off):
    return struct.unpack(">I", d[off:off + 4])[0]


def check_answer(what, p, attr, src_ip, t0=None):
    """p: PKT body carrying a daemon answer that came back to us via QP1."""
    if not ok(what + ": arrived", p is not None):
        return None
    if t0 is not None:
        ms = (time.time() - t0) * 1000
        ok(what + ": within 100 ms (%.1f ms)" % ms, ms < 100)
    d = payload(p)
    fam, sport = struct.unpack("<H", p[0:2])[0], struct.unpack(">H", p[2:4])[0]
    ok(what + ": 280 bytes, UD SEND_ONLY to QP1, P_Key 0xffff, pad 0",
       len(d) == 280 and d[0] == 0x64 and d[1] == 0 and d[2:4] == b"\xff\xff" and d[5:8] == b"\0\0\1")
    ok(what + ": DETH Q_Key 0x80010000, source QP 1", u32(d, 12) == GSI_QKEY and u32(d, 16) == 1)
    ok(what + ": MAD v1, class CM v2, Send, status 0, attribute %#x" % attr,
       d[20:24] == bytes([1, 7, 2, 3]) and d[24:26] == b"\0\0" and attr_of(d) == attr)
    ok(what + ": sent from UDP port 4791 of " + src_ip, fam == socket.AF_INET6 and sport == 4791 and
       p[8:24] == mapped(src_ip))
    want = icrc(d, src_ip, src_ip, 4791)
    ok(what + ": ICRC valid (%08x)" % want, struct.unpack("<I", d[276:280])[0] == want)
    return d


def main():
    if REQ_TEMPLATE is None or SIDR_TEMPLATE is None:
        print("note: wire samples not found, using synthetic MADs")
        globals()["REQ_TEMPLATE"] = bytes(256)
        globals()["SIDR_TEMPLATE"] = bytes(256)
    w = Wire()
    S1, S2, S3, S4 = 0x1061C06, 0x1061C07, 0x1061C08, 0x1061C09  # RDMA_PS_TCP ports 0x1c06...
    SU = 0x1060FFF  # nobody listens

    # --- IDs ---
    a, b, c = Client(), Client(), Client()
    ids = [a.alloc_id() for _ in range(50)]
    ok("ALLOC_COMM_ID gives 50 distinct nonzero 32-bit IDs",
       len(set(ids)) == 50 and all(0 < i <= 0xFFFFFFFF for i in ids))
    ok("FREE_COMM_ID of another client's ID is -ENOENT, as for a free one", b.free_id(ids[0]) == -errno.ENOENT)
    ok("FREE_COMM_ID of an own ID is 0", a.free_id(ids[0]) == 0)
    ok("FREE_COMM_ID twice is -ENOENT", a.free_id(ids[0]) == -errno.ENOENT)
    ok("FREE_COMM_ID of 0 is -ENOENT", a.free_id(0) == -errno.ENOENT)
    ok("FREE_COMM_ID with a short body is -EINVAL", a.call(FREE_COMM_ID, b"\1")[0] == -errno.EINVAL)
    ok("a freed ID is not handed out again at once", a.alloc_id() not in ids)
    a_id, b_id, c_id = a.alloc_id(), b.alloc_id(), c.alloc_id()

    # --- listens ---
    ok("LISTEN S1 (any address) by A is 0", a.listen(S1) == 0)
    ok("LISTEN S1 again by A is 0", a.listen(S1) == 0)
    ok("LISTEN S1 (any) by B is -EADDRINUSE", b.listen(S1) == -errno.EADDRINUSE)
    ok("LISTEN S1 on :: by B is -EADDRINUSE (:: is any)", b.listen(S1, "::") == -errno.EADDRINUSE)
    ok("LISTEN S2 by B is 0", b.listen(S2) == 0)
    # as TCP ports: a wildcard listen covers every address of its port
    ok("LISTEN S1 on 127.0.0.1 by C is -EADDRINUSE (A's any covers it)",
       c.listen(S1, "127.0.0.1") == -errno.EADDRINUSE)
    ok("LISTEN S1 on 127.0.0.1 (AF_INET form) by B is -EADDRINUSE",
       b.listen(S1, "v4:127.0.0.1") == -errno.EADDRINUSE)
    ok("LISTEN S1 on 127.0.0.1 by A itself is 0 (one process sorts its own out)", a.listen(S1, "127.0.0.1") == 0)
    ok("LISTEN with flags is -EINVAL", b.listen(S4, None, 1) == -errno.EINVAL)
    ok("LISTEN with family AF_UNIX is -EINVAL", b.listen(S4, "fam:1") == -errno.EINVAL)
    ok("LISTEN with a short body is -EINVAL", b.call(LISTEN, b"\0" * 20)[0] == -errno.EINVAL)
    ok("UNLISTEN of another client's listen is -EPERM", b.unlisten(S1) == -errno.EPERM)
    ok("UNLISTEN of nothing is -ENOENT", b.unlisten(S4) == -errno.ENOENT)
    ok("LISTEN S3 on ::ffff:0.0.0.0 (any IPv4) by B is 0", b.listen(S3, "0.0.0.0") == 0)
    ok("LISTEN S3 on :: by A is -EADDRINUSE (any covers any IPv4)", a.listen(S3) == -errno.EADDRINUSE)
    ok("LISTEN S3 on ::1 by A is 0 (any IPv4 does not cover IPv6)", a.listen(S3, "::1") == 0)
    ok("LISTEN S4 on 127.0.0.1 by C is 0", c.listen(S4, "127.0.0.1") == 0)
    ok("LISTEN S4 on ::ffff:0.0.0.0 by A is -EADDRINUSE (covers C's)", a.listen(S4, "0.0.0.0") == -errno.EADDRINUSE)
    k = counters()
    ok("STATUS counts listens (%s)" % k.get("listens"), k.get("listens") == 6)

    # --- REQ routing by service ID and address ---
    sent = w.send(req_mad(S1, 0x1111))
    p = a.pkt()
    ok("REQ for S1 to 127.0.0.1 reaches A", p is not None and payload(p) == sent)
    if p is not None:
        ok("PKT meta: source is the sender, destination 127.0.0.1:4791",
           p[8:24] == mapped("127.0.0.1") and struct.unpack(">H", p[2:4])[0] == w.sport and
           p[36:52] == mapped("127.0.0.1") and struct.unpack(">H", p[30:32])[0] == 4791)
    ok("... and not B or C", b.pkt(0.2) is None and c.pkt(0.1) is None)
    ok("UNLISTEN S1 on 127.0.0.1 (AF_INET form) by A is 0", a.unlisten(S1, "v4:127.0.0.1") == 0)
    sent = w.send(req_mad(S1, 0x1112))
    ok("then a REQ for S1 still reaches A (any)", payload(a.pkt()) == sent)
    sent = w.send(req_mad(S4, 0x1113))
    ok("REQ for S4 to 127.0.0.1 reaches C", payload(c.pkt()) == sent)
    sent = w.send(req_mad(S2, 0x2221))
    ok("REQ for S2 reaches B", payload(b.pkt()) == sent)
    ok("... and only B", a.pkt(0.2) is None and c.pkt(0.1) is None)
    sent = w.send(sidr_req_mad(S2, 0x2222))
    ok("SIDR_REQ for S2 reaches B", payload(b.pkt()) == sent)
    sent = w.send(req_mad(S3, 0x3331))
    ok("REQ for S3 to an IPv4 address reaches B (any IPv4)", payload(b.pkt()) == sent)
    w6 = None
    if socket.has_ipv6:
        try:
            w6 = Wire("::1", "::1")
        except OSError:
            w6 = None
        if w6 is not None:
            sent = w6.send(req_mad(S3, 0x3332))
            p = a.pkt()
            ok("REQ for S3 to ::1 reaches A (any IPv4 does not take IPv6)", payload(p) == sent)
            if p is not None:
                ok("PKT meta over IPv6: destination ::1", p[36:52] == mapped("::1"))

    # --- a REQ sent again, and a REJ timeout, go where the REQ went ---
    GUID = 0x0011223344556677
    sent = w.send(req_mad(S2, 0x4441, GUID))
    ok("REQ X for S2 reaches B", payload(b.pkt()) == sent)
    ok("UNLISTEN S2 by B is 0", b.unlisten(S2) == 0)
    sent = w.send(req_mad(S2, 0x4441, GUID, tid=0x99))
    ok("REQ X sent again still reaches B, which no longer listens", payload(b.pkt()) == sent)
    rej = ids_mad(REJ, 0x4441, 0)
    rej[34:36] = struct.pack(">H", 1)  # timeout
    rej[36:44] = struct.pack(">Q", GUID)
    sent = w.send(rej)
    ok("REJ timeout (Remote Comm ID 0, ARI = REQ's CA GUID) reaches B", payload(b.pkt()) == sent)
    rej[36:44] = struct.pack(">Q", GUID + 1)
    w.send(rej)
    ok("... but not with another CA GUID", b.pkt(0.3) is None)
    ok("LISTEN S2 by B again is 0", b.listen(S2) == 0)

    # --- everything else by the recipient's Communication ID ---
    for attr, name, to, other in ((REP, "REP", a, b), (RTU, "RTU", b, a), (MRA, "MRA", a, b),
                                  (REJ, "REJ", b, a), (DREQ, "DREQ", a, b), (DREP, "DREP", b, a),
                                  (LAP, "LAP", a, b), (APR, "APR", b, a)):
        rid = a_id if to is a else b_id
        sent = w.send(ids_mad(attr, 0xABCD, rid))
        ok("%s to Remote Comm ID %#x reaches its owner only" % (name, rid),
           payload(to.pkt()) == sent and other.pkt(0.1) is None and c.pkt(0.05) is None)
    sent = w.send(sidr_rep_mad(c_id))
    ok("SIDR_REP to Request ID %#x reaches its owner" % c_id, payload(c.pkt()) == sent)
    # The recipient is named by Remote Comm ID, not Local.
    w.send(ids_mad(REP, a_id, 0x5A5A5A5A))
    ok("a REP naming A only as its Local Comm ID does not reach A", a.pkt(0.3) is None)

    # --- forwarded by a client (PKT c->d) ---
    m = req_mad(S1, 0x6661)
    p = dgram(m, "127.0.0.1", 5000, "127.0.0.1")
    b.forward(p, ("127.0.0.1", 5000), ("127.0.0.1", 4791))
    ok("a REQ forwarded by B through the daemon reaches the listener A", payload(a.pkt()) == p)

    # --- the daemon's answers ---
    k0 = counters()
    p_id = c_id
    t0 = time.time()
    w.send(req_mad(SU, p_id, tid=0xFEEDF00D))
    d = check_answer("REJ to a REQ for a service nobody listens on", c.pkt(), REJ, "127.0.0.1", t0)
    if d is not None:
        mm = d[20:276]
        ok("REJ: TID of the REQ, Local Comm ID 0, Remote Comm ID = REQ's Local",
           mm[8:16] == struct.pack(">Q", 0xFEEDF00D) and u32(mm, 24) == 0 and u32(mm, 28) == p_id)
        ok("REJ: message REJected 0 (REQ), no ARI, reason 8 (invalid service ID)",
           mm[32] >> 6 == 0 and mm[33] >> 1 == 0 and struct.unpack(">H", mm[34:36])[0] == 8)
    t0 = time.time()
    w.send(sidr_req_mad(SU, c_id, tid=0xABC))
    d = check_answer("SIDR_REP to a SIDR_REQ for an unknown service", c.pkt(), SIDR_REP, "127.0.0.1", t0)
    if d is not None:
        mm = d[20:276]
        ok("SIDR_REP: Request ID echoed, status 1, Service ID echoed",
           u32(mm, 24) == c_id and mm[28] == 1 and mm[36:44] == struct.pack(">Q", SU))
    w.send(ids_mad(DREQ, c_id, 0x7E7E7E7E, tid=0xD))
    d = check_answer("DREP to a DREQ for an ID nobody owns", c.pkt(), DREP, "127.0.0.1")
    if d is not None:
        mm = d[20:276]
        ok("DREP: Local = DREQ's Remote, Remote = DREQ's Local",
           u32(mm, 24) == 0x7E7E7E7E and u32(mm, 28) == c_id)
    w.send(ids_mad(REP, 0x1, 0x7E7E7E7E))
    ok("a REP for an ID nobody owns is dropped, not answered", c.pkt(0.3) is None)
    k1 = counters()
    ok("counted: rej_sent +1, sidr_rep_sent +1, drep_sent +1, no_listener +2, unknown_id +2",
       k1["rej_sent"] - k0["rej_sent"] == 1 and k1["sidr_rep_sent"] - k0["sidr_rep_sent"] == 1 and
       k1["drep_sent"] - k0["drep_sent"] == 1 and k1["no_listener"] - k0["no_listener"] == 2 and
       k1["unknown_id"] - k0["unknown_id"] == 2)
    if socket.has_ipv6 and w6 is not None:
        w6.send(req_mad(SU, c_id))
        check_answer("REJ over IPv6", c.pkt(), REJ, "::1")

    # --- malformed and unroutable QP1 datagrams ---
    k0 = counters()
    good = dgram(req_mad(SU, c_id), "127.0.0.1", w.sport, "127.0.0.1")
    bad_class = mad(REQ)
    bad_class[1] = 0x04  # PerfMgt
    cpi = mad(0x0001)
    cpi[3] = 0x01  # ClassPortInfo Get
    bad_ver = req_mad(SU, c_id)
    bad_ver[2] = 1
    bad_base = req_mad(SU, c_id)
    bad_base[0] = 2
    unknown_attr = mad(0x0020)
    w.raw(good[:12])                                       # BTH only
    w.raw(good[:100])                                      # truncated
    w.raw(good[:279])                                      # one byte short
    w.raw(good + b"x")                                     # one byte long
    w.raw(bytes([0x64, 0, 0xFF, 0xFF, 0, 0, 0, 1]) + os.urandom(272))  # random after the BTH
    w.send(req_mad(SU, c_id), qkey=0x11111111)             # wrong Q_Key
    w.send(req_mad(SU, c_id), pkey=0x1234)                 # foreign P_Key
    w.send(req_mad(SU, c_id), opcode=0x04)                 # RC SEND_ONLY
    w.send(req_mad(SU, c_id), byte1=0x30)                  # pad count 3
    w.send(bad_base)
    malformed_sent = 10
    w.send(bad_class)
    w.send(cpi)
    w.send(bad_ver)
    w.send(unknown_attr)
    time.sleep(0.3)
    k1 = counters()
    got = k1["malformed"] - k0["malformed"]
    ok("%d malformed QP1 datagrams counted (%d)" % (malformed_sent, got), got == malformed_sent)
    ok("a MAD of another class counted as not_cm", k1["not_cm"] - k0["not_cm"] == 1)
    ok("ClassPortInfo Get, class version 1, unknown attribute counted as unsupported",
       k1["unsupported"] - k0["unsupported"] == 3)
    ok("all 14 dropped as no_qp1_owner", k1["no_qp1_owner"] - k0["no_qp1_owner"] == 14)
    ok("none of them answered", k1["rej_sent"] == k0["rej_sent"])
    ok("none reached a client", a.pkt(0.1) is None and b.pkt(0.1) is None and c.pkt(0.1) is None)

    # --- rate limit of the daemon's answers (from another source address) ---
    try:
        w2 = Wire("127.0.0.2", "127.0.0.1")
    except OSError:
        w2 = None
    if w2 is not None:
        k0 = counters()
        t0 = time.time()
        for i in range(200):
            w2.send(req_mad(SU, c_id, tid=i))
        most = 40 + 20 * (time.time() - t0) + 2  # burst, then 20 per second
        time.sleep(0.3)
        n = c.drain(0.3)
        k1 = counters()
        lim = k1["answer_limited"] - k0["answer_limited"]
        ok("200 REQs for nothing from one address: %d REJs (at most %d), %d held back" % (n, most, lim),
           40 <= n <= most and n + lim == 200)
        t0 = time.time()
        w.send(req_mad(SU, c_id))
        check_answer("another source is still answered", c.pkt(), REJ, "127.0.0.1", t0)

    # --- CLAIM_QP1 kept, below CM routing ---
    legacy = Client()
    ok("CLAIM_QP1 still works", legacy.call(CLAIM)[0] == 0)
    sent = w.send(ids_mad(REP, 1, 0x7E7E7E7F))
    ok("a CM MAD no process owns goes to the CLAIM_QP1 holder", payload(legacy.pkt()) == sent)
    sent = w.send(req_mad(SU, c_id))
    ok("a REQ nobody listens for goes to it too, not answered", payload(legacy.pkt()) == sent and
       c.pkt(0.3) is None)
    sent = w.send(req_mad(S2, 0x8881))
    ok("a REQ for a listener still goes to the listener", payload(b.pkt()) == sent and
       legacy.pkt(0.2) is None)
    raw = bytes([0x64, 0, 0xFF, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0]) + b"mad"
    w.raw(raw)
    ok("a malformed QP1 datagram goes to it as before", payload(legacy.pkt()) == raw)
    legacy.close()

    # --- disconnecting frees IDs and listens ---
    k0 = counters()
    a.close()
    time.sleep(0.3)
    k1 = counters()
    ok("A's 51 IDs are freed when it disconnects (%d -> %d)" % (k0["comm ids"], k1["comm ids"]),
       k0["comm ids"] - k1["comm ids"] == 51)
    ok("A's listens are freed (%d -> %d)" % (k0["listens"], k1["listens"]), k0["listens"] - k1["listens"] == 2)
    w.send(ids_mad(REP, 0x1, a_id))
    time.sleep(0.2)
    ok("a REP to A's freed ID is dropped as unknown", counters()["unknown_id"] - k1["unknown_id"] == 1)
    ok("C can now listen on S1", c.listen(S1) == 0)
    sent = w.send(req_mad(S1, 0x9991))
    ok("... and gets its REQs", payload(c.pkt()) == sent)
    b.close()
    c.close()
    time.sleep(0.3)
    k = counters()
    ok("no IDs, listens or remembered REQs left with no clients",
       k["comm ids"] == 0 and k["listens"] == 0 and k["cm peers"] == 0)
    return 1 if failed() else 0


if __name__ == "__main__":
    sys.exit(main())
