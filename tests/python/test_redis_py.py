"""Atoll through redis-py, a client with its own handshake (HELLO 3, CLIENT SETINFO) and its
own parsers for both protocols."""
import os
import socket
import subprocess
import time

import pytest
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("ATOLL_BIN", os.path.join(ROOT, "target", "debug", "atoll-server"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def port():
    assert os.path.exists(BINARY), f"{BINARY} missing: build it first (cargo build)"
    p = free_port()
    proc = subprocess.Popen([BINARY, "--port", str(p), "--threads", "2", "--loglevel", "warning"],
                            stdout=subprocess.DEVNULL)
    for _ in range(500):
        try:
            redis.Redis(port=p).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    yield p
    proc.terminate()
    assert proc.wait(timeout=10) == 0


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
