#!/usr/bin/env python3
"""Resharding speed and failover time of an Atoll cluster beside a Redis 7.2.6 cluster
(issue 38's figures), in one run.

Each round makes, for each kind in turn, six nodes (release Atoll with one worker thread, or
Redis 7.2.6) into three masters with a replica each by Redis 7.2.6's `redis-cli --cluster
create --cluster-replicas 1`, fills it with --keys keys of 100 bytes, and starts a write
load (redis-py's RedisCluster SETting random keys of that key space, one at a time, as fast
as it can; --no-load for none). Nodes, tool and load share both cores; --pin puts every node
on core 0 and the tool and load on core 1 (six nodes on one core: a design that hands work
between threads waits for a time slice at each handoff there). Then, under that load:

* reshard: `redis-cli --cluster reshard` moves --slots slots from the first master to the
  second (its default pipeline of 10 keys per MIGRATE); reported are the seconds it took (the
  whole redis-cli run, its opening cluster check included), the keys moved per second (the
  keys in those slots on the new owner afterwards) and the load's SETs per second meanwhile;
* failover: the third master is killed (-9); reported are the time until its replica says
  it is master and the cluster is ok (CLUSTER NODES / CLUSTER INFO on it, polled every 10 ms)
  and the time until a client's SET on a key of that master's slots succeeds again
  (redis-py's RedisCluster in a thread from the kill on, retried every 10 ms; its own
  0.25 s pause after CLUSTERDOWN included).

Both depend on cluster-node-timeout (--node-timeout, default 2000 ms): a replica starts its
election after the master is marked FAIL, which takes the node timeout, and then waits
500 ms plus up to 500 ms at random plus 1 s per rank, as Redis's replicas do.

Usage: python3 bench/cluster_ops.py [--rounds 3] [--keys 200000] [--slots 1000]
Needs redis-py (the tests' virtual environment: ~/.cache/atoll-venv), a release build
(cargo build --release), Redis 7.2.6 (scripts/oracle.sh) with its redis-cli, and taskset for
--pin.
"""
import argparse, os, shutil, signal, statistics, subprocess, sys, tempfile, threading, time

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

import sentinel_failover  # its free_port and wait_for (bench/ is on the path when run as a script)
from sentinel_failover import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATOLL = os.path.join(ROOT, "target", "release", "atoll-server")
# --pin: every node on core 0, redis-cli and the load on core 1 (set in main).
PIN_SERVERS, PIN_CLIENTS = [], []


def wait_for(what, f, secs=60, step=0.01):
    return sentinel_failover.wait_for(what, f, secs, step)


def start_node(kind, redis_bin, tmp, node_timeout):
    port = free_port()
    d = tempfile.mkdtemp(dir=tmp)
    binary = ATOLL if kind == "atoll" else redis_bin
    argv = PIN_SERVERS + [binary, "--port", str(port), "--cluster-port", str(free_port()),
            "--cluster-enabled", "yes", "--cluster-node-timeout", str(node_timeout),
            "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0",
            "--loglevel", "warning", "--dir", d]
    if kind == "atoll":
        argv += ["--threads", "1"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"port {port}", lambda: redis.Redis(port=port).ping())
    return port, p


def cli(redis_bin, *args):
    tool = os.path.join(os.path.dirname(redis_bin), "redis-cli")
    r = subprocess.run(PIN_CLIENTS + [tool, "--cluster", *args], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"redis-cli --cluster {args[0]} failed:\n{r.stdout[-2000:]}{r.stderr}")
    return r.stdout


def owned(port):
    """The slots the node at `port` says it owns."""
    me = next(line for line in redis.Redis(port=port, decode_responses=True)
              .execute_command("CLUSTER", "NODES").splitlines() if "myself" in line)
    slots = set()
    for r in me.split()[8:]:
        if r.startswith("["):
            continue
        a, _, b = r.partition("-")
        slots.update(range(int(a), int(b or a) + 1))
    return slots


