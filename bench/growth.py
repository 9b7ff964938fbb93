#!/usr/bin/env python3
"""Latency while the keyspace grows (issue 4: no stop-the-world rehash).

One client connection (pinned to CPU 1) sends SET key:%012d with a 32-byte value in pipelined
batches of 16, waits for the 16 replies, and records each batch's round trip. Phase 1 inserts
keys 0..N (the keyspace grows from 0 to N; every shard's table doubles many times); phase 2
sends exactly the same bytes again, so every SET overwrites (the keyspace stays at N: steady
state). The only difference between the phases is growth, so p99.9(phase 1) / p99.9(phase 2)
is the cost of growing. Reported for the server under test and for redis-server in the same run.

    python3 bench/growth.py --keys 10000000
"""
import argparse, gc, os, socket, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (server start/stop helpers)

BATCH = 16
VAL = b"v" * 32


def batch_bytes(b):
    return b"".join(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$32\r\n%s\r\n" % (i, VAL)
                    for i in range(b * BATCH, (b + 1) * BATCH))


def phase(s, nbatches):
    lat = []
    reply = b"+OK\r\n" * BATCH
    for b in range(nbatches):
        req = batch_bytes(b)
        t0 = time.perf_counter_ns()
        s.sendall(req)
        got = b""
        while len(got) < len(reply):
            got += s.recv(65536)
        lat.append(time.perf_counter_ns() - t0)
        if got != reply:
            raise SystemExit(f"unexpected reply {got[:60]!r}")
    return lat


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] / 1000.0


def run(kind, keys, extra=()):
    p, port = bench.start(kind, extra=extra)
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n = keys // BATCH
        grow = phase(s, n)
        rss = bench.rss(p.pid)
        steady = phase(s, n)
        res = {}
        for name, xs in (("growing", grow), ("steady", steady)):
            res[name] = (statistics.median(xs) / 1000, pct(xs, 0.99), pct(xs, 0.999), max(xs) / 1000)
            print(f"{kind:5} {name:8} batch RTT µs: p50 {res[name][0]:7.1f}  p99 {res[name][1]:7.1f}  "
                  f"p99.9 {res[name][2]:7.1f}  max {res[name][3]:9.1f}", flush=True)
        print(f"{kind:5} p99.9 growing / steady = {res['growing'][2] / res['steady'][2]:.2f}x   "
              f"(RSS at {keys} keys: {rss / 2**20:.0f} MiB)", flush=True)
        return res
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--servers", default="atoll,redis")
    ap.add_argument("--server-args", default="", help="extra arguments for every server, e.g. "
                    "'--jemalloc-bg-thread no'")
    a = ap.parse_args()
    os.sched_setaffinity(0, {1})
    gc.disable()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} keys={a.keys} batch={BATCH}")
    for kind in a.servers.split(","):
        run(kind, a.keys, a.server_args.split())


if __name__ == "__main__":
    main()
