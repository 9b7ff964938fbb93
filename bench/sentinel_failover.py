#!/usr/bin/env python3
"""How long writes stop when Sentinel replaces a killed primary, Atoll nodes beside Redis
7.2.6 nodes (issue 37's figure).

Each round: a primary with two replicas (all Atoll, release build, or all Redis 7.2.6), three
Redis 7.2.6 sentinels watching it (down-after-milliseconds 1000, failover-timeout 5000, as
Redis's own sentinel tests set them), and a redis-py client writing INCRs through
`Sentinel.master_for` as fast as it can (each retried after 10 ms on a connection error). The
primary is killed (-9); reported is the time from the kill to the client's first successful
write on the promoted replica, and when the sentinels named it (+switch-master). Kinds
alternate round by round; medians, min and max.

Usage: python3 bench/sentinel_failover.py [--rounds 5]
Needs redis-py (the tests' virtual environment: ~/.cache/atoll-venv), a release build
(cargo build --release) and Redis 7.2.6 (scripts/oracle.sh).
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

import redis
from redis.sentinel import Sentinel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATOLL = os.path.join(ROOT, "target", "release", "atoll-server")


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(what, f, secs=30, step=0.02):
    end = time.time() + secs
    while time.time() < end:
        try:
            if f():
                return
        except redis.RedisError:
            pass
        time.sleep(step)
    raise SystemExit(f"timed out waiting for {what}")


def start(argv, port, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    p = subprocess.Popen(argv + ["--dir", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"port {port}", lambda: redis.Redis(port=port).ping())
    return p


def node(kind, redis_bin, port, tmp, *extra):
    binary = ATOLL if kind == "atoll" else redis_bin
    return start([binary, "--port", str(port), "--save", "", "--appendonly", "no",
                  "--repl-diskless-sync-delay", "0", *extra], port, tmp)


def sentinel(redis_bin, master_port, tmp):
    port = free_port()
    d = tempfile.mkdtemp(dir=tmp)
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nsentinel monitor mymaster 127.0.0.1 {master_port} 2\n"
                "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n")
    p = subprocess.Popen([redis_bin, conf, "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"sentinel {port}", lambda: redis.Redis(port=port).ping())
    return port, p


def one_round(kind, redis_bin):
    tmp = tempfile.mkdtemp(prefix="atoll-sentinel-bench-")
    procs = []
    try:
        pport = free_port()
        procs.append(node(kind, redis_bin, pport, tmp))
        rports = [free_port(), free_port()]
        for rp in rports:
            procs.append(node(kind, redis_bin, rp, tmp, "--replicaof", "127.0.0.1", str(pport)))
        for rp in rports:
            wait_for("link", lambda: redis.Redis(port=rp).info("replication")["master_link_status"] == "up")
        sports = []
        for _ in range(3):
            sp, p = sentinel(redis_bin, pport, tmp)
            sports.append(sp)
            procs.append(p)
        s0 = redis.Redis(port=sports[0], decode_responses=True)
        wait_for("discovery", lambda: len(s0.sentinel_slaves("mymaster")) == 2
                 and len(s0.sentinel_sentinels("mymaster")) == 2)
        master = Sentinel([("127.0.0.1", p) for p in sports], socket_timeout=0.5).master_for(
            "mymaster", socket_timeout=0.5)
        for _ in range(1000):
            master.incr("n")
        procs[0].kill()
        procs[0].wait()
        killed = time.time()
        switched = None
        while True:
            if switched is None and int(s0.sentinel_get_master_addr_by_name("mymaster")[1]) != pport:
                switched = time.time() - killed
            try:
                master.incr("n")
                port = master.connection_pool.get_master_address()[1]
                if port != pport:
                    return time.time() - killed, switched if switched is not None else time.time() - killed
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
                time.sleep(0.01)
            if time.time() - killed > 60:
                raise SystemExit(f"{kind}: no write 60 s after the kill")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def redis_oracle():
    """$REDIS_SERVER, else Redis 7.2.6's redis-server as scripts/oracle.sh builds and prints it
    (the last line of its output)."""
    return os.environ.get("REDIS_SERVER") or subprocess.run(
        [os.path.join(ROOT, "scripts", "oracle.sh")], capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    assert os.path.exists(ATOLL), "cargo build --release first"
    redis_bin = redis_oracle()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} rounds={a.rounds}")
    res = {"redis": [], "atoll": []}
    for r in range(a.rounds):
        for kind in ("redis", "atoll"):
            w, s = one_round(kind, redis_bin)
            res[kind].append((w, s))
            print(f"round {r + 1} {kind}: first write {w:.2f} s after the kill, sentinels switched at {s:.2f} s",
                  flush=True)
    for kind, v in res.items():
        w = [x for x, _ in v]
        s = [y for _, y in v]
        print(f"{kind}: first write after the kill median {statistics.median(w):.2f} s (min {min(w):.2f}, "
              f"max {max(w):.2f}); +switch-master median {statistics.median(s):.2f} s")


if __name__ == "__main__":
    sys.exit(main())
