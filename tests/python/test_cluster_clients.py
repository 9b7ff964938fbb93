"""A cluster-aware client through the life of an Atoll cluster: six Atoll nodes made into three
masters with a replica each by Redis 7.2.6's `redis-cli --cluster create`; redis-py's
`RedisCluster` keeps incrementing counters (each INCR confirmed by WAIT 1 on its master)
while `redis-cli --cluster reshard` moves 1,000 slots between masters and then a master is
killed (-9). The client follows MOVED/ASK and refreshes its slot map by itself, the replica
is promoted, the load goes on, and no confirmed increment is lost."""
import os
import subprocess
import threading
import time

import redis
from redis.cluster import ClusterNode, RedisCluster

from atoll_proc import BINARY, free_port
from test_sentinel_clients import redis_binary, start, wait_for


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


def test_redis_py_cluster_client_through_a_reshard_and_a_failover():
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
            redis.Redis(port=p).info("replication").get("master_link_status", "up") == "up" for p in ports))
        wait_for("the cluster ok everywhere", 30, lambda: all(
            redis.Redis(port=p).cluster("info")["cluster_state"] == "ok" for p in ports))

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
                    v = c.incr(k)
                    if c.execute_command("WAIT", 1, 100, target_nodes=c.get_node_from_key(k)) >= 1:
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

        ids = {p: redis.Redis(port=p, decode_responses=True).cluster("myid") for p in ports}
        masters = [p for p in ports if role(p) == "master"]
        assert len(masters) == 3, masters
        src, dst = masters[0], masters[1]
        code, out = cli("reshard", f"127.0.0.1:{src}", "--cluster-from", ids[src], "--cluster-to", ids[dst],
                        "--cluster-slots", "1000", "--cluster-yes")
        assert code == 0, out[-2000:]
        before_kill = state["incrs"]

        # Kill the third master; its replica takes over.
        victim = masters[2]
        replica = next(p for p in ports if p != victim and
                       redis.Redis(port=p).info("replication").get("master_port") == victim)
        procs[victim].kill()
        procs[victim].wait()
        killed = time.time()
        wait_for("the replica's promotion", 30,
                 lambda: role(replica) == "master"
                 and redis.Redis(port=replica).cluster("info")["cluster_state"] == "ok")
        promoted = time.time() - killed
        wait_for("the load to go on after the failover", 30, lambda: state["incrs"] > before_kill + 100)
        state["stop"] = True
        t.join(30)
        assert not t.is_alive()

        lost = {k: (v, int(rc.get(k) or 0)) for k, v in confirmed.items() if int(rc.get(k) or 0) < v}
        assert not lost, f"confirmed increments lost: {lost}"
        assert len(confirmed) > 100
        live = [p for p in ports if p != victim]
        total = sum(redis.Redis(port=p).dbsize() for p in live if role(p) == "master")
        assert total == 500, f"{total} keys on the masters"
        print(f"\n{state['incrs']} INCRs ({state['errors']} retried) through a 1000-slot reshard and a "
              f"failover; replica promoted {promoted:.1f} s after the kill")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
