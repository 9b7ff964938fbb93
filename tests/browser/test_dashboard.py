"""The live dashboard (`--metrics-port`) rendered by a real headless Chromium under load.

Chromium runs with --virtual-time-budget: its page timers run on virtual time, and virtual time
pauses while a fetch is pending, so the page's 1 s poll loop makes one real round trip per virtual
second, a few ms of wall clock apart. The page computes rates from the server's own `time_ms`,
so those rates stay true; a single --dump-dom after the budget shows several samples.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("ATOLL_BIN", os.path.join(ROOT, "target", "debug", "atoll-server"))
VIRTUAL_TIME_MS = 8000  # ~8 polls of /api/stats
SCREENSHOT_VIRTUAL_TIME_MS = 30000  # a fuller chart for docs/dashboard.png
CHROMIUM_TIMEOUT_S = 120
STATS_KEYS = {"time_ms", "uptime_s", "version", "server", "commands_total", "connected_clients",
              "blocked_clients", "used_memory", "used_memory_rss", "keys", "expired_keys",
              "keyspace_hits", "keyspace_misses", "net_input_bytes", "net_output_bytes",
              "commands", "slowlog", "hotkeys"}


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def find_chromium():
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        pytest.fail("chromium not found: install it with `apt-get install -y chromium` (Debian package)")
    return path


# urllib would honour an http_proxy from the environment even for 127.0.0.1
HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(port, path):
    with HTTP.open(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


@pytest.fixture
def atoll(tmp_path):
    assert os.path.exists(BINARY), f"{BINARY} missing: build it first (cargo build)"
    port, mport = free_ports(2)
    log = open(tmp_path / "atoll.log", "wb")
    proc = subprocess.Popen([BINARY, "--port", str(port), "--metrics-port", str(mport),
                             "--save", "", "--loglevel", "warning"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not (accepts(port) and accepts(mport)):
            if proc.poll() is not None:
                pytest.fail(f"atoll-server exited with {proc.returncode}:\n"
                            + (tmp_path / "atoll.log").read_text(errors="replace"))
            if time.monotonic() > deadline:
                pytest.fail(f"atoll-server did not accept on ports {port} and {mport} within 15 s")
            time.sleep(0.05)
        yield port, mport
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Load(threading.Thread):
    """SET/GET/INCR on a few keys until stopped."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.ops, self.error = port, 0, None
        self.stop = threading.Event()

    def run(self):
        try:
            r = redis.Redis(port=self.port, socket_timeout=10)
            i = 0
            while not self.stop.is_set():
                k = f"dash:{i % 5}"
                r.set(k, i)
                r.get(k)
                r.incr("dash:counter")
                self.ops += 3
                i += 1
        except Exception as e:  # reported by the test, not swallowed
            self.error = e


def run_chromium(chromium, profile, *args):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-proxy-server", f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {CHROMIUM_TIMEOUT_S} s: {' '.join(cmd)}")
    finally:
        try:  # leftover renderer/zygote children of this run only
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{err.decode(errors='replace')[-3000:]}"
    return out.decode(errors="replace"), err.decode(errors="replace")


def body_attrs(dom):
    m = re.search(r"<body\b([^>]*)>", dom)
    assert m, f"no <body> in dumped DOM:\n{dom[:2000]}"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


def test_dashboard_renders_live_stats(atoll, tmp_path):
    chromium = find_chromium()
    port, mport = atoll

    # the contract the page relies on, checked directly for clearer failures
    status, ctype, page = http_get(mport, "/")
    assert status == 200 and b"Atoll" in page and "text/html" in ctype, (status, ctype)
    status, ctype, raw = http_get(mport, "/api/stats")
    assert status == 200, status
    stats = json.loads(raw)
    assert STATS_KEYS <= stats.keys(), f"/api/stats lacks {sorted(STATS_KEYS - stats.keys())}"
    assert stats["server"] == "atoll"

    load = Load(port)
    load.start()
    try:
        deadline = time.monotonic() + 10
        while load.ops < 300 and load.error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert load.error is None, f"load failed: {load.error!r}"
        assert load.ops >= 300, f"load too slow: {load.ops} ops in 10 s"

        url = f"http://127.0.0.1:{mport}/"
        dom, err = run_chromium(chromium, tmp_path / "profile-dom",
                                f"--virtual-time-budget={VIRTUAL_TIME_MS}", "--dump-dom", url)
        shot = tmp_path / "dashboard.png"
        run_chromium(chromium, tmp_path / "profile-shot", f"--virtual-time-budget={SCREENSHOT_VIRTUAL_TIME_MS}",
                     "--window-size=1280,800", "--hide-scrollbars", f"--screenshot={shot}", url)
        assert load.error is None, f"load failed: {load.error!r}"
    finally:
        load.stop.set()
        load.join(timeout=15)

    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title and "Atoll" in title.group(1), f"page did not load:\n{dom[:2000]}\n{err[-2000:]}"
    attrs = body_attrs(dom)
    samples = int(attrs.get("data-samples", "0"))
    last_ops = float(attrs.get("data-last-ops", "0"))
    series = [float(x) for x in attrs.get("data-ops-series", "").split(",") if x]
    assert samples >= 3, f"only {samples} successful polls: {attrs}"
    assert last_ops > 0, f"no ops/s under load: {attrs}"
    assert len(set(series)) >= 2, f"ops series does not move: {series}"
    cmd_body = re.search(r'<tbody id="cmd-body">(.*?)</tbody>', dom, re.S)
    assert cmd_body and re.search(r"<td[^>]*>(get|set|incr)</td>", cmd_body.group(1), re.I), \
        f"commands table is empty under load: {cmd_body and cmd_body.group(1)[:500]}"

    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, "screenshot missing or blank"
    dest = os.environ.get("ATOLL_SCREENSHOT")
    if dest:
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        shutil.copyfile(shot, dest)
