#!/usr/bin/env python3
"""Hostile sequences, for as long as you let it run (issue: "nothing a client sends can hang,
kill or silently break the server").

Two parts, against a release build of Atoll (and Redis 7.2.6 beside it for the second):

* chaos — several clients send random commands from the whole command table (arguments
  generated from COMMAND DOCS, random but valid-shaped: optional arguments sometimes, choices
  at random, keys from a small pool so commands collide), alone, in pipelines, inside
  MULTI/EXEC and inside EVAL, across databases; meanwhile a chaos client interleaves
  CLIENT KILL, CLIENT PAUSE, SWAPDB, FLUSHALL and DEBUG RELOAD. Every reply has a timeout; a
  watchdog client PINGs every second. Any timeout, a dead server, or a `BUG`/crash line in its
  log ends the run as a failure.
* digest — one client sends the same deterministic random sequence (data-type writes, MULTI
  blocks, scripts, SELECT/SWAPDB/FLUSHDB) to Atoll and to Redis 7.2.6, and compares
  DEBUG DIGEST after every batch.

Usage: python3 bench/sequences.py [--minutes 30] [--clients 6] [--seed N]
Prints one summary line per minute and a final one (copied to docs/BENCHMARKS.md).
"""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# No silent retries: a reply that times out is reported, a killed connection counted.
NO_RETRY = Retry(NoBackoff(), 0)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATOLL = os.path.join(ROOT, "target", "release", "atoll-server")
TIMEOUT = 15  # seconds any one reply may take
KEYS = [f"k{i}" for i in range(8)]

