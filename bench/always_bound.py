#!/usr/bin/env python3
"""How fast could `appendfsync always` go on this machine if the fsync overlapped the serving?

An experiment for issue 17's one open target (`always` at >= 1.5x Redis's SET/s with 50
clients over TCP, server on one core). Atoll's landed design blocks: a round serves its
requests, fsyncs, then replies — the core idles during the fsync. An overlapped design would
serve the next requests while the fsync runs on another thread of the same core, and hold each
reply until an fsync that began after its write has ended.

This script measures what bounds such a design, with a build patched by
bench/always-unheld.patch (`ATOLL_EXPERIMENT_NOWAIT`: replies go out at once, while the AOF
writer thread fsyncs back to back whatever was written — NOT durable, an experiment only):

* its SET/s is what serving costs with fsyncs running beside it on the core, an upper bound
  for any overlapped design (which must also hold replies);
* its fsyncs run back to back, so elapsed ÷ fdatasync calls is one fsync's wall time while
  the core serves. A held reply waits for at least one whole such fsync, so 50 clients can
  complete at most 50 ÷ that time requests per second (Little's law), and about 50 ÷ (1.5 ×
  that time) on average (half of the running fsync, then its own).

It also runs the writer thread `SCHED_FIFO` (`chrt`, root), so that its wake-ups preempt the
worker at once: the best scheduling an overlapped fsync could get.

Usage: build the patched server once, then run (Redis 7.0.15 from apt, as bench/bench.py):

    git worktree add /tmp/unheld && (cd /tmp/unheld && git apply <repo>/bench/always-unheld.patch \
        && cargo build --release -p atoll-server)
    ATOLL_UNHELD=/tmp/unheld/target/release/atoll-server python3 bench/always_bound.py --rounds 3
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

AOF = ["--appendonly", "yes", "--appendfsync", "always"]


def writer_fifo(pid):
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/comm") as f:
            if f.read().strip() == "atoll-aof":
                subprocess.run(["chrt", "-f", "-p", "1", t], check=True)
                return
    raise SystemExit("no atoll-aof thread found")


def one(kind, requests, unheld=None, fifo=False):
    """(ops/s, server CPU µs/op, fdatasync calls) of one 50-client loadgen SET run over TCP."""
    d = tempfile.mkdtemp(prefix="atoll-bound-")
    env = dict(os.environ)
    if unheld:
        os.environ["ATOLL_EXPERIMENT_NOWAIT"] = "1"
        saved, bench.ATOLL = bench.ATOLL, unheld
    try:
        p, port = bench.start(kind, extra=["--dir", d, *AOF])
    finally:
        if unheld:
            bench.ATOLL = saved
            os.environ.clear()
            os.environ.update(env)
    try:
        if fifo:
            writer_fifo(p.pid)
        u0, s0 = bench.proc_user_sys_ticks(p.pid)
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_fdatasync", "-p", str(p.pid)],
                                stderr=subprocess.PIPE, text=True)
        time.sleep(0.2)
        ops, _ = bench.run_loadgen(port, "set", requests)
        perf.send_signal(2)
        err = perf.communicate()[1]
        u1, s1 = bench.proc_user_sys_ticks(p.pid)
        m = re.search(r"^(\d+),", err, re.M)
        fsyncs = int(m.group(1)) if m else 0
        return ops, (u1 - u0 + s1 - s0) / bench.HZ * 1e6 / requests, fsyncs
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300000)
    a = ap.parse_args()
    unheld = os.environ.get("ATOLL_UNHELD")
    if not unheld or not os.path.exists(unheld):
        raise SystemExit("ATOLL_UNHELD must name a server built with bench/always-unheld.patch (see --help)")
    runs = [("Redis, always", "redis", None, False), ("Atoll, always (landed: blocking)", "atoll", None, False),
            ("unheld, writer at normal priority", "atoll", unheld, False),
            ("unheld, writer SCHED_FIFO", "atoll", unheld, True)]
    res = {r[0]: [] for r in runs}
    for i in range(a.rounds):
        for name, kind, bin_, fifo in (runs if i % 2 == 0 else runs[::-1]):
            res[name].append(one(kind, a.requests, bin_, fifo))
    print("SET, 50 clients, loadgen, TCP, server on CPU 0 | ops/s | CPU µs/op | fdatasyncs | "
          "µs per fsync if back to back | held bound 50÷t | 50÷1.5t")
    redis = [x[0] for x in res["Redis, always"]]
    for name, v in res.items():
        ops = statistics.median(x[0] for x in v)
        cpu = statistics.median(x[1] for x in v)
        fs = statistics.median(x[2] for x in v)
        line = f"{name:34} | {ops:8.0f} | {cpu:5.2f} | {fs:6.0f}"
        if name.startswith("unheld"):
            # Each round: elapsed ÷ fsyncs, and the bounds against that round's Redis.
            t = [a.requests / x[0] / x[2] * 1e6 for x in v]
            b1 = [50 / (ti / 1e6) / r for ti, r in zip(t, redis)]
            b2 = [50 / (1.5 * ti / 1e6) / r for ti, r in zip(t, redis)]
            line += (f" | {statistics.median(t):6.0f} | {statistics.median(b1):.2f}× Redis"
                     f" | {statistics.median(b2):.2f}× Redis")
        else:
            line += f" | {'':6} | {statistics.median(x[0] / r for x, r in zip(v, redis)):.2f}× Redis (paired)"
        print(line + "   rounds: " + " ".join(f"{x[0]:.0f}" for x in v))


if __name__ == "__main__":
    main()
