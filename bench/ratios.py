#!/usr/bin/env python3
"""bench/ratios.py RESULTS.CSV RATIOS.MD: the targets of issue 12 as ratios
of numbers measured in one run of bench/run.sh, each with PASS or MISS
(n/a when a number is missing), and beside the latency targets what the
machine itself does (a plain socket ping-pong's tail: "info", no target).  Prints a plain-text table and writes the
same as Markdown (for bench/README.md)."""
import csv
import sys

d = {}
for r in csv.DictReader(open(sys.argv[1])):
    try:
        d[(r["metric"], r["size"])] = float(r["value"])
    except (TypeError, ValueError):
        pass


def v(metric, size):
    return d.get((metric, str(size)))


rows = []  # (target, measured, ratio text, verdict)


def ratio(target, a, b, want, higher_is_better, what_a, what_b):
    """a/b against want: >= want when higher is better, else <= want."""
    if a is None or b is None or b == 0:
        rows.append((target, "n/a", "n/a", "n/a"))
        return
    r = a / b
    ok = r >= want if higher_is_better else r <= want
    rows.append((target, f"{what_a} {a:g} / {what_b} {b:g}", f"{r:.2f}", "PASS" if ok else "MISS"))


def absolute(target, a, want, higher_is_better, what):
    if a is None:
        rows.append((target, "n/a", "n/a", "n/a"))
        return
    ok = a >= want if higher_is_better else a <= want
    rows.append((target, f"{what} {a:g}", "", "PASS" if ok else "MISS"))


ratio("ib_write_lat 8 B <= 1.0x UCX-tcp ucp_am_lat 8 B", v("softrdma_write_lat_median", 8),
      v("ucx_tcp_am_lat", 8), 1.0, False, "write_lat", "am_lat")
ratio("ib_write_lat 8 B p99 <= 3x its median", v("softrdma_write_lat_p99", 8),
      v("softrdma_write_lat_median", 8), 3.0, False, "p99", "median")


def context(what, a, b, what_a, what_b):
    """A ratio that is no target: what the machine itself does, beside
    which a target's number is read."""
    if a is None or b is None or b == 0:
        rows.append((what, "n/a", "n/a", "info"))
        return
    rows.append((what, f"{what_a} {a:g} / {what_b} {b:g}", f"{a / b:.2f}", "info"))


context("  the machine: UDP ping-pong spinning on its socket, p99 / median", v("sock_udp_lat_p99", 8),
        v("sock_udp_lat_median", 8), "p99", "median")
context("  the machine: TCP ping-pong spinning on its socket, p99 / median", v("sock_tcp_lat_p99", 8),
        v("sock_tcp_lat_median", 8), "p99", "median")
context("  p99.9: Soft-RoCE ib_write_lat 8 B / UDP spinning ping-pong", v("softrdma_write_lat_p999", 8),
        v("sock_udp_lat_p999", 8), "write_lat", "udp")
context("  p99.9: Soft-iWARP ib_write_lat 8 B / TCP spinning ping-pong", v("iwarp_write_lat_p999", 8),
        v("sock_tcp_lat_p999", 8), "iwarp", "tcp")
context("  ib_write_lat 8 B median / UDP spinning ping-pong median", v("softrdma_write_lat_median", 8),
        v("sock_udp_lat_median", 8), "write_lat", "udp")
ratio("ib_send_lat -e 8 B <= 1.0x qperf tcp_lat 8 B (blocking)", v("softrdma_send_lat_event_median", 8),
      v("qperf_tcp_lat", 8), 1.0, False, "send_lat -e", "tcp_lat")
ratio("ib_read_lat -e 8 B <= 1.5x qperf tcp_lat 8 B (blocking)", v("softrdma_read_lat_event_median", 8),
      v("qperf_tcp_lat", 8), 1.5, False, "read_lat -e", "tcp_lat")
context("  Soft-iWARP ib_send_lat -e 8 B / qperf tcp_lat 8 B", v("iwarp_send_lat_event_median", 8),
        v("qperf_tcp_lat", 8), "send_lat -e", "tcp_lat")
context("  Soft-iWARP ib_read_lat -e 8 B / qperf tcp_lat 8 B", v("iwarp_read_lat_event_median", 8),
        v("qperf_tcp_lat", 8), "read_lat -e", "tcp_lat")
for sz in (65536, 262144, 1048576):
    ratio(f"ib_read_bw {sz // 1024} KiB >= 0.9x ib_write_bw", v("softrdma_read_bw", sz),
          v("softrdma_write_bw", sz), 0.9, True, "read", "write")
absolute("64 B message rate >= 1 M msg/s (ib_write_bw defaults)", v("softrdma_write_msg_rate", 64), 1.0, True,
         "Mpps")
absolute("64 B message rate >= 1 M msg/s (ib_write_bw -l 32)", v("softrdma_write_msg_rate_l32", 64), 1.0, True,
         "Mpps")
ratio("64 B message rate >= 1.0x qperf udp_bw msg_rate", v("softrdma_write_msg_rate", 64),
      v("qperf_udp_msg_rate", 64), 1.0, True, "Mpps", "udp Mpps")
ratio("ib_write_bw 64 KiB >= 0.6x qperf udp_bw 64 KiB", v("softrdma_write_bw", 65536), v("qperf_udp_bw", 65536),
      0.6, True, "MB/s", "udp MB/s")
context("  the same with the ICRC off (crc = off)", v("softrdma_write_bw_nocrc", 65536), v("qperf_udp_bw", 65536),
        "MB/s", "udp MB/s")
ratio("Soft-iWARP write_bw 4 KiB >= 1.0x qperf tcp_bw 4 KiB", v("iwarp_write_bw", 4096), v("qperf_tcp_bw", 4096),
      1.0, True, "MB/s", "tcp MB/s")
context("  the same with the MPA CRC off (crc = off)", v("iwarp_write_bw_nocrc", 4096), v("qperf_tcp_bw", 4096),
        "MB/s", "tcp MB/s")
absolute("memory per idle RC QP <= 32 KiB", v("softrdma_mem_per_qp", 10000) or v("softrdma_mem_per_qp", 1000),
         32.0, False, "KiB")
absolute("10,000 QPs in one process", v("softrdma_qps_ok", 10000), 1.0, True, "ok")

w = [max(len(r[i]) for r in rows + [("target", "measured", "ratio", "")]) for i in range(4)]
for r in rows:
    print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:>{w[2]}}  {r[3]}")

with open(sys.argv[2], "w") as f:
    f.write("| target | measured (same run) | ratio | |\n|---|---|---|---|\n")
    for r in rows:
        f.write(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |\n")
