#!/usr/bin/env python3
"""Keys by slot on a big cluster node: CLUSTER GETKEYSINSLOT's cost, a slot emptied the way
`redis-cli --cluster reshard` empties it, and what the per-slot index costs in memory, for
each server given, in one run (issue 38: "GETKEYSINSLOT in O(keys in slot)").

Each server runs as a one-node cluster serving all 16384 slots (cluster mode, no
persistence), filled by `DEBUG POPULATE --keys key 100` (so about --keys/16384 keys per slot).
Then, one client on a plain socket:

* getkeysinslot: `CLUSTER GETKEYSINSLOT s 10` for --probes random slots, one at a time;
  reported is the mean time per call (round trip included);
* drain: for --drain random slots, `GETKEYSINSLOT s 10` and a DEL of the keys it gave, until
  the slot is empty (as reshard's GETKEYSINSLOT + MIGRATE loop leaves it); reported is the
  time per key removed. A walk that starts over from the slot's shard each call costs more
  per key the fuller the shard is;
* memory: `used_memory` after the fill, per key.

Usage: python3 bench/slot_keys.py [--keys 2000000] [--probes 2000] [--drain 200]
           [--atoll BIN ...] [--no-redis]
Needs redis-py (the tests' virtual environment: ~/.cache/atoll-venv), a release build
(cargo build --release; --atoll names others, e.g. an older build to compare), and Redis 7.2.6
(scripts/oracle.sh). Pins the server to core 0 and the client to core 1 when taskset exists.
"""
import argparse, os, random, shutil, subprocess, sys, tempfile, time

import redis

from sentinel_failover import free_port, redis_oracle, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(binary, args, tmp):
    port = free_port()
    d = tempfile.mkdtemp(dir=tmp)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    argv = pin + [binary, "--port", str(port), "--cluster-enabled", "yes", "--cluster-config-file",
                  "nodes.conf", "--dir", d, "--save", "", "--appendonly", "no", "--loglevel", "warning",
                  "--enable-debug-command", "yes"]
    if "atoll" in os.path.basename(binary):
        argv += ["--threads", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = redis.Redis(port=port, socket_timeout=600)
        wait_for("the node to answer", lambda: c.ping(), 30)
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_for("the cluster to be ok", lambda: b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO"), 30)
        base = c.info("memory")["used_memory"]
        c.execute_command("DEBUG", "POPULATE", args.keys, "key", 100)
        per_key = (c.info("memory")["used_memory"] - base) / args.keys
        rng = random.Random(7)
        probes = [rng.randrange(16384) for _ in range(args.probes)]
        t0 = time.perf_counter()
        got = 0
        for s in probes:
            got += len(c.execute_command("CLUSTER", "GETKEYSINSLOT", s, 10))
        per_call = (time.perf_counter() - t0) / args.probes
        assert got > 0, "the probes found keys"
        drained = 0
        slots = rng.sample(range(16384), args.drain)
        t0 = time.perf_counter()
        for s in slots:
            while True:
                keys = c.execute_command("CLUSTER", "GETKEYSINSLOT", s, 10)
                if not keys:
                    break
                drained += c.delete(*keys)
        per_key_drain = (time.perf_counter() - t0) / max(drained, 1)
        for s in slots:
            assert c.execute_command("CLUSTER", "COUNTKEYSINSLOT", s) == 0
        return per_call, per_key_drain, drained, per_key
    finally:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--drain", type=int, default=200)
    ap.add_argument("--atoll", action="append", default=[])
    ap.add_argument("--no-redis", action="store_true")
    args = ap.parse_args()
    servers = [(b, b) for b in (args.atoll or [os.path.join(ROOT, "target", "release", "atoll-server")])]
    if not args.no_redis:
        servers.append(("redis 7.2.6", redis_oracle()))
    tmp = tempfile.mkdtemp()
    try:
        print(f"{args.keys} keys, {args.probes} probes, {args.drain} slots drained")
        print(f"{'server':<40} {'GETKEYSINSLOT µs/call':>22} {'drain µs/key':>13} {'keys':>6} {'bytes/key':>10}")
        for name, binary in servers:
            per_call, per_key_drain, drained, per_key = run_one(binary, args, tmp)
            print(f"{name:<40} {per_call * 1e6:>22.1f} {per_key_drain * 1e6:>13.1f} {drained:>6} {per_key:>10.1f}")
            sys.stdout.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
