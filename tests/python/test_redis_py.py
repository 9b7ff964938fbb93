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


# redis-py marks DIGEST, DELEX and SET's digest conditions experimental (a UserWarning).
@pytest.mark.filterwarnings("ignore:Call to experimental method")
@pytest.mark.parametrize("protocol", [2, 3])
def test_hash_field_expiry_through_redis_py(port, protocol):
    """redis-py's own API for what came after Redis 7.2 (its HEXPIRE family, HGETEX, HSETEX,
    HGETDEL; Redis 8.4's DIGEST, DELEX and SET's digest conditions) works unchanged: the
    client's argument building and reply parsing meet Atoll's replies in both protocols."""
    from redis.commands.core import HashDataPersistOptions

    r = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    r.flushdb()
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.hexpire("h", 100, "a", "zz") == [1, -2]
    assert r.hpexpire("h", 100_000, "a", "b", nx=True) == [0, 1]
    assert r.hexpireat("h", 4102444800, "c") == [1]
    assert r.hpexpiretime("h", "c", "zz") == [4102444800000, -2]
    assert r.httl("h", "a")[0] in (99, 100)
    assert r.hpersist("h", "a", "zz") == [1, -2]
    assert r.httl("h", "a") == [-1]
    assert r.hgetex("h", "a", "b", "zz", px=0) == ["1", "2", None]
    assert r.hgetall("h") == {"c": "3"}
    assert r.hsetex("h", mapping={"d": "4", "e": "5"}, ex=50) == 1
    assert r.hsetex("h", "d", "9", data_persist_option=HashDataPersistOptions.FNX) == 0
    assert r.hsetex("h", "d", "6", keepttl=True) == 1
    assert r.httl("h", "d")[0] in (49, 50)
    assert r.hgetex("h", "d", persist=True) == ["6"]
    assert r.httl("h", "d") == [-1]
    assert r.hgetdel("h", "d", "zz") == ["6", None]
    assert r.hlen("h") == 2
    # Redis 8.4's digest conditions.
    r.set("k", "Hello world")
    assert r.digest("k") == "b6acb9d84a38ff74"
    assert r.set("k", "v2", ifdeq="0000000000000000") is None
    assert r.set("k", "v2", ifdeq="b6acb9d84a38ff74") is True
    assert r.set("k", "v3", ifne="v2") is None
    assert r.delex("k", ifeq="nope") == 0
    assert r.delex("k", ifdne=r.digest("k")) == 0
    assert r.delex("k", ifdeq=r.digest("k")) == 1
    assert r.exists("k") == 0
