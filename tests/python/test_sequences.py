"""Hostile sequences in CI (issue 34): bench/sequences.py for half a minute against the debug
build — where the lock-order check is live — with four clients sending random commands from
the whole table alone, pipelined, in MULTI and through EVAL across databases, a chaos client
interleaving CLIENT KILL, CLIENT PAUSE, SWAPDB, FLUSHALL and DEBUG RELOAD, a PING watchdog,
and a deterministic sequence whose DEBUG DIGEST is compared with Redis 7.2.6's. The long runs
(30 minutes, the release build) are in docs/BENCHMARKS.md."""
import os
import subprocess
import sys

from atoll_proc import BINARY

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_half_a_minute_of_hostile_sequences_hangs_nothing_and_digests_match_redis():
    env = dict(os.environ, ATOLL_BIN=BINARY)
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "sequences.py"), "--minutes", "0.5", "--clients", "4",
         "--seed", os.environ.get("SEQUENCES_SEED", "20261127")],
        capture_output=True, text=True, env=env, timeout=300)
    print(out.stdout[-3000:])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = [l for l in out.stdout.splitlines() if l.startswith("result: ok")]
    assert result, out.stdout[-3000:]
    # Something ran: rounds answered and commands compared with Redis.
    words = result[0].split()
    assert int(words[2]) > 100, result[0]
