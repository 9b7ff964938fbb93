"""The live dashboard (`--metrics-port`) rendered by a real headless Chromium under load.

Chromium is driven over the DevTools protocol on a pipe so that the page polls /api/stats in real
time, 1 s apart. (A one-shot `--virtual-time-budget=N --dump-dom` also shows several samples, but
virtual time runs the page's timers back to back, a few ms of wall clock apart, so a starved load
thread makes ops/s read 0 now and then: too flaky to assert on.)
"""
import base64
import fcntl
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("ATOLL_BIN", os.path.join(ROOT, "target", "debug", "atoll-server"))
MIN_SAMPLES = 5          # successful polls to wait for (about 1 s each)
SCREENSHOT_SAMPLES = 20  # a fuller chart when refreshing docs/dashboard.png (ATOLL_SCREENSHOT)
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
                             "--save", "", "--dir", str(tmp_path), "--loglevel", "warning"],
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
        r = redis.Redis(port=self.port, socket_timeout=10)
        try:
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
        finally:
            r.close()


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe):
    NUL-terminated JSON, commands on the child's fd 3, replies and events on its fd 4."""

    def __init__(self, binary, profile, url, log_path):
        def high(fd):  # keep our ends clear of 3 and 4 so the dup2 below cannot clobber them
            new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            return new
        child_in, self.cmd_w = map(high, os.pipe())
        self.resp_r, child_out = map(high, os.pipe())
        self.cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--no-proxy-server", f"--user-data-dir={profile}", "--remote-debugging-pipe",
                    "--window-size=1280,800", "--hide-scrollbars", url]
        # a tiny exec wrapper (not preexec_fn: the load thread is already running) puts the pipes on 3 and 4
        wrapper = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
                   "os.closerange(5, 65536); os.execvp(sys.argv[3], sys.argv[3:])")
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-c", wrapper, str(child_in), str(child_out), *self.cmd],
                                     pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        os.close(child_in)
        os.close(child_out)
        self.log_path, self.buf, self.next_id = log_path, b"", 0

    def call(self, method, params=None, session=None, timeout=15):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:  # anything else is an event
                    assert "error" not in reply, f"{method}: {reply['error']}"
                    return reply["result"]
            ready, _, _ = select.select([self.resp_r], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.resp_r, 1 << 20) if ready else None
            if not chunk:
                pytest.fail(f"chromium {'closed the pipe' if ready else 'timed out'} on {method}; "
                            f"command: {' '.join(self.cmd)}\n{self.output()[-3000:]}")
            self.buf += chunk

    def evaluate(self, session, expression):
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        assert "exceptionDetails" not in res, res["exceptionDetails"]
        return res["result"].get("value")

    def output(self):
        self.log.flush()
        return open(self.log_path, errors="replace").read()

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close", timeout=5)
                except BaseException:
                    pass
                self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:  # this browser's own process group: renderers, zygotes, whatever outlived it
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            for fd in (self.cmd_w, self.resp_r):
                os.close(fd)
            self.log.close()


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

    dest = os.environ.get("ATOLL_SCREENSHOT")
    want = max(MIN_SAMPLES, SCREENSHOT_SAMPLES if dest else 0)
    load = Load(port)
    load.start()
    browser = None
    try:
        deadline = time.monotonic() + 10
        while load.ops < 300 and load.error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert load.error is None, f"load failed: {load.error!r}"
        assert load.ops >= 300, f"load too slow: {load.ops} ops in 10 s"

        url = f"http://127.0.0.1:{mport}/"
        browser = Chromium(chromium, tmp_path / "profile", url, tmp_path / "chromium.log")
        deadline = time.monotonic() + 30
        while True:
            pages = [t for t in browser.call("Target.getTargets")["targetInfos"]
                     if t["type"] == "page" and t["url"].startswith(url)]
            if pages:
                break
            assert time.monotonic() < deadline, "chromium opened no page for the dashboard"
            time.sleep(0.1)
        session = browser.call("Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True})["sessionId"]
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}, session)
        deadline = time.monotonic() + want + 20
        samples = 0
        while samples < want and time.monotonic() < deadline:
            time.sleep(0.5)
            samples = browser.evaluate(session, "window.atollDash ? window.atollDash.samples : 0") or 0
        snap = json.loads(browser.evaluate(  # one evaluation: DOM and JS state from the same poll
            session, "JSON.stringify({dom: document.documentElement.outerHTML, dash: window.atollDash || null})"))
        dom, dash = snap["dom"], snap["dash"]
        shot = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"}, session)["data"])
        assert load.error is None, f"load failed: {load.error!r}"
    finally:
        load.stop.set()
        load.join(timeout=15)
        if browser:
            browser.close()

    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title and "Atoll" in title.group(1), f"page did not load:\n{dom[:2000]}"
    attrs = body_attrs(dom)
    assert dash, "window.atollDash is missing"
    samples = int(attrs.get("data-samples", "0"))
    last_ops = float(attrs.get("data-last-ops", "0"))
    assert samples >= 3, f"only {samples} successful polls: {attrs}"
    assert dash["samples"] == samples, (attrs, dash)
    assert last_ops > 0, f"no ops/s under load: {attrs}"
    series = dash["opsSeries"]
    assert len(set(series)) >= 2, f"ops series does not move: {series}"
    assert all(x >= 0 for x in series) and dash["lastOps"] == series[-1], dash
    cmd_body = re.search(r'<tbody id="cmd-body">(.*?)</tbody>', dom, re.S)
    assert cmd_body and re.search(r"<td[^>]*>(get|set|incr\w*)</td>", cmd_body.group(1), re.I), \
        f"commands table is empty under load: {cmd_body and cmd_body.group(1)[:500]}"

    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 10_000, "screenshot missing or blank"
    (tmp_path / "dashboard.png").write_bytes(shot)
    if dest:
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(shot)
