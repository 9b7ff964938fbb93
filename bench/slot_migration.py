#!/usr/bin/env python3
"""Atomic slot migration (Valkey 9's CLUSTER MIGRATESLOTS; issue 38), Atoll beside Valkey
9.1.2, in one run: how long moving a range of slots takes, and how long the source holds its
writes back for the takeover.

For each kind, two nodes form a cluster on loopback (the first serves slots 0-8191, the second
8192-16383, cluster mode, no persistence). The first is filled by `DEBUG POPULATE` (so about
--keys/16384 keys per slot, 100-byte values), then moves slots 0 to --slots-1 to the second by
`CLUSTER MIGRATESLOTS`. Meanwhile one client SETs keys of a slot the source keeps, one at a
time, and records every reply's latency: the source pauses all its writes while the target
takes over (Valkey's design), so the longest of them is the pause as a client sees it.

Reported: the migration's time (MIGRATESLOTS to `success` in GETSLOTMIGRATIONS, polled every
5 ms), keys moved per second, and the writing client's longest and 99.9th-percentile latency.

Usage: python3 bench/slot_migration.py [--keys 2000000] [--slots 1024] [--atoll BIN]
           [--valkey BIN]
Needs redis-py (the tests' virtual environment: ~/.cache/atoll-venv), a release build
(cargo build --release) and Valkey 9.1.2 (scripts/valkey.sh). Pins the servers to core 0 and
the clients to core 1 when taskset exists.
"""
import argparse, os, shutil, subprocess, sys, tempfile, threading, time

import redis

from sentinel_failover import free_port, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def low_port():
    """A free port whose bus port (+10000, which CLUSTER MEET assumes) is a port too."""
    while True:
        p = free_port()
        if p < 55000:
            return p


def start(binary, tmp):
    port = low_port()
    d = tempfile.mkdtemp(dir=tmp)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    argv = pin + [binary, "--port", str(port), "--cluster-enabled", "yes", "--cluster-config-file",
                  "nodes.conf", "--dir", d, "--save", "", "--appendonly", "no", "--loglevel", "warning",
                  "--enable-debug-command", "yes"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
    wait_for("the node to answer", lambda: c.ping(), 30)
    return proc, port, c


def newest_state(c):
    jobs = c.execute_command("CLUSTER", "GETSLOTMIGRATIONS")
    if not jobs:
        return None
    j = jobs[0]
    fields = j if isinstance(j, dict) else dict(zip(j[0::2], j[1::2]))
    state = fields.get(b"state", fields.get("state"))
    return state.decode() if isinstance(state, bytes) else state


def run_one(binary, args, tmp):
    (pa, a_port, a), (pb, b_port, b) = start(binary, tmp), start(binary, tmp)
    try:
        a.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 8191)
        b.execute_command("CLUSTER", "ADDSLOTSRANGE", 8192, 16383)
        a.execute_command("CLUSTER", "MEET", "127.0.0.1", b_port)
        ok = lambda: all(b"cluster_state:ok" in x.execute_command("CLUSTER", "INFO") for x in (a, b))
        wait_for("the cluster to be ok", ok, 60)
        # DEBUG POPULATE fills every slot; keys of the second node's slots are dropped there.
        a.execute_command("DEBUG", "POPULATE", args.keys, "key", 100)
        moving = sum(a.execute_command("CLUSTER", "COUNTKEYSINSLOT", s) for s in range(args.slots))
        # A slot the source keeps: its writes stall only while the whole node pauses.
        tag = next(f"{{w{i}}}" for i in range(100000)
                   if args.slots <= a.execute_command("CLUSTER", "KEYSLOT", f"{{w{i}}}") < 8192)
        lat, stop = [], threading.Event()

        def writer():
            w = redis.Redis(host="127.0.0.1", port=a_port, socket_timeout=60)
            i = 0
            while not stop.is_set():
                t = time.perf_counter()
                w.set(f"{tag}{i % 1000}", "x")
                lat.append(time.perf_counter() - t)
                i += 1

        th = threading.Thread(target=writer)
        th.start()
        time.sleep(0.5)
        target = b.execute_command("CLUSTER", "MYID").decode()
        t0 = time.perf_counter()
        a.execute_command("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, args.slots - 1, "NODE", target)
        while True:
            st = newest_state(a)
            if st in ("success", "failed", "cancelled"):
                break
            time.sleep(0.005)
        took = time.perf_counter() - t0
        time.sleep(0.5)
        stop.set()
        th.join()
        assert st == "success", f"the migration ended {st}"
        left = sum(a.execute_command("CLUSTER", "COUNTKEYSINSLOT", s) for s in range(0, args.slots, 97))
        got = sum(b.execute_command("CLUSTER", "COUNTKEYSINSLOT", s) for s in range(args.slots))
        assert got == moving, f"{got} of {moving} keys arrived"
        lat.sort()
        return {"keys": moving, "took": took, "left": left, "max_ms": lat[-1] * 1000,
                "p999_ms": lat[int(len(lat) * 0.999)] * 1000, "writes": len(lat)}
    finally:
        for p in (pa, pb):
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--slots", type=int, default=1024)
    ap.add_argument("--atoll", default=os.path.join(ROOT, "target", "release", "atoll-server"))
    ap.add_argument("--valkey", default=os.environ.get("VALKEY_SERVER", ""))
    ap.add_argument("--only", choices=["atoll", "valkey"], help="run one kind only")
    args = ap.parse_args()
    if not args.valkey:
        args.valkey = subprocess.run([os.path.join(ROOT, "scripts", "valkey.sh")], capture_output=True,
                                     text=True, check=True).stdout.strip().splitlines()[-1]
    if shutil.which("taskset"):
        os.sched_setaffinity(0, {1})
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} keys={args.keys} slots moved=0-{args.slots - 1}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, binary in (("atoll", args.atoll), ("valkey 9.1.2", args.valkey)):
            if args.only and not name.startswith(args.only):
                continue
            r = run_one(binary, args, tmp)
            print(f"{name:13} {r['keys']:>8} keys moved in {r['took']:.2f} s ({r['keys'] / r['took']:,.0f} keys/s); "
                  f"a writer to a slot kept: longest reply {r['max_ms']:.1f} ms, p99.9 {r['p999_ms']:.2f} ms "
                  f"over {r['writes']} writes")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