def fill(masters, keys):
    """SETs `keys` keys of 100 bytes, each pipelined to the master owning its slot."""
    by_slot = {}
    for p in masters:
        for s in owned(p):
            by_slot[s] = p
    pipes = {p: redis.Redis(port=p).pipeline(transaction=False) for p in masters}
    value = b"v" * 100
    for i in range(keys):
        k = f"key:{i}"
        pipes[by_slot[key_slot(k.encode())]].set(k, value)
        if i % 10000 == 9999:
            for pipe in pipes.values():
                pipe.execute()
    for pipe in pipes.values():
        pipe.execute()


# The write load: redis-py's RedisCluster SETting random keys of the filled key space, one
# at a time, as fast as one process can (redis-benchmark --cluster would put all its keys of
# a node into one hash tag, hence one slot).
LOAD = """
import os, random, sys, time
import redis
from redis.cluster import ClusterNode, RedisCluster
keys, count_file, ports = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", int(p)) for p in ports], socket_timeout=1)
v = b"w" * 100
done, told = 0, time.time()
while True:
    try:
        rc.set(f"key:{random.randrange(keys)}", v)
        done += 1
    except Exception:
        time.sleep(0.01)
    if time.time() - told > 0.2:
        # How many SETs so far, for the bench to report the load's rate.
        with open(count_file + ".tmp", "w") as f:
            f.write(str(done))
        os.replace(count_file + ".tmp", count_file)
        told = time.time()
"""


