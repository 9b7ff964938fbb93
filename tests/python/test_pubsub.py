"""Pub/Sub, keyspace notifications and MONITOR through redis-py's own objects (PubSub,
Monitor), as applications use them: subscribers and publishers in separate processes on a
two-worker Atoll, RESP2 and RESP3 connections, message order per publisher, output limits."""

import multiprocessing
import threading
import time

import pytest
import redis

from atoll_proc import atoll, free_port


@pytest.fixture(scope="module")
def port():
    p = free_port()
    with atoll(p, "--threads", "2"):
        yield p


def _messages(p, n, timeout=5.0):
    """The next `n` data messages of a PubSub object (confirmations skipped)."""
    got = []
    end = time.time() + timeout
    while len(got) < n and time.time() < end:
        m = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if m is not None:
            got.append(m)
    return got


@pytest.mark.parametrize("protocol", [2, 3])
def test_pubsub_object_channels_and_patterns(port, protocol):
    r = redis.Redis(port=port, protocol=protocol)
    p = r.pubsub()
    p.subscribe("news")
    p.psubscribe("sport.*")
    # Wait for both confirmations before publishing.
    confirmations = [p.get_message(timeout=2) for _ in range(2)]
    assert [c["type"] for c in confirmations] == ["subscribe", "psubscribe"]
    assert r.pubsub_numsub("news") == [(b"news", 1)]
    assert r.pubsub_numpat() == 1
    assert r.publish("news", "hello") == 1
    assert r.publish("sport.tennis", "ace") == 1
    assert r.publish("weather", "rain") == 0
    got = _messages(p, 2)
    assert [(m["type"], m["channel"], m["data"]) for m in got] == [
        ("message", b"news", b"hello"),
        ("pmessage", b"sport.tennis", b"ace"),
    ]
    assert got[1]["pattern"] == b"sport.*"
    p.unsubscribe("news")
    p.punsubscribe()
    p.close()


def test_pubsub_run_in_thread_handler(port):
    r = redis.Redis(port=port)
    seen = []
    done = threading.Event()

    def handler(m):
        seen.append(m["data"])
        if len(seen) == 3:
            done.set()

    p = r.pubsub()
    p.subscribe(**{"jobs": handler})
    t = p.run_in_thread(sleep_time=0.01)
    deadline = time.time() + 5
    while r.pubsub_numsub("jobs") != [(b"jobs", 1)] and time.time() < deadline:
        time.sleep(0.01)
    for i in range(3):
        r.publish("jobs", f"job-{i}")
    assert done.wait(5)
    t.stop()
    t.join(5)
    assert seen == [b"job-0", b"job-1", b"job-2"]


def _publisher(port, name, n):
    r = redis.Redis(port=port)
    for i in range(n):
        r.publish("stream", f"{name}:{i}")


def test_messages_keep_each_publishers_order_across_processes(port):
    """Subscribers on both workers, publishers in other processes: every subscriber gets all
    messages, and each publisher's in the order it sent them."""
    subs = []
    for _ in range(4):
        p = redis.Redis(port=port).pubsub()
        p.subscribe("stream")
        assert p.get_message(timeout=2)["type"] == "subscribe"
        subs.append(p)
    n = 300
    procs = [multiprocessing.Process(target=_publisher, args=(port, f"p{k}", n)) for k in range(3)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(30)
        assert pr.exitcode == 0
    for p in subs:
        got = [m["data"].decode() for m in _messages(p, 3 * n, timeout=15)]
        assert len(got) == 3 * n
        for k in range(3):
            mine = [int(x.split(":")[1]) for x in got if x.startswith(f"p{k}:")]
            assert mine == list(range(n))
        p.close()


def test_keyspace_notifications_reach_a_pubsub_object(port):
    r = redis.Redis(port=port)
    r.config_set("notify-keyspace-events", "KEA")
    try:
        p = r.pubsub()
        p.psubscribe("__keyspace@0__:order:*")
        assert p.get_message(timeout=2)["type"] == "psubscribe"
        r.set("order:1", "new", px=100)
        r.hset("order:2", "state", "paid")
        r.delete("order:2")
        # The key with a 100 ms TTL expires by itself (active expiry) and says so.
        events = [(m["channel"], m["data"]) for m in _messages(p, 5, timeout=10)]
        assert events == [
            (b"__keyspace@0__:order:1", b"set"),
            (b"__keyspace@0__:order:1", b"expire"),
            (b"__keyspace@0__:order:2", b"hset"),
            (b"__keyspace@0__:order:2", b"del"),
            (b"__keyspace@0__:order:1", b"expired"),
        ]
        p.close()
    finally:
        r.config_set("notify-keyspace-events", "")


def test_monitor_object_sees_commands_scripts_and_redacts_passwords(port):
    r = redis.Redis(port=port)
    with r.monitor() as m:
        r.set("mon:k", "v 1")
        r.eval("return redis.call('get', KEYS[1])", 1, "mon:k")
        with pytest.raises(redis.AuthenticationError):
            r.execute_command("AUTH", "someone", "secret")
        seen = []
        for cmd in m.listen():
            seen.append(cmd)
            if cmd["command"].startswith("AUTH"):
                break
    # Commands as the clients spelled them (redis-py sends upper case; scripts lower case).
    by_cmd = [(c["command"], c["client_type"], c["db"]) for c in seen]
    assert ("SET mon:k v 1", "tcp", 0) in by_cmd
    evals = [i for i, c in enumerate(seen) if c["command"].startswith("EVAL")]
    assert evals, by_cmd
    # The script's own command follows the EVAL, from the "lua" client.
    after = seen[evals[0] + 1]
    assert (after["command"], after["client_type"]) == ("get mon:k", "lua")
    assert seen[-1]["command"] == "AUTH (redacted) (redacted)"


def test_a_subscriber_that_stops_reading_is_disconnected(port):
    """client-output-buffer-limit pubsub: a subscriber that never reads is cut off once its
    pending output passes the hard limit; the server keeps serving others."""
    r = redis.Redis(port=port)
    r.config_set("client-output-buffer-limit", "pubsub 256kb 0 0")
    try:
        slow = redis.Redis(port=port).pubsub()
        slow.subscribe("firehose")
        assert slow.get_message(timeout=2)["type"] == "subscribe"
        payload = "x" * 4096
        deadline = time.time() + 20
        while r.pubsub_numsub("firehose") == [(b"firehose", 1)] and time.time() < deadline:
            for _ in range(64):
                r.publish("firehose", payload)
        assert r.pubsub_numsub("firehose") == [(b"firehose", 0)]
        assert r.ping()
        slow.close()
    finally:
        r.config_set("client-output-buffer-limit", "pubsub 32mb 8mb 60")
