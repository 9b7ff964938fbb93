"""Sentinel-aware clients through a failover of Atoll nodes: redis-py's `Sentinel` and
go-redis's `FailoverClient` (tests/go/sentinel_failover, built here) write through three Redis
7.2.6 sentinels to an Atoll primary with two Atoll replicas. The primary is killed (-9) while
both write; each client finds the promoted replica by itself and writes again, no INCR that
WAIT 1 confirmed is lost, and the time each went without a successful write is printed (the
figure docs/BENCHMARKS.md reports)."""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
import redis
from redis.sentinel import Sentinel

from atoll_proc import BINARY, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def redis_binary():
    b = os.environ.get("REDIS_SERVER")
    if b:
        return b
    out = subprocess.run([os.path.join(ROOT, "scripts", "oracle.sh")], capture_output=True, text=True)
    assert out.returncode == 0, f"the Redis 7.2.6 oracle is needed: {out.stderr}"
    return out.stdout.strip()


def go_client():
    """Builds the go-redis program (Go and the module proxy needed; never skipped)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    assert os.path.exists(go), "Go is needed for the go-redis test (scripts/test.sh installs it)"
    out = os.path.join(tempfile.mkdtemp(prefix="atoll-go-"), "sentinel_failover")
    src = os.path.join(ROOT, "tests", "go", "sentinel_failover")
    r = subprocess.run([go, "build", "-o", out, "."], cwd=src, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def wait_for(what, secs, f):
    end = time.time() + secs
    while time.time() < end:
        try:
            if f():
                return
        except redis.RedisError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start(args, port):
    scratch = tempfile.mkdtemp(prefix="atoll-py-")
    p = subprocess.Popen([*args, "--dir", scratch] if args[0] == BINARY else args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"port {port}", 20, lambda: redis.Redis(port=port).ping())
    return p


def start_atoll(port, *extra):
    return start([BINARY, "--port", str(port), "--save", "", "--loglevel", "warning",
                  "--repl-diskless-sync-delay", "0", *extra], port)


def start_sentinel(master_port):
    port = free_port()
    d = tempfile.mkdtemp(prefix="atoll-sentinel-")
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\ndir {d}\nsentinel monitor mymaster 127.0.0.1 {master_port} 2\n"
                "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n"
                "sentinel parallel-syncs mymaster 1\n")
    return port, start([redis_binary(), conf, "--sentinel"], port)


def role(port):
    return redis.Redis(port=port, socket_timeout=2).info("replication")["role"]


def test_redis_py_and_go_redis_follow_a_sentinel_failover_of_atoll():
    go_bin = go_client()
    procs = []
    try:
        pport = free_port()
        procs.append(start_atoll(pport))
        rports = [free_port(), free_port()]
        for rp in rports:
            procs.append(start_atoll(rp, "--replicaof", "127.0.0.1", str(pport)))
        for rp in rports:
            wait_for("the replica's link", 30,
                     lambda: redis.Redis(port=rp).info("replication")["master_link_status"] == "up")
        sentinels = []
        for _ in range(3):
            sp, p = start_sentinel(pport)
            sentinels.append(sp)
            procs.append(p)
        s0 = redis.Redis(port=sentinels[0], decode_responses=True)
        wait_for("the sentinels to find the replicas and each other", 30,
                 lambda: len(s0.sentinel_slaves("mymaster")) == 2 and len(s0.sentinel_sentinels("mymaster")) == 2)

        # redis-py: INCRs through Sentinel's view of the master, each confirmed by WAIT 1.
        sentinel = Sentinel([("127.0.0.1", p) for p in sentinels], socket_timeout=1.0)
        py = {"confirmed": 0, "writes": 0, "failed_since": None, "outage_s": None, "after": None}
        py_ready = threading.Event()
        stop = threading.Event()

        def py_load():
            master = sentinel.master_for("mymaster", socket_timeout=1.0)
            while not stop.is_set():
                try:
                    v = master.incr("py")
                    if master.execute_command("WAIT", 1, 500) >= 1:
                        py["confirmed"] = max(py["confirmed"], v)
                except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
                    if py["failed_since"] is None:
                        py["failed_since"] = time.time()
                    time.sleep(0.02)
                    continue
                py["writes"] += 1
                if py["writes"] >= 50:
                    py_ready.set()
                if py["failed_since"] is not None:
                    now = sentinel.discover_master("mymaster")
                    if now[1] != pport:
                        py["outage_s"] = time.time() - py["failed_since"]
                        py["after"] = now
                        return

        t = threading.Thread(target=py_load)
        t.start()
        addrs = ",".join(f"127.0.0.1:{p}" for p in sentinels)
        go = subprocess.Popen([go_bin, "-sentinels", addrs, "-key", "go"], stdout=subprocess.PIPE, text=True)
        assert go.stdout.readline().strip() == "ready"
        assert py_ready.wait(20), "redis-py never wrote"

        procs[0].kill()
        procs[0].wait()
        killed = time.time()

        out, _ = go.communicate(timeout=60)
        t.join(60)
        stop.set()
        assert go.returncode == 0, out
        g = json.loads(out.strip().splitlines()[-1])
        assert not t.is_alive() and py["after"] is not None, py

        new_port = int(g["master_after"].split(":")[1])
        assert new_port in rports and py["after"][1] == new_port
        assert g["master_before"] == f"127.0.0.1:{pport}"
        assert role(new_port) == "master"
        new = redis.Redis(port=new_port)
        assert g["confirmed"] > 0 and int(new.get("go")) >= g["confirmed"], (g, new.get("go"))
        assert py["confirmed"] > 0 and int(new.get("py")) >= py["confirmed"], (py, new.get("py"))
        print(f"\nafter the kill: go-redis wrote again after {g['outage_s']:.1f} s, "
              f"redis-py after {py['outage_s']:.1f} s (promotion seen {time.time() - killed:.1f} s after the kill)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