def one_round(kind, redis_bin, args, tmp):
    nodes = [start_node(kind, redis_bin, tmp, args.node_timeout) for _ in range(6)]
    procs = {port: p for port, p in nodes}
    load = None
    try:
        ports = list(procs)
        cli(redis_bin, "create", *[f"127.0.0.1:{p}" for p in ports], "--cluster-replicas", "1", "--cluster-yes")
        wait_for("cluster ok everywhere", lambda: all(
            redis.Redis(port=p).cluster("info")["cluster_state"] == "ok" for p in ports))
        wait_for("every replica's link", lambda: all(
            redis.Redis(port=p).info("replication").get("master_link_status", "up") == "up" for p in ports))
        role = lambda p: redis.Redis(port=p).execute_command("ROLE")[0]
        masters = [p for p in ports if role(p) in (b"master", "master")]
        fill(masters, args.keys)
        count_file = os.path.join(tmp, f"load-{os.getpid()}-{time.time()}")
        if args.load:
            load = subprocess.Popen(PIN_CLIENTS + [sys.executable, "-c", LOAD, str(args.keys), count_file,
                                     *map(str, ports)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)

        def load_count():
            try:
                with open(count_file) as f:
                    return int(f.read() or 0)
            except FileNotFoundError:
                return 0

        src, dst, victim = masters
        ids = {p: redis.Redis(port=p, decode_responses=True).execute_command("CLUSTER", "MYID") for p in masters}
        before = owned(src)
        t0, c0 = time.time(), load_count()
        cli(redis_bin, "reshard", f"127.0.0.1:{src}", "--cluster-from", ids[src], "--cluster-to", ids[dst],
            "--cluster-slots", str(args.slots), "--cluster-yes")
        took = time.time() - t0
        load_rate = (load_count() - c0) / took
        moved_slots = before & owned(dst)
        assert len(moved_slots) == args.slots, len(moved_slots)
        r = redis.Redis(port=dst)
        moved_keys = sum(r.execute_command("CLUSTER", "COUNTKEYSINSLOT", s) for s in moved_slots)

        replica = next(p for p in ports if redis.Redis(port=p).info("replication").get("master_port") == victim)
        probe_key = next(f"probe:{i}" for i in range(100000) if key_slot(f"probe:{i}".encode()) in owned(victim))
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports if p != victim],
                          socket_timeout=0.5, socket_connect_timeout=0.5)
        rc.set(probe_key, "before")
        first = {}

        def probe():
            # From the kill on: the first SET on the dead master's slots that succeeds.
            while "t" not in first and time.time() - killed < 60:
                try:
                    if rc.set(probe_key, "after"):
                        first["t"] = time.time()
                except (redis.RedisError, redis.exceptions.RedisClusterException):
                    time.sleep(0.01)

        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        killed = time.time()
        prober = threading.Thread(target=probe)
        prober.start()

        def promoted():
            r = redis.Redis(port=replica, decode_responses=True)
            me = next(line for line in r.execute_command("CLUSTER", "NODES").splitlines() if "myself" in line)
            return "master" in me.split()[2] and r.cluster("info")["cluster_state"] == "ok"

        wait_for("the replica's promotion", promoted)
        promotion = time.time() - killed

        prober.join(70)
        if "t" not in first:
            raise SystemExit("no write succeeded within 60 s of the kill")
        first_write = first["t"] - killed
        return {"reshard_s": took, "keys_per_s": moved_keys / took, "moved_keys": moved_keys,
                "promotion_s": promotion, "first_write_s": first_write, "load_ops_s": load_rate}
    finally:
        if load:
            load.kill()
            load.wait()
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", type=int, default=200000)
    ap.add_argument("--slots", type=int, default=1000)
    ap.add_argument("--node-timeout", type=int, default=2000)
    ap.add_argument("--no-load", dest="load", action="store_false", help="reshard and fail over idle")
    ap.add_argument("--pin", action="store_true", help="all six nodes on core 0, the tools and load on core 1")
    args = ap.parse_args()
    if args.pin:
        PIN_SERVERS.extend(["taskset", "-c", "0"])
        PIN_CLIENTS.extend(["taskset", "-c", "1"])
    redis_bin = sentinel_failover.redis_oracle()
    if args.pin and not shutil.which("taskset"):
        raise SystemExit("taskset is needed for --pin")
    if not os.path.exists(ATOLL):
        raise SystemExit("build Atoll first: cargo build --release")
    results = {"atoll": [], "redis": []}
    with tempfile.TemporaryDirectory(prefix="atoll-cluster-bench-") as tmp:
        for rnd in range(args.rounds):
            for kind in (("atoll", "redis") if rnd % 2 == 0 else ("redis", "atoll")):
                r = one_round(kind, redis_bin, args, tmp)
                results[kind].append(r)
                print(f"round {rnd + 1} {kind:5}: reshard {args.slots} slots ({r['moved_keys']} keys) in "
                      f"{r['reshard_s']:.2f} s = {r['keys_per_s']:.0f} keys/s (load {r['load_ops_s']:.0f} SET/s); "
                      f"replica promoted "
                      f"{r['promotion_s']:.2f} s after the kill, first write {r['first_write_s']:.2f} s",
                      flush=True)
    print(f"\n{args.keys} keys, {args.slots} slots resharded {'under a SET load' if args.load else 'idle'}, "
          f"cluster-node-timeout {args.node_timeout} ms, "
          f"{'nodes on core 0, tools on core 1' if args.pin else 'nodes and tools on both cores'}; "
          f"median (min–max) of {args.rounds} rounds")
    print(f"{'':6} {'reshard s':>18} {'keys/s moved':>22} {'load SET/s':>22} {'promotion s':>18} "
          f"{'first write s':>18}")
    for kind, rs in results.items():
        cells = []
        for f, fmt in (("reshard_s", "{:.2f}"), ("keys_per_s", "{:.0f}"), ("load_ops_s", "{:.0f}"),
                       ("promotion_s", "{:.2f}"), ("first_write_s", "{:.2f}")):
            v = [r[f] for r in rs]
            cells.append(f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})")
        print(f"{kind:6} {cells[0]:>18} {cells[1]:>22} {cells[2]:>22} {cells[3]:>18} {cells[4]:>18}")


if __name__ == "__main__":
    sys.exit(main())
