"""Cluster-aware clients through the life of an Atoll cluster: six Atoll nodes made into three
masters with a replica each by Redis 7.2.6's `redis-cli --cluster create`; each client keeps
incrementing counters (each INCR confirmed by WAIT 1 on its master's connection) while
`redis-cli --cluster reshard` moves 1,000 slots between masters and then a master is killed
(-9). The clients follow MOVED/ASK and refresh their slot maps by themselves, the replica is
promoted, the load goes on, and no confirmed increment is lost.

Two tests: redis-py's `RedisCluster` in a thread of the test; and go-redis's `ClusterClient`
(tests/go/cluster_client), Jedis's and Lettuce's cluster clients (tests/java/cluster_clients)
as programs of their own, all three at once, built here (Go, Java and Maven needed: never
skipped)."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from atoll_proc import BINARY, free_port
from test_sentinel_clients import ROOT, redis_binary, start, wait_for


def redis_cli():
    return os.path.join(os.path.dirname(redis_binary()), "redis-cli")


def start_node():
    port = free_port()
    bus = free_port()
    p = start([BINARY, "--port", str(port), "--save", "", "--loglevel", "warning",
               "--repl-diskless-sync-delay", "0", "--cluster-enabled", "yes",
               "--cluster-port", str(bus), "--cluster-node-timeout", "2000"], port)
    return port, p


def role(port):
    return redis.Redis(port=port, decode_responses=True, socket_timeout=2).execute_command("ROLE")[0]


def cli(*args, timeout=120):
    r = subprocess.run([redis_cli(), "--cluster", *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


@contextlib.contextmanager
def atoll_cluster():
    """Six Atoll nodes, three masters with a replica each (`redis-cli --cluster create`), every
    replica linked and the cluster ok on every node; yields {port: process}. All are killed at
    the end (a test may have killed some already)."""
    procs = {}
    try:
        for _ in range(6):
            port, p = start_node()
            procs[port] = p
        ports = list(procs)
        code, out = cli("create", *[f"127.0.0.1:{p}" for p in ports], "--cluster-replicas", "1",
                        "--cluster-yes")
        assert code == 0 and "[OK] All 16384 slots covered." in out, out
        wait_for("every replica's link", 30, lambda: all(
            redis.Redis(port=p, socket_timeout=2).info("replication").get("master_link_status", "up") == "up"
            for p in ports))
        wait_for("the cluster ok everywhere", 30, lambda: all(
            redis.Redis(port=p, socket_timeout=2).cluster("info")["cluster_state"] == "ok" for p in ports))
        yield procs
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def node_ids(ports):
    return {p: redis.Redis(port=p, decode_responses=True, socket_timeout=2).cluster("myid") for p in ports}


def slots_of(port, node_id):
    """The slots `node_id` serves, as CLUSTER NODES on `port` tells."""
    out = redis.Redis(port=port, decode_responses=True, socket_timeout=2).execute_command("CLUSTER", "NODES")
    slots = set()
    for line in out.splitlines():
        fields = line.split()
        if fields[0] != node_id:
            continue
        for r in fields[8:]:
            if r.startswith("["):  # a slot being imported or migrated, not served yet
                continue
            lo, _, hi = r.partition("-")
            slots.update(range(int(lo), int(hi or lo) + 1))
    return slots


def reshard(ports, count=1000):
    """Moves `count` slots from one master to another with `redis-cli --cluster reshard`;
    returns the three masters (source, destination, the third) and the slots moved."""
    ids = node_ids(ports)
    masters = [p for p in ports if role(p) == "master"]
    assert len(masters) == 3, masters
    src, dst = masters[0], masters[1]
    before = slots_of(dst, ids[dst])
    code, out = cli("reshard", f"127.0.0.1:{src}", "--cluster-from", ids[src], "--cluster-to", ids[dst],
                    "--cluster-slots", str(count), "--cluster-yes")
    assert code == 0, out[-2000:]
    moved = slots_of(dst, ids[dst]) - before
    assert len(moved) == count, len(moved)
    return masters, moved


def kill_master(procs, victim):
    """Kills `victim` (-9) and waits until its replica is promoted and every live node says the
    cluster is ok; returns the seconds from the kill to that."""
    ports = list(procs)
    replica = next(p for p in ports if p != victim and
                   redis.Redis(port=p, socket_timeout=2).info("replication").get("master_port") == victim)
    procs[victim].kill()
    procs[victim].wait()
    killed = time.time()
    wait_for("the replica's promotion", 30,
             lambda: role(replica) == "master"
             and all(redis.Redis(port=p, socket_timeout=2).cluster("info")["cluster_state"] == "ok"
                     for p in ports if p != victim))
    return time.time() - killed


def test_redis_py_cluster_client_through_a_reshard_and_a_failover():
    with atoll_cluster() as procs:
        ports = list(procs)
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], socket_timeout=2)
        confirmed = {}
        state = {"incrs": 0, "errors": 0, "stop": False}

        def load():
            c = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], socket_timeout=2,
                             )
            i = 0
            while not state["stop"]:
                k = f"ctr:{i % 500}"
                try:
                    # INCR then WAIT on one connection to the key's master as the client maps
                    # it (WAIT counts that connection's writes); a redirection (the slot
                    # moved) is followed by the client itself and that INCR not counted as
                    # confirmed.
                    node = c.get_node_from_key(k)
                    try:
                        pipe = c.get_redis_connection(node).pipeline(transaction=False)
                        pipe.incr(k)
                        pipe.execute_command("WAIT", 1, 100)
                        v, acked = pipe.execute(raise_on_error=False)
                    except (redis.ConnectionError, redis.TimeoutError):
                        v, acked = None, 0
                    if not isinstance(v, int):
                        # Redirected, or the node is gone: the cluster client finds the slot's
                        # master itself (and refreshes its map); not counted as confirmed.
                        c.incr(k)
                    elif isinstance(acked, int) and acked >= 1:
                        confirmed[k] = max(confirmed.get(k, 0), v)
                    state["incrs"] += 1
                except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterDownError,
                        redis.exceptions.ClusterError, redis.exceptions.RedisClusterException,
                        redis.ResponseError):
                    state["errors"] += 1
                    time.sleep(0.05)
                i += 1

        t = threading.Thread(target=load)
        t.start()
        wait_for("the load to start", 20, lambda: state["incrs"] > 200)

        masters, _ = reshard(ports)
        before_kill = state["incrs"]

        # Kill the third master; its replica takes over.
        victim = masters[2]
        promoted = kill_master(procs, victim)
        wait_for("the load to go on after the failover", 30, lambda: state["incrs"] > before_kill + 100)
        state["stop"] = True
        t.join(30)
        assert not t.is_alive()

        lost = {k: (v, int(rc.get(k) or 0)) for k, v in confirmed.items() if int(rc.get(k) or 0) < v}
        assert not lost, f"confirmed increments lost: {lost}"
        assert len(confirmed) > 100
        live = [p for p in ports if p != victim]
        total = sum(redis.Redis(port=p, socket_timeout=2).dbsize() for p in live if role(p) == "master")
        assert total == 500, f"{total} keys on the masters"
        print(f"\n{state['incrs']} INCRs ({state['errors']} retried) through a 1000-slot reshard and a "
              f"failover; replica promoted {promoted:.1f} s after the kill")


# The client programs' keys: PREFIX:0 … PREFIX:299, INCRed in turn (tests/go/cluster_client,
# tests/java/cluster_clients).
KEYS = 300


def go_cluster_client(out_dir):
    """Builds tests/go/cluster_client (Go 1.21+ and the module proxy, or its cache, needed)."""
    go = shutil.which("go") or next(
        (g for g in ("/usr/local/go/bin/go",
                     os.path.join(os.environ.get("ATOLL_GO_HOME", os.path.expanduser("~/.cache/atoll-go")),
                                  "go", "bin", "go")) if os.path.exists(g)), None)
    assert go, "Go is needed for the go-redis cluster test (scripts/test.sh installs it)"
    out = os.path.join(out_dir, "cluster_client")
    r = subprocess.run([go, "build", "-o", out, "."], cwd=os.path.join(ROOT, "tests", "go", "cluster_client"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return [out]


def java_cluster_clients(out_dir):
    """Builds tests/java/cluster_clients with Maven (Jedis and Lettuce from Maven Central, or
    the local repository) into `out_dir`; returns the command line that runs it, less the
    client's name and arguments."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    assert java and mvn, "Java 17+ and Maven are needed for the Jedis and Lettuce test (scripts/test.sh installs them)"
    r = subprocess.run([mvn, "-q", "-B", "compile", "dependency:build-classpath", f"-Dout={out_dir}",
                        f"-Dmdep.outputFile={out_dir}/classpath.txt"],
                       cwd=os.path.join(ROOT, "tests", "java", "cluster_clients"),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    with open(os.path.join(out_dir, "classpath.txt")) as f:
        cp = f.read().strip()
    # C1 only and the serial collector: fewer compiler and GC threads beside six servers and
    # two other clients on a two-core machine; the load needs no peak speed.
    return [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-cp", os.path.join(out_dir, "classes") + os.pathsep + cp, "atoll.tests.ClusterLoad"]


class LoadClient:
    """One client program speaking the load protocol: "ready" after its first INCR, then
    "incrs N errors M" now and then, and after "stop" on stdin one JSON line."""

    def __init__(self, name, argv):
        self.name = name
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     text=True)
        self.incrs = 0
        self.errors = 0
        # The INCR count at the last report whose error count had changed: the successes since
        # then came one after another, with no key skipped.
        self.clean_from = 0
        self.result = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("incrs "):
                _, n, _, e = line.split()
                if int(e) != self.errors:
                    self.clean_from = int(n)
                self.incrs, self.errors = int(n), int(e)
            elif line.startswith("{"):
                self.result = json.loads(line)

    def a_clean_round_since(self, incrs_then):
        """Whether the client has INCRed every one of its keys, one after another without an
        error, since it had made `incrs_then` INCRs."""
        return self.incrs - max(self.clean_from, incrs_then) >= KEYS

    def stop(self):
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass  # it exited already: its status and stderr below say why
        code = self.proc.wait(timeout=30)
        self.reader.join(10)
        assert code == 0, f"{self.name} exited {code}: {self.stderr()}"
        assert self.result is not None, f"{self.name} printed no result: {self.stderr()}"
        return self.result

    def stderr(self):
        self.err.seek(0)
        return self.err.read()[-3000:]

    def stacks(self):
        """Where a stuck client is: the JVM's main thread (jcmd), or every goroutine (SIGQUIT,
        which ends a Go program)."""
        if self.proc.poll() is not None:
            return "(exited)"
        if self.name == "go-redis":
            self.proc.send_signal(signal.SIGQUIT)
            self.proc.wait(10)
            return self.stderr()
        jcmd = os.path.join(os.path.dirname(os.path.realpath(shutil.which("java"))), "jcmd")
        r = subprocess.run([jcmd, str(self.proc.pid), "Thread.print"], capture_output=True, text=True, timeout=30)
        main = r.stdout.split('"main"', 1)
        return ('"main"' + main[1].split("\n\n", 1)[0]) if len(main) == 2 else r.stdout[-3000:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for_clean_rounds(clients, what, secs):
    """Waits until each client has INCRed every one of its keys, one after another without an
    error, since now; returns the seconds each took."""
    began = time.time()
    marks = {c: c.incrs for c in clients}
    took = {}

    def done():
        for c in clients:
            if c.name not in took and c.a_clean_round_since(marks[c]):
                took[c.name] = time.time() - began
        return len(took) == len(clients)

    try:
        wait_for(f"every client to INCR every key {what}", secs, done)
    except AssertionError as e:
        late = [c for c in clients if c.name not in took]
        raise AssertionError(f"{e}: " + "\n".join(
            f"{c.name}: {c.incrs} INCRs, {c.errors} errors: {c.stderr()}\nwhere it was:\n{c.stacks()}"
            for c in late)) from None
    return took


def test_go_redis_jedis_and_lettuce_cluster_clients_through_a_reshard_and_a_failover():
    began = time.time()
    out_dir = tempfile.mkdtemp(prefix="atoll-cluster-clients-")
    # The builds (Maven's the longest) go on while the cluster starts.
    built = {}

    def build(name, f):
        try:
            built[name] = f(os.path.join(out_dir, name))
        except BaseException as e:  # an assertion too: re-raised below, in the test's thread
            built[name] = e

    # Daemons: a test that fails while they build does not wait for them.
    builders = [threading.Thread(target=build, args=("go", go_cluster_client), daemon=True),
                threading.Thread(target=build, args=("java", java_cluster_clients), daemon=True)]
    for b in builders:
        b.start()
    clients = []
    try:
        with atoll_cluster() as procs:
            ports = list(procs)
            for b in builders:
                b.join(900)
            for name in ("go", "java"):
                if isinstance(built.get(name), BaseException):
                    raise built[name]
                assert name in built, f"the {name} build did not finish"
            seeds = ",".join(f"127.0.0.1:{p}" for p in ports)
            clients = [LoadClient("go-redis", [*built["go"], "-addrs", seeds, "-prefix", "go"]),
                       LoadClient("Jedis", [*built["java"], "jedis", seeds, "jedis"]),
                       LoadClient("Lettuce", [*built["java"], "lettuce", seeds, "lettuce"])]
            # Every key of every client written once before the reshard (a JVM takes a few
            # seconds to start here).
            wait_for_clean_rounds(clients, "before the reshard", 60)
            loaded = time.time()

            masters, moved = reshard(ports)
            resharded = time.time()
            for prefix in ("go", "jedis", "lettuce"):
                # Else the reshard would not have asked a client to follow anything.
                assert any(key_slot(f"{prefix}:{i}".encode()) in moved for i in range(KEYS)), \
                    f"none of the {prefix}: keys is in the slots moved"
            # MOVED/ASK followed: every key again, those in the moved slots on their new master.
            after_reshard = wait_for_clean_rounds(clients, "after the reshard", 30)

            # Kill the third master, outside the reshard; its replica takes over.
            victim = masters[2]
            victim_slots = slots_of(victim, node_ids([victim])[victim])
            promoted = kill_master(procs, victim)
            # The slot map refreshed: every key again, the dead master's on its replica.
            after_failover = wait_for_clean_rounds(clients, "after the failover", 40)

            results = {c.name: c.stop() for c in clients}
            rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports if p != victim],
                              socket_timeout=2)
            for name, r in results.items():
                confirmed = r["confirmed"]
                assert confirmed, f"{name}: no INCR was confirmed by WAIT: {r}"
                now = {k: int(rc.get(k) or 0) for k in confirmed}
                lost = {k: (v, now[k]) for k, v in confirmed.items() if now[k] < v}
                assert not lost, f"{name}: confirmed increments lost (confirmed, now): {lost}"
                # Some of them confirmed by the killed master's replica before the kill (after
                # it, the promoted replica has no replica to confirm anything).
                r["on_victim"] = sum(key_slot(k.encode()) in victim_slots for k in confirmed)
                assert r["on_victim"], f"{name}: no confirmed INCR on the master killed: {r}"
                # Each followed at least one MOVED or ASK (its keys in the moved slots).
                assert r["redirects"] > 0, f"{name} followed no redirection: {r}"
            print(f"\nbuilds, 6 nodes and every client's first round {loaded - began:.1f} s; reshard "
                  f"{resharded - loaded:.1f} s; replica promoted {promoted:.1f} s after the kill")
            for name, r in results.items():
                print(f"{name}: {r['incrs']} INCRs, {r['errors']} errors, {r['redirects']} MOVED/ASK followed, "
                      f"{len(r['confirmed'])} keys confirmed ({r['on_victim']} on the master killed), longest without an INCR {r['max_gap_s']:.2f} s; "
                      f"every key again {after_reshard[name]:.1f} s after the reshard, "
                      f"{after_failover[name]:.1f} s after the promotion")
    finally:
        for c in clients:
            c.kill()
        shutil.rmtree(out_dir, ignore_errors=True)
