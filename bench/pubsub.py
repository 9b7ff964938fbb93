#!/usr/bin/env python3
"""Pub/Sub fan-out and client-side-caching cost, Atoll beside Redis (issue 18, DESIGN §4).

fanout: N subscribers (default 1,000) on one channel, held by a reader process pinned to CPU 1
that drains every socket with epoll; redis-benchmark (also on CPU 1) publishes a 16-byte
message. The server is pinned to CPU 0 (Atoll with one worker: the per-core comparison; add
"atoll2" for two workers, which then share CPU 0-1 with the clients). Reported: deliveries
per second (publishes x receivers, until the reader has every byte) and server CPU us per
delivered message (utime+stime from /proc over the whole run).

tracking: SET throughput and server CPU per op with no tracking client, then with one RESP3
client in CLIENT TRACKING mode that has read the keys being written (so every SET looks its
key up in the tracking table and sends an invalidation) — the cost of tracking being on.

Usage: python3 bench/pubsub.py [--rounds 3] [--subscribers 1000] [--publishes 20000]
                               [--only fanout|tracking] [--kinds redis,atoll]
"""
import argparse, multiprocessing, os, select, socket, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import HZ, proc_cpu_ticks, start  # noqa: E402

PAYLOAD = b"x" * 16
CHANNEL = b"fanout"


def frame_len():
    # *3\r\n$7\r\nmessage\r\n$6\r\nfanout\r\n$16\r\n<16>\r\n
    return len(b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL, len(PAYLOAD), PAYLOAD))


def reader(port, n, expected_each, ready, done):
    """Subscribes n connections, then drains them until each got `expected_each` bytes."""
    os.sched_setaffinity(0, {1})
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL))
        socks.append(s)
    confirm = len(b"*3\r\n$9\r\nsubscribe\r\n$6\r\nfanout\r\n:1\r\n")
    for s in socks:
        got = 0
        while got < confirm:
            got += len(s.recv(confirm - got))
        s.setblocking(False)
    ready.set()
    ep = select.epoll()
    left = {}
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN)
        left[s.fileno()] = (s, expected_each)
    while left:
        for fd, _ in ep.poll(5):
            s, rem = left[fd]
            try:
                b = s.recv(1 << 20)
            except BlockingIOError:
                continue
            rem -= len(b)
            if rem <= 0:
                ep.unregister(fd)
                del left[fd]
            else:
                left[fd] = (s, rem)
    done.set()
    time.sleep(0.5)


def fanout(kind, subs, publishes):
    extra = ()
    cpu = "0"
    if kind == "atoll2":
        kind, extra, cpu = "atoll", ("--threads", "2"), "0-1"
    p, port = start(kind, cpu=cpu, extra=extra)
    try:
        ready, done = multiprocessing.Event(), multiprocessing.Event()
        r = multiprocessing.Process(target=reader, args=(port, subs, publishes * frame_len(), ready, done))
        r.start()
        assert ready.wait(60), "subscribers did not connect"
        t0, c0 = time.time(), proc_cpu_ticks(p.pid)
        subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-c", "4", "-P", "8",
                        "-n", str(publishes), "-q", "PUBLISH", CHANNEL.decode(), PAYLOAD.decode()],
                       check=True, stdout=subprocess.DEVNULL)
        assert done.wait(120), "not every message arrived"
        t1, c1 = time.time(), proc_cpu_ticks(p.pid)
        r.join(5)
        deliveries = publishes * subs
        return deliveries / (t1 - t0), (c1 - c0) / HZ * 1e6 / deliveries
    finally:
        p.terminate()
        p.wait()


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def tracking_cost(kind, tracked, requests, keyspace=100000):
    p, port = start(kind, cpu="0")
    t = None
    try:
        if tracked:
            # A RESP3 tracking client that read every key the benchmark will write; a thread
            # on CPU 1 drains its invalidations.
            t = socket.create_connection(("127.0.0.1", port))
            t.sendall(resp("HELLO", "3") + resp("CLIENT", "TRACKING", "on"))
            time.sleep(0.2)
            t.recv(1 << 16)
            batch = b"".join(resp("GET", f"key:{i:012d}") for i in range(keyspace))
            t.sendall(batch)
            t.settimeout(5)
            got = b""
            while got.count(b"_\r\n") + got.count(b"$-1\r\n") < keyspace:
                got += t.recv(1 << 20)
            t.setblocking(False)

            def drain():
                os.sched_setaffinity(0, {1})
                while True:
                    try:
                        select.select([t], [], [], 1)
                        if not t.recv(1 << 20):
                            return
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        return

            import threading
            threading.Thread(target=drain, daemon=True).start()
        t0, c0 = time.time(), proc_cpu_ticks(p.pid)
        subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests),
                        "-r", str(keyspace), "-d", "32", "-q", "-t", "set"], check=True, stdout=subprocess.DEVNULL)
        t1, c1 = time.time(), proc_cpu_ticks(p.pid)
        return requests / (t1 - t0), (c1 - c0) / HZ * 1e6 / requests
    finally:
        if t:
            t.close()
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--publishes", type=int, default=20000)
    ap.add_argument("--requests", type=int, default=300000)
    ap.add_argument("--only", choices=["fanout", "tracking"])
    ap.add_argument("--kinds", default="redis,atoll")
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    if a.only in (None, "fanout"):
        res = {k: [] for k in kinds}
        for _ in range(a.rounds):
            for k in kinds:
                res[k].append(fanout(k, a.subscribers, a.publishes))
        print(f"fanout: {a.subscribers} subscribers, {a.publishes} publishes, median of {a.rounds}")
        base = statistics.median(x[1] for x in res["redis"]) if "redis" in res else None
        for k in kinds:
            rate = statistics.median(x[0] for x in res[k])
            us = statistics.median(x[1] for x in res[k])
            ratio = f"{us / base:.2f}x" if base else "-"
            print(f"  {k:8} {rate / 1e6:6.2f} M deliveries/s  {us * 1000:7.1f} ns CPU/delivery  ({ratio} of Redis)")
    if a.only in (None, "tracking"):
        print(f"tracking: SET, 50 clients, {a.requests} requests over 100k keys, median of {a.rounds}")
        for k in kinds:
            for tracked in (False, True):
                rs = [tracking_cost(k, tracked, a.requests) for _ in range(a.rounds)]
                rate = statistics.median(x[0] for x in rs)
                us = statistics.median(x[1] for x in rs)
                print(f"  {k:8} tracking={'on ' if tracked else 'off'}  {rate / 1e3:7.1f} k ops/s  {us:6.2f} us CPU/op")


if __name__ == "__main__":
    main()
