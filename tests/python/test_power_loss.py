"""Power loss, not just kill -9: Atoll and Redis 7.2.6 each write their AOF and RDB onto
forgetfs (forgetfs.py), a FUSE layer that forgets at a "power cut" every byte and every name
that fsync did not make durable. Under a multi-client write load (INCR, RPUSH, MULTI/EXEC,
MSET) the server is killed and the power cut at a random moment; both are restarted on what
was durable, and every client's acknowledged writes are checked:

* `appendfsync always`: nothing acknowledged is lost, no transaction or MSET is half there;
* `appendfsync everysec`: what was acknowledged 2 s before the cut is there;
* `appendfsync no`: losses are seen (the layer really forgets);
* SAVE and a finished BGSAVE survive the cut (the file, and its name, made durable);
* a replica on the layer (its primary on an ordinary disk): with `appendfsync always` every
  write WAITAOF 0 1 counted it for is there after its cut, with `no` writes it acknowledged
  receiving (WAIT 1) are seen to go; the RDB of its full sync survives a cut right after it.

POWERLOSS_TRIALS=n runs n trials per policy and server (bench/powerloss.sh records ≥ 20).
"""
import os
import random
import signal
import sys
import subprocess
import tempfile
import threading
import time

import pytest
import redis

from atoll_proc import BINARY, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRIALS = int(os.environ.get("POWERLOSS_TRIALS", "2"))
CLIENTS = 4


def redis_binary():
    b = os.environ.get("REDIS_SERVER")
    if b:
        return b
    tool = os.path.join(ROOT, "scripts", "oracle.sh")
    out = subprocess.run([tool], capture_output=True, text=True)
    assert out.returncode == 0, f"the Redis 7.2.6 oracle is needed: {out.stderr}"
    return out.stdout.strip()


