"""The metrics listener's /metrics, parsed by a real Prometheus text parser (prometheus_client),
with the counters checked against the commands that ran and against INFO."""
import urllib.request

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from atoll_proc import atoll, free_port


@pytest.fixture(scope="module")
def ports():
    p, m = free_port(), free_port()
    with atoll(p, "--metrics-port", str(m)):
        yield p, m


def scrape(m):
    with urllib.request.urlopen(f"http://127.0.0.1:{m}/metrics", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families, name, **labels):
    # prometheus_client names a counter's family without its _total suffix.
    fam = families.get(name) or families[name.removesuffix("_total")]
    for s in fam.samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError((name, labels))


def test_metrics_parse_and_count(ports):
    p, m = ports
    r = redis.Redis(port=p, decode_responses=True)
    r.flushall()
    for i in range(50):
        r.set(f"k{i}", i)
    pipe = r.pipeline(transaction=False)
    for _ in range(3000):
        pipe.get("k1")
    pipe.execute()
    with pytest.raises(redis.ResponseError):
        r.lpush("k1", "x")
    f = scrape(m)
    assert value(f, "redis_up") == 1
    assert value(f, "redis_commands_total", cmd="set") == 50
    assert value(f, "redis_commands_total", cmd="get") == 3000
    assert value(f, "redis_commands_failed_calls_total", cmd="lpush") == 1
    assert value(f, "redis_errors_total", err="WRONGTYPE") == 1
    assert value(f, "redis_db_keys", db="db0") == 50
    info = r.info("stats")
    assert value(f, "redis_keyspace_hits_total") == info["keyspace_hits"]
    # Latency histograms: cumulative buckets ending in +Inf at the call count.
    h = f["atoll_command_duration_seconds"]
    assert h.type == "histogram"
    buckets = [s for s in h.samples if s.name.endswith("_bucket") and s.labels["cmd"] == "get"]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf" and counts[-1] == 3000
    # The hottest key is the one read 3000 times (one command in 64 is sampled).
    hot = sorted(f["atoll_hotkey_commands"].samples, key=lambda s: -s.value)
    assert hot and hot[0].labels["key"] == "k1"


def test_api_stats_and_page(ports):
    p, m = ports
    import json
    with urllib.request.urlopen(f"http://127.0.0.1:{m}/api/stats", timeout=5) as resp:
        stats = json.loads(resp.read())
    for key in ["time_ms", "commands_total", "connected_clients", "used_memory", "keys", "commands", "slowlog", "hotkeys"]:
        assert key in stats
    with urllib.request.urlopen(f"http://127.0.0.1:{m}/", timeout=5) as resp:
        page = resp.read().decode()
    assert "<title>Atoll" in page and "api/stats" in page and "http://" not in page.split("<body")[0]
