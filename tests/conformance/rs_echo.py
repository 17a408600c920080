#!/usr/bin/env python3
"""A Python TCP server and client for t_rsocket: run under
`softrdma-run --rsocket`, their sockets are rsockets.  The server accepts
one connection (socket.accept: accept4, which rdma-core 44's librspreload
lacks) and answers with the length and SHA-256 of what it read until the
end of the stream; the client sends SIZE pseudo-random bytes in pieces of
every size, half-closes, and checks the answer.

    rs_echo.py server PORT
    rs_echo.py client PORT SIZE
"""
import hashlib
import random
import socket
import sys


def server(port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    c, peer = ls.accept()
    h, n = hashlib.sha256(), 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        h.update(d)
        n += len(d)
    c.sendall(b"%d %s\n" % (n, h.hexdigest().encode()))
    c.close()
    ls.close()
    print("server: %d bytes from %s" % (n, peer[0]))


def client(port, size):
    rnd = random.Random(size)
    data = rnd.randbytes(size)
    c = socket.create_connection(("127.0.0.1", port), timeout=60)
    off = 0
    while off < size:
        k = rnd.randint(1, 200000)
        c.sendall(data[off:off + k])
        off += k
    c.shutdown(socket.SHUT_WR)
    ans = b""
    while not ans.endswith(b"\n"):
        d = c.recv(1000)
        if not d:
            break
        ans += d
    want = b"%d %s\n" % (size, hashlib.sha256(data).hexdigest().encode())
    if ans != want:
        print("client: the server read %r, sent %r" % (ans, want))
        sys.exit(1)
    print("client: %d bytes, the server's SHA-256 matches" % size)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "server":
        server(int(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "client":
        client(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(__doc__)
