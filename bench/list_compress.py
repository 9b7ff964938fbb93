#!/usr/bin/env python3
"""`list-compress-depth` beside Redis: the memory one long list takes with depth 0, 1 and 2
(elements: job-like JSON, or with `--kind id` job IDs such as BullMQ keeps in its lists) (MEMORY USAGE … SAMPLES 0, and the growth of INFO's used_memory), and how
long reading it whole (LRANGE 0 -1) and reading its middle (LINDEX) take.

    REDIS_SERVER=<7.2.6 redis-server> python3 bench/list_compress.py [--elements 200000] [--kind json|id]

Atoll is target/release/atoll-server (cargo build --release first), or $ATOLL_SERVER. Stdlib only: commands are
sent as RESP over a plain socket, pipelined in batches.
"""
import argparse
import json
import os
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATOLL = os.environ.get("ATOLL_SERVER", os.path.join(ROOT, "target", "release", "atoll-server"))
REDIS = os.environ.get("REDIS_SERVER", "redis-server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def send(self, *cmds):
        out = bytearray()
        for args in cmds:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t in (b"+", b"-"):
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError(line)

    def cmd(self, *args):
        self.send(args)
        return self.read()


def start(binary, port, d):
    p = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", d,
                          "--enable-debug-command", "yes", "--loglevel", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            c = Conn(port)
            if c.cmd("PING") == "PONG":
                return p, c
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{binary} did not start")


KIND = "json"


def element(i):
    if KIND == "id":
        return b"%d" % (1000000 + i * 7)
    return json.dumps({"id": i, "queue": "mail", "state": "waiting", "attempts": i % 3,
                       "user": "user%05d" % (i % 977), "data": "x" * (i % 7 * 20)}).encode()


def used(c):
    info = c.cmd("INFO", "memory").decode()
    return int(next(l.split(":")[1] for l in info.splitlines() if l.startswith("used_memory:")))


def measure(c, depth, n):
    c.cmd("FLUSHALL")
    c.cmd("CONFIG", "SET", "list-compress-depth", depth)
    before = used(c)
    for start_at in range(0, n, 1000):
        batch = [("RPUSH", "jobs", element(i)) for i in range(start_at, min(n, start_at + 1000))]
        c.send(*batch)
        for _ in batch:
            c.read()
    usage = c.cmd("MEMORY", "USAGE", "jobs", "SAMPLES", "0")
    grown = used(c) - before
    t = time.perf_counter()
    whole = c.cmd("LRANGE", "jobs", 0, -1)
    lrange = time.perf_counter() - t
    assert len(whole) == n and whole[n // 2] == element(n // 2)
    t = time.perf_counter()
    for k in range(200):
        assert c.cmd("LINDEX", "jobs", n // 4 + k * 37) == element(n // 4 + k * 37)
    lindex = (time.perf_counter() - t) / 200
    return usage, grown, lrange, lindex


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=200000)
    ap.add_argument("--kind", choices=("json", "id"), default="json")
    a = ap.parse_args()
    global KIND
    KIND = a.kind
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {a.elements} elements of {len(element(0))}-"
          f"{len(element(6))} bytes")
    print(f"# beside: {subprocess.run([REDIS, '--version'], capture_output=True, text=True).stdout.strip()}")
    with tempfile.TemporaryDirectory() as d:
        servers = {}
        for name, binary in (("redis", REDIS), ("atoll", ATOLL)):
            sub = os.path.join(d, name)
            os.mkdir(sub)
            servers[name] = start(binary, free_port(), sub)
        try:
            print("| depth | server | MEMORY USAGE | used_memory grew | LRANGE 0 -1 | LINDEX in the middle |")
            print("|---|---|---|---|---|---|")
            for depth in (0, 1, 2):
                for name, (_, c) in servers.items():
                    usage, grown, lrange, lindex = measure(c, depth, a.elements)
                    print(f"| {depth} | {name} | {usage:,} | {grown:,} | {lrange * 1000:.0f} ms | "
                          f"{lindex * 1e6:.0f} µs |")
        finally:
            for p, _ in servers.values():
                p.terminate()
                p.wait()


if __name__ == "__main__":
    main()
