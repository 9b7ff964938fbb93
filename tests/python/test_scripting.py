"""Lua scripting through redis-py as applications use it: its distributed Lock (Lua scripts
run with EVALSHA, loaded on NOSCRIPT), registered scripts in pipelines, and FUNCTION
libraries. Several worker processes contend for the same lock on a two-worker Atoll."""

import multiprocessing
import time

import pytest
import redis
from redis.exceptions import LockNotOwnedError, ResponseError

from atoll_proc import atoll, free_port


@pytest.fixture(scope="module")
def port():
    p = free_port()
    with atoll(p, "--threads", "2"):
        yield p


def _locked_increments(port, rounds, out):
    """One worker process: takes the lock, does a read-modify-write the lock must protect
    (GET, pause, SET), releases it."""
    r = redis.Redis(port=port)
    done = 0
    for _ in range(rounds):
        with r.lock("lock:counter", timeout=10, blocking_timeout=30):
            v = int(r.get("counter") or 0)
            time.sleep(0.001)
            r.set("counter", v + 1)
            done += 1
    out.put(done)


def test_lock_serializes_worker_processes(port):
    r = redis.Redis(port=port)
    r.delete("counter", "lock:counter")
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_locked_increments, args=(port, 25, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert sum(out.get() for _ in procs) == 100
    # Without mutual exclusion the pause between GET and SET would lose increments.
    assert int(r.get("counter")) == 100
    assert r.exists("lock:counter") == 0


def test_lock_owner_extend_and_foreign_release(port):
    r = redis.Redis(port=port)
    lock = r.lock("lock:x", timeout=5)
    assert lock.acquire(blocking=False)
    assert lock.owned()
    assert lock.locked()
    other = r.lock("lock:x", timeout=5)
    assert not other.acquire(blocking=False)
    assert lock.extend(10)
    assert 10_000 < r.pttl("lock:x") <= 15_000
    assert lock.reacquire()
    # A token that does not own the lock cannot release it: the script refuses.
    other.local.token = b"someone-else"
    with pytest.raises(LockNotOwnedError):
        other.release()
    lock.release()
    assert not lock.locked()


def test_registered_scripts_in_pipelines_and_after_flush(port):
    r = redis.Redis(port=port, decode_responses=True)
    incr_by = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    r.delete("n")
    assert incr_by(keys=["n"], args=[5]) == 5
    r.script_flush()
    # redis-py sees NOSCRIPT and loads the script again.
    assert incr_by(keys=["n"], args=[2]) == 7
    with r.pipeline() as p:
        incr_by(keys=["n"], args=[1], client=p)
        incr_by(keys=["n"], args=[1], client=p)
        assert p.execute() == [8, 9]
    with pytest.raises(ResponseError, match="user_script:1"):
        r.eval("return redis.call('INCR', 'n', 'extra')", 0)


@pytest.mark.parametrize("protocol", [2, 3])
def test_reply_types(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    assert r.eval("return {1, 'two', {3}, redis.status_reply('OK')}", 0) == [1, "two", [3], "OK"]
    assert r.eval("return cjson.decode(ARGV[1])['a']", 0, '{"a": "b"}') == "b"
    assert r.eval("return {double=2.5}", 0) in (2.5, "2.5")
    assert r.eval("redis.setresp(3); return redis.call('HGETALL', 'nohash')", 0) in ([], {})


def test_functions(port):
    r = redis.Redis(port=port, decode_responses=True)
    r.function_flush()
    code = "#!lua name=counters\n" \
           "redis.register_function('bump', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n" \
           "redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"
    assert r.function_load(code) == "counters"
    r.delete("c")
    assert r.fcall("bump", 1, "c", 3) == 3
    assert r.fcall_ro("peek", 1, "c") == "3"
    with pytest.raises(ResponseError, match="write flag"):
        r.fcall_ro("bump", 1, "c", 1)
    libs = redis.Redis(port=port, protocol=3, decode_responses=True).function_list()
    assert libs[0]["library_name"] == "counters"
    assert sorted(f["name"] for f in libs[0]["functions"]) == ["bump", "peek"]
    dump = redis.Redis(port=port).function_dump()
    r.function_flush()
    with pytest.raises(ResponseError, match="Function not found"):
        r.fcall("bump", 1, "c", 1)
    assert redis.Redis(port=port).function_restore(dump) in (True, b"OK", "OK")
    assert r.fcall("bump", 1, "c", 1) == 4
