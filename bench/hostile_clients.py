#!/usr/bin/env python3
"""Hostile clients at scale (issue 19): 10,000 connections each leaving a 1 MB request
unfinished in the server's query buffer, while another client keeps sending PING.

Each hostile connection sends `*3 $3 SET $1 k $1048576` and then 1 MB minus a few bytes of the
value — never the end — so the server must hold ~1 MB per connection: 10 GB in all, unless
the server bounds it. Both servers run with the same limit an operator would set,
`maxmemory-clients` (default 1gb; Redis 7 and Atoll close the clients holding the most memory
once all clients together exceed it), `maxclients 20000`, pinned to CPU 0; this script runs on
CPU 1. Reported per server: the peak RSS (VmHWM), clients closed by the server, PING round trips
during the fill (p50/p99/max, and how many went unanswered for more than 1 s), and whether the
server was alive and answering at the end.

Usage: python3 bench/hostile_clients.py [--conns 10000] [--mb 1] [--limit 1gb] [--servers redis,atoll]
Needs: redis-server (Debian's 7.0.15) and a release build of atoll-server.
"""
import argparse, os, resource, socket, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ATOLL, free_port, wait_ready  # noqa: E402


def start(kind, limit):
    port = free_port()
    common = ["--port", str(port), "--save", "", "--maxclients", "20000", "--maxmemory-clients", limit,
              "--loglevel", "warning"]
    if kind.startswith("atoll"):
        # "atoll-epoll": the epoll backend (the default is io_uring).
        backend = ["--io-backend", "epoll"] if kind == "atoll-epoll" else []
        cmd = [ATOLL, "--threads", "1"] + backend + common
    else:
        cmd = ["redis-server", "--appendonly", "no"] + common
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, p)
    return p, port


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def info_field(port, field):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"INFO\r\n")
        buf = b""
        while b"# Keyspace" not in buf:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    for line in buf.decode(errors="replace").split("\r\n"):
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def pinger(port, stop, rtts, stalls, lost):
    """PING every 10 ms on one connection; a reply later than 1 s is a stall, a closed
    connection is counted as lost (and replaced)."""
    s = None
    while not stop.is_set():
        if s is None:
            s = socket.create_connection(("127.0.0.1", port))
            s.settimeout(1.0)
            buf = b""
        t0 = time.perf_counter()
        try:
            s.sendall(b"PING\r\n")
            while b"\r\n" not in buf:
                chunk = s.recv(16)
                if not chunk:
                    raise ConnectionError("closed")
                buf += chunk
            line, buf = buf.split(b"\r\n", 1)
            assert line == b"+PONG", line
            rtts.append(time.perf_counter() - t0)
        except socket.timeout:
            # The reply may still come: drop this connection rather than misread it later.
            stalls.append(1)
            s.close()
            s = None
        except (ConnectionError, OSError):
            lost.append(1)
            s = None
        time.sleep(0.01)
    if s is not None:
        s.close()


def run(kind, conns, mb, limit):
    p, port = start(kind, limit)
    size = mb << 20
    header = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % size
    body = b"x" * (size - 16)
    stop, rtts, stalls, lost = threading.Event(), [], [], []
    t = threading.Thread(target=pinger, args=(port, stop, rtts, stalls, lost))
    t.start()
    socks, refused, cut = [], 0, 0
    t0 = time.time()
    for _ in range(conns):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(header)
            s.sendall(body)
            socks.append(s)
        except OSError:
            # Refused, or closed by the server while sending (client eviction).
            refused += 1
    fill_s = time.time() - t0
    time.sleep(1)
    # Connections the server closed show as readable with EOF (or a reset).
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                cut += 1
        except BlockingIOError:
            pass
        except OSError:
            cut += 1
    stop.set()
    t.join()
    alive = p.poll() is None
    answers = False
    evicted = None
    if alive:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"PING\r\n")
                answers = s.recv(16).startswith(b"+PONG")
            evicted = info_field(port, "evicted_clients")
        except OSError:
            pass
    peak = vm_hwm(p.pid) if alive else 0
    for s in socks:
        s.close()
    p.kill()
    p.wait()
    ms = sorted(x * 1000 for x in rtts) or [float("nan")]
    q = lambda f: ms[min(len(ms) - 1, int(f * len(ms)))]  # noqa: E731
    print(f"{kind:5} conns {conns} x {mb} MB (limit {limit}): fill {fill_s:5.1f} s, peak RSS {peak / 2**20:7.0f} MB, "
          f"closed {refused + cut} (evicted_clients {evicted}), PING during fill: {len(ms)} answered, "
          f"p50 {q(0.5):.2f} ms p99 {q(0.99):.2f} ms max {ms[-1]:.1f} ms, stalls >1 s {len(stalls)}, "
          f"pinger closed {len(lost)}; "
          f"alive {alive}, answers {answers}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=10000)
    ap.add_argument("--mb", type=int, default=1)
    ap.add_argument("--limit", default="1gb")
    ap.add_argument("--servers", default="redis,atoll")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, a.conns + 1000), hard))
    os.sched_setaffinity(0, {1})
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} hostile_clients conns={a.conns} mb={a.mb} limit={a.limit}")
    for kind in a.servers.split(","):
        run(kind, a.conns, a.mb, a.limit)


if __name__ == "__main__":
    sys.exit(main())