class Layer:
    """forgetfs mounted on a scratch directory, over a backing directory that survives cuts."""

    def __init__(self):
        self.backing = tempfile.mkdtemp(prefix="forgetfs-backing-")
        self.mnt = tempfile.mkdtemp(prefix="forgetfs-mnt-")
        self.proc = None
        self.mount()

    def mount(self):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "forgetfs.py"), self.backing, self.mnt],
                                     stderr=subprocess.DEVNULL)
        for _ in range(500):
            if os.path.ismount(self.mnt):
                return
            assert self.proc.poll() is None, "forgetfs exited: is /dev/fuse usable and libfuse2 installed?"
            time.sleep(0.01)
        raise AssertionError("forgetfs did not mount")

    def cut_power(self):
        """Everything not fsync'd is gone: the layer dies without a word, and comes back on
        its durable state."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        subprocess.run(["umount", "-l", self.mnt], check=False)
        self.mount()

    def close(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        subprocess.run(["umount", "-l", self.mnt], check=False)


def start(kind, layer, *args):
    port = free_port()
    if kind == "atoll":
        cmd = [BINARY, "--port", str(port), "--dir", layer.mnt, "--loglevel", "warning", *args]
    else:
        cmd = [redis_binary(), "--port", str(port), "--dir", layer.mnt, "--loglevel", "warning", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port, socket_timeout=20)
    for _ in range(1000):
        try:
            r.ping()
            return proc, r
        except redis.exceptions.BusyLoadingError:
            time.sleep(0.01)
        except redis.ConnectionError:
            assert proc.poll() is None, f"{kind} exited at start on forgetfs: {proc.returncode}"
            time.sleep(0.01)
    raise AssertionError(f"{kind} did not start")


def load(port, k, stop, acked):
    """One client's writes; `acked[k]` keeps (time, incr, list length, tx, mset) after each
    acknowledged round."""
    r = redis.Redis(port=port, socket_timeout=10)
    i = 0
    try:
        while not stop.is_set():
            i += 1
            c = r.incr(f"c:{k}")
            n = r.rpush(f"l:{k}", i)
            p = r.pipeline(transaction=True)
            p.incr(f"tx:a:{k}")
            p.incr(f"tx:b:{k}")
            t = p.execute()[0]
            r.mset({f"m1:{k}": i, f"m2:{k}": i})
            acked[k].append((time.monotonic(), c, n, t, i))
    except (redis.ConnectionError, redis.TimeoutError, ConnectionResetError):
        pass


def trial(kind, policy, rng):
    """One cut under load. Returns (per-client acked history, per-client restored values)."""
    layer = Layer()
    try:
        proc, r = start(kind, layer, "--appendonly", "yes", "--appendfsync", policy, "--save", "")
        stop = threading.Event()
        acked = {k: [] for k in range(CLIENTS)}
        port = r.connection_pool.connection_kwargs["port"]
        threads = [threading.Thread(target=load, args=(port, k, stop, acked)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.5, 2.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        cut = time.monotonic()
        layer.cut_power()
        stop.set()
        for t in threads:
            t.join()
        proc, r = start(kind, layer, "--appendonly", "yes", "--appendfsync", policy, "--save", "")
        got = {}
        for k in range(CLIENTS):
            vals = [r.get(f"c:{k}"), r.llen(f"l:{k}"), r.get(f"tx:a:{k}"), r.get(f"tx:b:{k}"),
                    r.get(f"m1:{k}"), r.get(f"m2:{k}")]
            got[k] = [int(v) if v is not None else 0 for v in vals]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return acked, got, cut
    finally:
        layer.close()


def check_nothing_lost(kind, acked, got):
    for k, hist in acked.items():
        c, n, ta, tb, m1, m2 = got[k]
        assert ta == tb, f"{kind}: client {k}: a transaction is half there ({ta} vs {tb})"
        assert m1 == m2, f"{kind}: client {k}: an MSET is half there ({m1} vs {m2})"
        if not hist:
            continue
        _, ac, an, at, am = hist[-1]
        # At most the one round in flight at the cut may be there unacknowledged.
        assert ac <= c <= ac + 1, f"{kind}: client {k}: INCR acknowledged {ac}, restored {c}"
        assert an <= n <= an + 1, f"{kind}: client {k}: RPUSH acknowledged length {an}, restored {n}"
        assert at <= ta <= at + 1, f"{kind}: client {k}: MULTI/EXEC acknowledged {at}, restored {ta}"
        assert am <= m1 <= am + 1, f"{kind}: client {k}: MSET acknowledged {am}, restored {m1}"


@pytest.mark.parametrize("kind", ["atoll", "redis"])
def test_appendfsync_always_loses_nothing_acknowledged_across_a_power_cut(kind):
    rng = random.Random(os.environ.get("POWERLOSS_SEED", "1"))
    total = 0
    for _ in range(TRIALS):
        acked, got, _ = trial(kind, "always", rng)
        assert sum(len(h) for h in acked.values()) > 20, f"{kind}: too little load to mean anything"
        check_nothing_lost(kind, acked, got)
        total += sum(len(h) for h in acked.values())
    print(f"{kind} always: {TRIALS} cuts, {total} acknowledged rounds, none lost")


@pytest.mark.parametrize("kind", ["atoll", "redis"])
def test_appendfsync_everysec_loses_at_most_two_seconds(kind):
    rng = random.Random(os.environ.get("POWERLOSS_SEED", "2"))
    worst = 0.0
    for _ in range(TRIALS):
        acked, got, cut = trial(kind, "everysec", rng)
        for k, hist in acked.items():
            c, _, ta, tb, m1, m2 = got[k]
            assert ta == tb and m1 == m2, f"{kind}: client {k}: half a transaction or MSET: {got[k]}"
            old = [h for h in hist if h[0] <= cut - 2.0]
            if old:
                assert c >= old[-1][1], f"{kind}: client {k}: lost more than 2 s: had {old[-1][1]}, restored {c}"
            # The window lost: from the first acknowledged round not restored to the cut.
            missing = [h for h in hist if h[1] > c]
            if missing:
                worst = max(worst, cut - missing[0][0])
    print(f"{kind} everysec: {TRIALS} cuts, longest window lost {worst:.2f} s")


@pytest.mark.parametrize("kind", ["atoll", "redis"])
def test_appendfsync_no_is_seen_to_lose_writes(kind):
    """The layer's proof: with no fsync at all, acknowledged writes are gone after the cut."""
    rng = random.Random(os.environ.get("POWERLOSS_SEED", "3"))
    losing = 0
    for _ in range(max(1, TRIALS // 4)):
        acked, got, _ = trial(kind, "no", rng)
        lost = [k for k, h in acked.items() if h and got[k][0] < h[-1][1]]
        assert lost, f"{kind}: appendfsync no lost nothing across a power cut: the layer did not forget"
        losing += 1
    print(f"{kind} no: {losing} of {max(1, TRIALS // 4)} cuts lost acknowledged writes")


@pytest.mark.parametrize("kind", ["atoll", "redis"])
def test_a_finished_save_survives_a_power_cut(kind):
    layer = Layer()
    try:
        proc, r = start(kind, layer, "--appendonly", "no", "--save", "")
        r.mset({f"k{i}": i for i in range(1000)})
        assert r.save()
        r.set("after-save", 1)
        r.mset({f"b{i}": i for i in range(500)})
        assert r.bgsave()
        for _ in range(1000):
            info = r.info("persistence")
            if info["rdb_bgsave_in_progress"] == 0:
                break
            time.sleep(0.01)
        assert info["rdb_last_bgsave_status"] == "ok"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        layer.cut_power()
        proc, r = start(kind, layer, "--appendonly", "no", "--save", "")
        assert r.dbsize() == 1501, f"{kind}: the BGSAVE's file did not survive the cut"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        layer.close()


def start_primary(kind):
    """A primary on an ordinary scratch directory (only the replica sits on forgetfs)."""
    class Plain:
        mnt = tempfile.mkdtemp(prefix="powerloss-primary-")
    return start(kind, Plain, "--appendonly", "no", "--save", "")


def wait_synced(replica):
    for _ in range(2000):
        info = replica.info("replication")
        if info.get("master_link_status") == "up" and replica.info("persistence").get("loading") == 0:
            return
        time.sleep(0.01)
    raise AssertionError(f"the replica did not sync: {replica.info('replication')}")


def replica_cut(kind, policy, rng, waitaof=True):
    """A replica on forgetfs (`appendonly yes`, `appendfsync POLICY`) of a primary under two
    clients' INCR and MULTI/EXEC rounds, each followed by WAITAOF 0 1 (or WAIT 1); the
    replica's power is cut at a random moment and it comes back alone on what it made durable.
    Returns, per client, the rounds the wait counted the replica for, and what the replica
    restored."""
    layer = Layer()
    pproc, primary = start_primary(kind)
    try:
        pport = primary.connection_pool.connection_kwargs["port"]
        rproc, replica = start(kind, layer, "--appendonly", "yes", "--appendfsync", policy, "--save", "",
                               "--replicaof", "127.0.0.1", str(pport))
        wait_synced(replica)
        stop = threading.Event()
        acked = {k: [] for k in range(2)}

        def load(k):
            r = redis.Redis(port=pport, socket_timeout=10)
            while not stop.is_set():
                c = r.incr(f"c:{k}")
                p = r.pipeline(transaction=True)
                p.incr(f"tx:a:{k}")
                p.incr(f"tx:b:{k}")
                t = p.execute()[0]
                if waitaof:
                    replicas = r.execute_command("WAITAOF", 0, 1, 1000)[1]
                else:
                    replicas = r.execute_command("WAIT", 1, 1000)
                if replicas == 1:
                    acked[k].append((c, t))

        threads = [threading.Thread(target=load, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(1.5, 3.0))
        rproc.send_signal(signal.SIGKILL)
        rproc.wait()
        layer.cut_power()
        stop.set()
        for t in threads:
            t.join()
        rproc, replica = start(kind, layer, "--appendonly", "yes", "--appendfsync", policy, "--save", "")
        got = {}
        for k in acked:
            got[k] = [int(replica.get(f"{n}:{k}") or 0) for n in ("c", "tx:a", "tx:b")]
            assert got[k][0] <= int(primary.get(f"c:{k}")), f"{kind}: the replica has writes its primary never made"
        rproc.send_signal(signal.SIGKILL)
        rproc.wait()
        return acked, got
    finally:
        pproc.send_signal(signal.SIGKILL)
        pproc.wait()
        layer.close()


@pytest.mark.parametrize("kind", ["atoll", "redis"])
def test_a_replica_keeps_what_waitaof_acknowledged_across_a_power_cut(kind):
    """`appendfsync always` on the replica: every write that WAITAOF 0 1 said the replica had
    fsync'd is in what the replica loads after its power is cut, no transaction half there."""
    rng = random.Random(os.environ.get("POWERLOSS_SEED", "5"))
    rounds = 0
    for _ in range(TRIALS):
        acked, got = replica_cut(kind, "always", rng)
        for k, hist in acked.items():
            c, ta, tb = got[k]
            assert ta == tb, f"{kind}: client {k}: a transaction is half there on the replica ({ta} vs {tb})"
            assert hist, f"{kind}: client {k}: WAITAOF never counted the replica"
            ac, at = hist[-1]
            assert c >= ac and ta >= at, \
                f"{kind}: client {k}: WAITAOF acknowledged INCR {ac} / MULTI {at}, the replica restored {c} / {ta}"
            rounds += len(hist)
    print(f"{kind}: {TRIALS} replica cuts, {rounds} rounds WAITAOF acknowledged, none lost")


@pytest.mark.parametrize("kind", ["atoll", "redis"])
def test_a_replica_without_fsync_is_seen_to_lose_writes(kind):
    """The layer's proof for replicas: with `appendfsync no` WAITAOF never counts the replica,
    and writes it acknowledged receiving (WAIT 1) are gone after the cut."""
    rng = random.Random(os.environ.get("POWERLOSS_SEED", "6"))
    acked, got = replica_cut(kind, "no", rng, waitaof=False)
    assert all(acked.values()), f"{kind}: WAIT never counted the replica"
    lost = [k for k, h in acked.items() if got[k][0] < h[-1][0]]
    assert lost, f"{kind}: a replica with appendfsync no lost nothing it received: the layer did not forget"


@pytest.mark.parametrize("kind", ["atoll", "redis"])
def test_a_replicas_synced_rdb_survives_a_power_cut(kind):
    """The RDB a replica received in its full sync is made durable (file and name) before it is
    used: cut right after the sync, the replica comes back alone with the whole dataset."""
    layer = Layer()
    pproc, primary = start_primary(kind)
    try:
        primary.mset({f"k{i}": i for i in range(2000)})
        pport = primary.connection_pool.connection_kwargs["port"]
        rproc, replica = start(kind, layer, "--appendonly", "no", "--save", "", "--replicaof", "127.0.0.1", str(pport))
        wait_synced(replica)
        assert replica.dbsize() == 2000
        rproc.send_signal(signal.SIGKILL)
        rproc.wait()
        layer.cut_power()
        rproc, replica = start(kind, layer, "--appendonly", "no", "--save", "")
        assert replica.dbsize() == 2000, f"{kind}: the replica's synced RDB did not survive the cut"
        rproc.send_signal(signal.SIGKILL)
        rproc.wait()
    finally:
        pproc.send_signal(signal.SIGKILL)
        pproc.wait()
        layer.close()