# Not sent by the random clients, and why: they end the server or the connection's protocol,
# turn the connection into something else, or are the chaos client's own.
SKIP = {
    "shutdown", "monitor", "replicaof", "slaveof", "sync", "psync", "quit", "hello", "reset",
    "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe",
    "client|pause", "client|kill", "client|reply", "client|tracking", "debug", "failover",
    "script|debug", "function|flush", "acl|load", "acl|save", "acl|setuser", "acl|deluser",
    "config|set", "config|rewrite", "module|load", "module|loadex", "migrate", "save",
    "bgsave", "bgrewriteaof", "flushall", "swapdb", "auth", "readonly", "readwrite",
}
# Arguments that bound how long a command blocks: always short.
BLOCKING_NAMES = {"timeout": "0.01", "milliseconds": "10", "numreplicas": "0"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(binary, *args):
    port = free_port()
    d = tempfile.mkdtemp(prefix="seq-")
    log = os.path.join(d, "server.log")
    p = subprocess.Popen([binary, "--port", str(port), "--dir", d, "--save", "", "--logfile", log,
                          "--enable-debug-command", "yes", *args])
    r = redis.Redis(port=port, socket_timeout=TIMEOUT)
    for _ in range(500):
        try:
            r.ping()
            return p, port, log
        except redis.ConnectionError:
            time.sleep(0.02)
    raise SystemExit(f"{binary} did not start")


def pairs(a):
    return {a[i].decode() if isinstance(a[i], bytes) else a[i]: a[i + 1] for i in range(0, len(a) - 1, 2)}


def docs(port):
    """name -> (group, argument specs) for every command and subcommand."""
    # Read raw: redis-py's COMMAND reply callback would take the DOCS reply for COMMAND's.
    conn = redis.Redis(port=port).connection_pool.get_connection()
    conn.send_command("COMMAND", "DOCS")
    raw = conn.read_response()
    out = {}
    items = raw.items() if isinstance(raw, dict) else pairs(raw).items()

    def norm(d):
        return d if isinstance(d, dict) else pairs(d)

    for name, d in items:
        name = name.decode() if isinstance(name, bytes) else name
        d = norm(d)
        subs = d.get("subcommands") or d.get(b"subcommands")
        if subs:
            subs = subs.items() if isinstance(subs, dict) else pairs(subs).items()
            for sn, sd in subs:
                sd = norm(sd)
                out[(sn.decode() if isinstance(sn, bytes) else sn).lower()] = sd
        else:
            out[name.lower()] = d
    return out


def text(v):
    return v.decode() if isinstance(v, bytes) else (v if isinstance(v, str) else "")


def gen(spec, rng, out, top=True):
    spec = spec if isinstance(spec, dict) else pairs(spec)
    g = lambda k: spec.get(k) if k in spec else spec.get(k.encode())
    flags = [text(f) for f in (g("flags") or [])]
    if "optional" in flags and not top and rng.random() < 0.7:
        return
    if "optional" in flags and top and rng.random() < 0.7:
        return
    reps = rng.randint(1, 3) if "multiple" in flags else 1
    for _ in range(reps):
        if g("token") is not None:
            out.append(text(g("token")))
        ty, name = text(g("type")), text(g("name"))
        if ty == "key":
            out.append(rng.choice(KEYS))
        elif name in BLOCKING_NAMES:
            out.append(BLOCKING_NAMES[name])
        elif ty in ("integer",):
            out.append(str(rng.choice([0, 1, 2, 3, -1, 10, 100])))
        elif ty == "double":
            out.append(rng.choice(["0", "1.5", "-2", "inf", "3"]))
        elif ty == "unix-time":
            out.append(str(int(time.time()) + rng.randint(-5, 100)))
        elif ty == "pattern":
            out.append(rng.choice(["*", "k*", "f?"]))
        elif ty == "string":
            out.append(rng.choice(["a", "b", "f1", "1", "0-1", "*", "$", ">", "x" * rng.randint(0, 40)]))
        elif ty == "pure-token":
            pass
        elif ty == "oneof":
            kids = g("arguments") or []
            if kids:
                gen(rng.choice(kids), rng, out, top=False)
        elif ty == "block":
            for a in g("arguments") or []:
                gen(a, rng, out, top=False)


def random_command(table, rng):
    name = rng.choice(table[0])
    d = table[1][name]
    args = name.split("|")
    for a in (d.get("arguments") or d.get(b"arguments") or []):
        gen(a, rng, args)
    return args


class Failure(Exception):
    pass


def raw_client(port):
    """A client that hands back replies as they came: redis-py's per-command reply callbacks
    expect the shapes of well-formed calls (COMMAND's, CLIENT LIST's …) and raise on others."""
    r = redis.Redis(port=port, socket_timeout=TIMEOUT, retry=NO_RETRY)
    r.response_callbacks.clear()
    return r


def client(port, table, rng, stop, stats, fail):
    r = raw_client(port)
    while not stop.is_set():
        mode = rng.random()
        try:
            r.execute_command("SELECT", rng.randint(0, 3))
            if mode < 0.4:
                r.execute_command(*random_command(table, rng))
            elif mode < 0.6:
                p = r.pipeline(transaction=False)
                for _ in range(rng.randint(2, 10)):
                    p.execute_command(*random_command(table, rng))
                p.execute(raise_on_error=False)
            elif mode < 0.8:
                p = r.pipeline(transaction=True)
                for _ in range(rng.randint(1, 6)):
                    p.execute_command(*random_command(table, rng))
                p.execute(raise_on_error=False)
            else:
                c = random_command(table, rng)
                r.eval("return redis.pcall(unpack(ARGV))", 0, *c)
            stats["ok"] += 1
        except redis.TimeoutError as e:
            fail.append(f"a reply took over {TIMEOUT} s: {e}")
            stop.set()
        except (redis.ResponseError, redis.WatchError):
            stats["err"] += 1
        except (redis.ConnectionError, ConnectionResetError):
            stats["killed"] += 1
            time.sleep(0.01)
        except Exception as e:  # a reply the client cannot parse is a failure too
            fail.append(f"{type(e).__name__}: {e}")
            stop.set()


def chaos(port, rng, stop, stats, fail):
    r = redis.Redis(port=port, socket_timeout=TIMEOUT, retry=NO_RETRY)
    while not stop.is_set():
        time.sleep(rng.uniform(0.2, 1.5))
        what = rng.choice(["kill", "pause", "swapdb", "flushall", "reload"])
        try:
            if what == "kill":
                r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            elif what == "pause":
                r.execute_command("CLIENT", "PAUSE", rng.choice([20, 100]), rng.choice(["WRITE", "ALL"]))
            elif what == "swapdb":
                r.execute_command("SWAPDB", rng.randint(0, 3), rng.randint(0, 3))
            elif what == "flushall":
                r.execute_command("FLUSHALL")
            else:
                r.execute_command("DEBUG", "RELOAD")
            stats["chaos"] += 1
        except redis.TimeoutError as e:
            fail.append(f"chaos {what} took over {TIMEOUT} s: {e}")
            stop.set()
        except redis.ResponseError:
            stats["chaos"] += 1


def watchdog(port, stop, fail):
    r = redis.Redis(port=port, socket_timeout=TIMEOUT, retry=NO_RETRY)
    while not stop.is_set():
        time.sleep(1)
        try:
            r.ping()
        except redis.exceptions.BusyLoadingError:
            pass
        except redis.ResponseError:
            pass
        except redis.TimeoutError:
            fail.append("the watchdog's PING went unanswered")
            stop.set()
        except redis.ConnectionError:
            pass


DIGEST_CMDS = [
    lambda rng: ["SET", rng.choice(KEYS), str(rng.randint(0, 99))],
    lambda rng: ["INCRBY", rng.choice(KEYS), str(rng.randint(-5, 5))],
    lambda rng: ["APPEND", rng.choice(KEYS), "x"],
    lambda rng: ["RPUSH", rng.choice(KEYS), str(rng.randint(0, 9)), "z"],
    lambda rng: ["LPOP", rng.choice(KEYS)],
    lambda rng: ["HSET", rng.choice(KEYS), f"f{rng.randint(0, 4)}", str(rng.randint(0, 9))],
    lambda rng: ["HINCRBY", rng.choice(KEYS), "n", "1"],
    lambda rng: ["SADD", rng.choice(KEYS), str(rng.randint(0, 20))],
    lambda rng: ["SREM", rng.choice(KEYS), str(rng.randint(0, 20))],
    lambda rng: ["ZADD", rng.choice(KEYS), str(rng.randint(0, 9)), f"m{rng.randint(0, 9)}"],
    lambda rng: ["ZINCRBY", rng.choice(KEYS), "1.5", "m1"],
    lambda rng: ["XADD", rng.choice(KEYS), "*" if False else f"{rng.randint(1, 10**6)}-1", "f", "v"],
    lambda rng: ["DEL", rng.choice(KEYS)],
    lambda rng: ["RENAME", rng.choice(KEYS), rng.choice(KEYS)],
    lambda rng: ["SUNIONSTORE", rng.choice(KEYS), rng.choice(KEYS), rng.choice(KEYS)],
    lambda rng: ["LMOVE", rng.choice(KEYS), rng.choice(KEYS), "LEFT", "RIGHT"],
    lambda rng: ["SELECT", str(rng.randint(0, 3))],
    lambda rng: ["SWAPDB", str(rng.randint(0, 3)), str(rng.randint(0, 3))],
    lambda rng: ["MOVE", rng.choice(KEYS), str(rng.randint(0, 3))],
    lambda rng: ["COPY", rng.choice(KEYS), rng.choice(KEYS), "DB", str(rng.randint(0, 3)), "REPLACE"],
    lambda rng: ["EVAL", "redis.pcall('incr', KEYS[1]) return redis.pcall('rpush', KEYS[2], ARGV[1])",
                 "2", rng.choice(KEYS), rng.choice(KEYS), "s"],
]


def digest_run(atoll_port, redis_port, rng, batches):
    conns = [redis.Redis(port=p, socket_timeout=TIMEOUT) for p in (atoll_port, redis_port)]
    for c in conns:
        c.execute_command("FLUSHALL")
    sent = 0
    for b in range(batches):
        seq = []
        for _ in range(200):
            if rng.random() < 0.1:
                block = [rng.choice(DIGEST_CMDS)(rng) for _ in range(rng.randint(1, 5))]
                seq.append(("multi", [c for c in block if c[0] not in ("SELECT", "SWAPDB")]))
            else:
                seq.append(("one", rng.choice(DIGEST_CMDS)(rng)))
        for c in conns:
            for kind, cmd in seq:
                try:
                    if kind == "one":
                        c.execute_command(*cmd)
                    else:
                        p = c.pipeline(transaction=True)
                        for x in cmd:
                            p.execute_command(*x)
                        p.execute(raise_on_error=False)
                except redis.ResponseError:
                    pass
        sent += len(seq)
        digests = [c.execute_command("DEBUG", "DIGEST") for c in conns]
        if digests[0] != digests[1]:
            raise Failure(f"DEBUG DIGEST differs after {sent} commands (batch {b}): {digests}")
    return sent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args()
    oracle = os.environ.get("REDIS_SERVER") or subprocess.run(
        [os.path.join(ROOT, "scripts", "oracle.sh")], capture_output=True, text=True).stdout.strip()
    binary = os.environ.get("ATOLL_BIN") or (
        ATOLL if os.path.exists(ATOLL) else os.path.join(ROOT, "target", "debug", "atoll-server"))
    proc, port, log = start(binary, "--busy-reply-threshold", "100")
    rproc, rport, _ = start(oracle)
    try:
        d = docs(port)
        names = sorted(n for n in d if n not in SKIP)
        table = (names, d)
        rng = random.Random(a.seed)
        print(f"seed {a.seed}, {len(names)} commands, {a.clients} clients, {a.minutes} min", flush=True)
        stop = threading.Event()
        stats = {"ok": 0, "err": 0, "killed": 0, "chaos": 0}
        fail = []
        threads = [threading.Thread(target=client, args=(port, table, random.Random(rng.random()), stop, stats, fail))
                   for _ in range(a.clients)]
        threads.append(threading.Thread(target=chaos, args=(port, random.Random(rng.random()), stop, stats, fail)))
        threads.append(threading.Thread(target=watchdog, args=(port, stop, fail)))
        for t in threads:
            t.start()
        end = time.time() + a.minutes * 60
        digest_cmds = 0
        drng = random.Random(a.seed + 1)
        # The digest part runs on its own pair of servers, so the chaos cannot touch them.
        dproc, dport, _ = start(binary)
        drproc, drport, _ = start(oracle)
        minute = time.time() + 60
        try:
            while time.time() < end and not stop.is_set():
                digest_cmds += digest_run(dport, drport, drng, 5)
                if proc.poll() is not None:
                    fail.append(f"Atoll exited: {proc.returncode}")
                    stop.set()
                if time.time() >= minute:
                    minute += 60
                    print(f"  {stats} digest-checked {digest_cmds}", flush=True)
        except Failure as e:
            fail.append(str(e))
        finally:
            stop.set()
            for t in threads:
                t.join()
            for p in (dproc, drproc):
                p.kill()
        bad = [l for l in open(log, errors="replace") if "BUG:" in l or "BUG REPORT" in l or "crashed by" in l
               or "WATCHDOG" in l]
        if bad:
            fail.append("log: " + "".join(bad[:5]))
        print(f"result: {'FAIL' if fail else 'ok'}: {stats['ok']} rounds answered, {stats['err']} error replies, "
              f"{stats['killed']} reconnects after CLIENT KILL, {stats['chaos']} chaos actions, "
              f"{digest_cmds} commands with equal DEBUG DIGEST beside Redis 7.2.6")
        for f in fail[:10]:
            print("  ", f)
        return 1 if fail else 0
    finally:
        for p in (proc, rproc):
            p.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
