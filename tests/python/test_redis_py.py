"""Atoll through redis-py, a client with its own handshake (HELLO 3, CLIENT SETINFO) and its
own parsers for both protocols."""

import pytest
import redis

from atoll_proc import atoll, free_port


@pytest.fixture(scope="module")
def port():
    p = free_port()
    with atoll(p, "--threads", "2"):
        yield p


@pytest.mark.parametrize("protocol", [2, 3])
def test_basic_types_and_handshake(port, protocol):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    r.flushdb()
    assert r.ping() is True
    assert r.set("k", "v", ex=100) is True
    assert r.get("k") == "v"
    assert 0 < r.ttl("k") <= 100
    assert r.incrbyfloat("f", 0.1) == pytest.approx(0.1)
    assert r.incrbyfloat("f", 0.2) == pytest.approx(0.3)
    assert r.get("f") == "0.3"
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget(["a", "b", "nope"]) == ["1", "2", None]
    assert r.client_info()["lib-name"] == "redis-py"
    assert r.config_get("databases") == {"databases": "16"}
    assert r.info("server")["redis_version"] == "7.2.4"
    assert r.info("persistence")["loading"] == 0


def test_transactions_and_watch(port):
    r = redis.Redis(port=port, decode_responses=True)
    r.set("balance", 10)
    with r.pipeline() as p:
        p.watch("balance")
        v = int(p.get("balance"))
        p.multi()
        p.set("balance", v + 5)
        assert p.execute() == [True]
    other = redis.Redis(port=port)
    with r.pipeline() as p:
        p.watch("balance")
        other.set("balance", 0)
        p.multi()
        p.set("balance", 99)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("balance") == "0"


def test_errors_are_redis_errors(port):
    r = redis.Redis(port=port)
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.incr("s")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        r.execute_command("NOSUCHCOMMAND")


def test_scan_iter_sees_every_key(port):
    r = redis.Redis(port=port, decode_responses=True)
    r.flushdb()
    with r.pipeline(transaction=False) as p:
        for i in range(3000):
            p.set(f"scan:{i}", i)
        p.execute()
    assert len(set(r.scan_iter(match="scan:*", count=100))) == 3000
