# softrdmad's protocol (src/common/ipc.h) spoken directly, for the daemon
# tests (daemon_ipc_test.py, daemon_cm_test.py, daemon_mcast_test.py,
# security_test.py, security_attack.py): the message types, a client
# connection, the bodies, BTH headers, the ICRC, the STATUS counters, and
# ok() checks with a failure count.
# Standard library only.
import os
import socket
import struct
import time
import zlib

NAME = "\0" + os.environ.get("SOFTRDMA_DAEMON_SOCK", "softrdmad-v1")
HELLO, ALLOC_QPN, FREE_QPN, CLAIM, PKT, REPLY, STATUS = range(1, 8)
ALLOC_COMM_ID, FREE_COMM_ID, LISTEN, UNLISTEN, CM_WILL = 8, 9, 10, 11, 12
JOIN, LEAVE = 13, 14
QP_PORT, QP_PORT_GET = 15, 16
META = 64  # struct sr_ipc_pkt: src, dst (sockaddr_in6), len, tclass, pad
GSI_QKEY = 0x80010000

_fails = 0


def ok(what, cond):
    global _fails
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        _fails += 1
    return cond


def failed():
    return _fails


class Client:
    """One connection to the daemon.  PKT messages that arrive while a
    reply is awaited are kept for pkt()."""

    def __init__(self, hello=True):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(NAME)
        self.pkts = []
        self.hello = self.call(HELLO, struct.pack("<i", os.getpid()))[0] if hello else None

    def send(self, t, body=b"", version=1):
        self.s.send(struct.pack("<HHI", t, version, len(body)) + body)

    def recv(self, timeout=5):
        self.s.settimeout(timeout)
        m = self.s.recv(70000)
        if not m:
            raise EOFError
        t, _, _ = struct.unpack("<HHI", m[:8])
        return t, m[8:]

    def reply(self, timeout=5):
        """The next REPLY: (val, text)."""
        while True:
            t, b = self.recv(timeout)
            if t == REPLY:
                return struct.unpack("<q", b[:8])[0], b[8:]
            if t == PKT:
                self.pkts.append(b)

    def call(self, t, body=b"", version=1):
        self.send(t, body, version)
        return self.reply()

    def calls(self, t, bodies):
        """Many requests sent back to back, then their replies: [val]."""
        for b in bodies:
            self.send(t, b)
        return [self.reply()[0] for _ in bodies]

    def status(self):
        return self.call(STATUS)[1].decode(errors="replace")

    def pkt(self, timeout=1.0):
        """Next PKT body (sr_ipc_pkt + datagram), or None."""
        if self.pkts:
            return self.pkts.pop(0)
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return None
            try:
                t, b = self.recv(left)
            except socket.timeout:
                return None
            if t == PKT:
                return b

    def drain(self, quiet=0.2):
        n = 0
        while self.pkt(quiet) is not None:
            n += 1
        return n

    def alloc_id(self):
        return self.call(ALLOC_COMM_ID)[0]

    def free_id(self, i):
        return self.call(FREE_COMM_ID, struct.pack("<II", i, 0))[0]

    def listen(self, sid, addr=None, flags=0, t=LISTEN):
        return self.call(t, listen_body(sid, addr, flags))[0]

    def unlisten(self, sid, addr=None):
        return self.listen(sid, addr, 0, UNLISTEN)

    def forward(self, dgram, src=None, dst=None):
        """Hand the daemon a datagram to route (PKT c->d), with the
        addresses the client claims it came from and to."""
        meta = (sockaddr6(*src) if src else bytes(28)) + (sockaddr6(*dst) if dst else bytes(28))
        self.send(PKT, meta + struct.pack("<II", len(dgram), 0) + dgram)

    def close(self):
        self.s.close()


def mapped(ip):
    if ":" in ip:
        return socket.inet_pton(socket.AF_INET6, ip)
    return bytes(10) + b"\xff\xff" + socket.inet_aton(ip)


def sockaddr6(ip, port=0):
    return struct.pack("<H", socket.AF_INET6) + struct.pack(">HI", port, 0) + mapped(ip) + struct.pack("<I", 0)


def listen_body(sid, addr, flags=0):
    """struct sr_ipc_listen (48 bytes).  addr: None, "v4:IP" (sockaddr_in), or an IP (sockaddr_in6)."""
    if addr is None:
        sa = bytes(28)
    elif addr.startswith("v4:"):
        sa = struct.pack("<H", socket.AF_INET) + struct.pack(">H", 0) + socket.inet_aton(addr[3:]) + bytes(8)
        sa += bytes(28 - len(sa))
    elif addr.startswith("fam:"):
        sa = struct.pack("<H", int(addr[4:])) + bytes(26)
    else:
        sa = sockaddr6(addr)
    return struct.pack("<Q", sid) + sa + struct.pack("<II", flags, 0) + bytes(4)


def qpn_body(q=0, qp_type=2):
    return struct.pack("<II", q, qp_type)


def port_body(q, port=0):
    """struct sr_ipc_qp_port"""
    return struct.pack("<IHH", q, port, 0)


def bth(qpn, tag=b"", opcode=0x64):
    """A BTH (UD SEND_ONLY by default) for DestQP qpn, then tag."""
    return bytes([opcode, 0, 0xff, 0xff, 0, (qpn >> 16) & 255, (qpn >> 8) & 255, qpn & 255, 0, 0, 0, 0]) + tag


def icrc(pkt, src, dst, sport, dport=4791, ipv4_id=0):
    """ICRC of pkt (BTH .. ICRC) as sent from src:sport to dst:dport (IBTA A17)."""
    n = len(pkt)
    body = bytearray(pkt[:n - 4])
    body[4] = 0xFF  # BTH resv8a / FECN / BECN
    if ":" in src:
        ph = bytes([0x6F, 0xFF, 0xFF, 0xFF]) + struct.pack(">H", 8 + n) + bytes([17, 0xFF])
        ph += mapped(src) + mapped(dst)
    else:
        ph = bytes([0x45, 0xFF]) + struct.pack(">HHH", 20 + 8 + n, ipv4_id, 0x4000)
        ph += bytes([0xFF, 17, 0xFF, 0xFF]) + socket.inet_aton(src) + socket.inet_aton(dst)
    ph += struct.pack(">HHH", sport, dport, 8 + n) + b"\xff\xff"
    return zlib.crc32(b"\xff" * 8 + ph + bytes(body)) & 0xFFFFFFFF


def counters(text):
    """name=N pairs of a STATUS text (the 'dropped' and 'cm' lines) and its
    'key N' lines."""
    out = {}
    for line in text.splitlines():
        for w in line.split():
            if "=" in w:
                k, v = w.split("=", 1)
                if v.isdigit():
                    out[k] = int(v)
        for key in ("comm ids", "listens", "cm peers", "qpns", "clients", "forwarded", "cm wills sent", "cm wills queued"):
            if line.startswith(key + " "):
                out[key] = int(line.split()[len(key.split())])
    return out
