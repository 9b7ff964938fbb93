#!/usr/bin/env python3
"""What replicas cost their master, Atoll beside Redis (DESIGN §4).

Each master is pinned to CPU 0 (Atoll with one worker thread); stock redis-server replicas
(`--replicaof`; one, or `--replicas N`) and the load (redis-benchmark SET, 50 clients, random keys from 100k,
32-byte values) share CPU 1. For each pipeline depth the masters alternate for several rounds:
first alone, then with the replicas attached and in sync. Reported: ops/s and the master's CPU
µs per op (utime+stime from /proc over the run), medians, the cost of the replica (with ÷
without) and the Atoll/Redis ratios. After each run with a replica the master waits for the
replicas' offsets to reach its own and checks that all hold as many keys.

Usage: python3 bench/repl.py [--rounds 3] [--requests 400000] [--pipelines 1,16] [--replicas 1]
Needs what bench/bench.py needs (redis-benchmark, taskset, a release build) and Redis 7.2.6 as
both masters' replica and as the Redis master (../shared/tools/redis72).
"""
import argparse, os, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the server start-up, load and /proc helpers)


def cmd(port, *args):
    """One command's reply: a bulk string's bytes, or the line of any other reply."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(bench.resp(*[a.encode() if isinstance(a, str) else a for a in args]))
        buf = b""
        while b"\r\n" not in buf:
            buf += s.recv(1 << 16)
        line, rest = buf.split(b"\r\n", 1)
        if not line.startswith(b"$") or line == b"$-1":
            return line
        n = int(line[1:])
        while len(rest) < n + 2:
            rest += s.recv(1 << 16)
        return rest[:n]


def info(port, field):
    text = cmd(port, "INFO", "replication").decode(errors="replace")
    for line in text.split("\r\n"):
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def wait_for(what, f, secs=30):
    end = time.time() + secs
    while time.time() < end:
        if f():
            return
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def one_run(kind, replicas, requests, pipeline):
    master, mport = bench.start_server(kind, "0", ["--repl-diskless-sync-delay", "0"])
    reps = []
    try:
        for _ in range(replicas):
            reps.append(bench.start_server("redis", "1", ["--replicaof", "127.0.0.1", str(mport)]))
        for _, rport in reps:
            wait_for("the replica's link", lambda: info(rport, "master_link_status") == "up")
        before = bench.proc_cpu_ticks(master.pid)
        ops, _ = bench.run_bench(mport, "set", requests, pipeline)
        used = bench.proc_cpu_ticks(master.pid) - before
        us = used / bench.HZ * 1e6 / requests
        off = info(mport, "master_repl_offset")
        for _, rport in reps:
            wait_for("the replica to catch up", lambda: info(rport, "master_repl_offset") == off)
            m, r = cmd(mport, "DBSIZE"), cmd(rport, "DBSIZE")
            assert m == r, f"{kind}: master {m!r} keys, replica {r!r}"
        return ops, us
    finally:
        for p in [r for r, _ in reps] + [master]:
            p.kill()
            p.wait()


def use_redis72():
    """Redis 7.2.6 (`scripts/oracle.sh`) for both roles: an Atoll master sends RDB
    version 11, which older replicas (Debian's 7.0) cannot load. The servers run in a scratch
    directory, so a replica's dump.rdb lands there."""
    tool = os.path.join(bench.ROOT, "scripts", "oracle.sh")
    path = subprocess.run([tool], capture_output=True, text=True, check=True).stdout.strip()
    os.environ["PATH"] = os.path.dirname(path) + os.pathsep + os.environ["PATH"]
    os.chdir(tempfile.mkdtemp(prefix="atoll-repl-bench-"))


def main():
    use_redis72()
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--replicas", type=int, default=1)
    a = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} rounds={a.rounds} requests={a.requests} (x4 when pipelined)")
    for pipeline in [int(p) for p in a.pipelines.split(",")]:
        n = a.requests * (4 if pipeline > 1 else 1)
        res = {}
        for _ in range(a.rounds):
            for kind in ("redis", "atoll-io_uring"):
                for replicas in (0, a.replicas):
                    res.setdefault((kind, replicas > 0), []).append(one_run(kind, replicas, n, pipeline))
        med = {k: (statistics.median(o for o, _ in v), statistics.median(u for _, u in v)) for k, v in res.items()}
        row = [f"SET -P {pipeline:<2}"]
        for kind in ("redis", "atoll-io_uring"):
            (o0, u0), (o1, u1) = med[(kind, False)], med[(kind, True)]
            row.append(f"{kind}: alone {o0:9.0f} ops/s {u0:5.2f} us/op, with {a.replicas} replica(s) {o1:9.0f} ops/s {u1:5.2f} us/op"
                       f" (cost x{u1 / u0:.2f})")
        (ro, ru), (ao, au) = med[("redis", True)], med[("atoll-io_uring", True)]
        row.append(f"with {a.replicas} replica(s), atoll/redis: ops {ao / ro:.2f}x, master cpu {au / ru:.2f}x")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
