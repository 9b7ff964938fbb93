"""Starting the Atoll binary for the Python tests: one place for where the binary is, a free
port, and waiting until the server answers."""
import contextlib
import os
import socket
import subprocess
import tempfile
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("ATOLL_BIN", os.path.join(ROOT, "target", "debug", "atoll-server"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@contextlib.contextmanager
def atoll(port, *args):
    """Runs Atoll on `port` with extra arguments until the block ends; it must exit cleanly."""
    assert os.path.exists(BINARY), f"{BINARY} missing: build it first (cargo build)"
    # A directory of its own (no stray dump.rdb loaded or left behind) and no save points
    # unless the test sets them.
    scratch = tempfile.mkdtemp(prefix="atoll-py-")
    defaults = [] if "--save" in args else ["--save", ""]
    proc = subprocess.Popen([BINARY, "--port", str(port), "--loglevel", "warning", "--dir", scratch,
                             *defaults, *args], stdout=subprocess.DEVNULL)
    for _ in range(500):
        try:
            redis.Redis(port=port).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    try:
        yield proc
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
