#!/usr/bin/env python3
"""Hash-field expiry beside Valkey 9.1.2 (issue 39), one run, same machine, same pinning as
bench.py: the server on CPU 0 (Atoll with one worker), redis-benchmark on CPU 1.

1. Server CPU per operation for HGET and HSET on hashes without field deadlines and on hashes
   half of whose fields have one (far away): the cost of the feature on the hot path.
2. Active expiry of one hash of N fields (default 1,000,000) whose deadlines all pass at once:
   how long until the key is gone, the server's CPU for it, and the latency of GETs from
   another client meanwhile (p50, p99, max over one GET per millisecond).
3. Memory per field deadline: used_memory of N fields in 1,000-field hashes, without and then
   with a deadline on every field.

Usage: python3 bench/hash_ttl.py [--requests 400000] [--fields 1000000] [--rounds 3]
Needs: scripts/valkey.sh (Valkey 9.1.2), redis-benchmark, taskset, a release build.
"""
import argparse, os, socket, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402

ROOT = B.ROOT
VALKEY = os.environ.get("VALKEY_SERVER") or subprocess.check_output([os.path.join(ROOT, "scripts", "valkey.sh")]).decode().strip()


def start(kind):
    port = B.free_port()
    if kind == "atoll":
        cmd = [B.ATOLL, "--threads", "1"]
    else:
        cmd = [VALKEY, "--appendonly", "no"]
    cmd += ["--port", str(port), "--save", "", "--loglevel", "warning", "--enable-debug-command", "yes"]
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    B.wait_ready(port, p)
    return p, port


def resp(*args):
    return B.resp(*[a if isinstance(a, bytes) else str(a).encode() for a in args])


def call(port, *args):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp(*args))
        buf = b""
        while not buf.endswith(b"\r\n"):
            buf += s.recv(1 << 16)
        return buf


def pipelined(port, commands):
    """Sends (request, reply lines) pairs in batches and waits for every reply's lines."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        for i in range(0, len(commands), 200):
            batch = commands[i:i + 200]
            s.sendall(b"".join(c for c, _ in batch))
            need, buf = sum(n for _, n in batch), b""
            while buf.count(b"\r\n") < need:
                buf += s.recv(1 << 20)


def fill_hashes(port, hashes, fields, ttl_every=0, prefix="h"):
    """`hashes` hashes of `fields` fields; with ttl_every=k, every k-th field gets a far
    deadline."""
    far = str(int(time.time() * 1000) + 10 * 24 * 3600 * 1000)
    cmds = []
    for i in range(hashes):
        key = f"{prefix}:{i}"
        args = ["HSET", key]
        for f in range(fields):
            args += [f"f{f}", "v" * 8]
        cmds.append((resp(*args), 1))
        if ttl_every:
            tf = [f"f{f}" for f in range(0, fields, ttl_every)]
            cmds.append((resp("HPEXPIREAT", key, far, "FIELDS", str(len(tf)), *tf), len(tf) + 1))
        if len(cmds) >= 2000:
            pipelined(port, cmds)
            cmds = []
    if cmds:
        pipelined(port, cmds)


def cpu_per_op(kind, volatile, cmd, requests):
    p, port = start(kind)
    try:
        fill_hashes(port, 100000, 10, ttl_every=2 if volatile else 0)
        before = sum(B.proc_user_sys_ticks(p.pid))
        t0 = time.time()
        subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-n", str(requests), "-c", "50",
                        "-r", "100000", "-q"] + cmd, stdout=subprocess.DEVNULL, check=True)
        secs = time.time() - t0
        ticks = sum(B.proc_user_sys_ticks(p.pid)) - before
        return ticks / B.HZ * 1e6 / requests, requests / secs
    finally:
        p.kill()
        p.wait()


def active_expiry(kind, fields):
    p, port = start(kind)
    try:
        call(port, "SET", "k", "v")
        batch = 10000
        loads, deadlines = [], []
        placeholder = b"9999999999999"
        for start_f in range(0, fields, batch):
            names = [f"f{f}" for f in range(start_f, min(fields, start_f + batch))]
            args = ["HSET", "big"]
            for n in names:
                args += [n, "v"]
            loads.append((resp(*args), 1))
            deadlines.append((resp("HPEXPIREAT", "big", placeholder, "FIELDS", str(len(names)), *names), len(names) + 1))
        pipelined(port, loads)
        # The deadline is chosen once everything is built and loaded, so it is still ahead.
        at = int(time.time() * 1000) + 3000
        pipelined(port, [(c.replace(placeholder, str(at).encode(), 1), n) for c, n in deadlines])
        assert time.time() * 1000 < at - 500, "setting the deadlines took longer than the margin"
        while time.time() * 1000 < at - 200:
            time.sleep(0.05)
        lat = []
        before = sum(B.proc_user_sys_ticks(p.pid))
        t_dead = at / 1000
        gone = None
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            probe = resp("GET", "k")
            n = 0
            while True:
                t = time.perf_counter()
                s.sendall(probe)
                buf = b""
                while not buf.endswith(b"v\r\n"):
                    buf += s.recv(64)
                lat.append((time.perf_counter() - t) * 1000)
                n += 1
                if n % 50 == 0 and gone is None:
                    # DBSIZE counts keys without looking one up (a lookup would reclaim it).
                    s.sendall(resp("DBSIZE"))
                    r = b""
                    while not r.endswith(b"\r\n"):
                        r += s.recv(64)
                    if r == b":1\r\n":
                        gone = time.time() - t_dead
                        break
                if time.time() - t_dead > 120:
                    break
                time.sleep(0.001)
        ticks = sum(B.proc_user_sys_ticks(p.pid)) - before
        lat.sort()
        q = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))]
        return gone, ticks / B.HZ, q(0.5), q(0.99), lat[-1]
    finally:
        p.kill()
        p.wait()


def memory(kind, fields):
    p, port = start(kind)
    try:
        hashes = fields // 1000
        fill_hashes(port, hashes, 1000, prefix="m")
        call(port, "DEBUG", "SLEEP", "0")
        base = B.info_field(port, "used_memory")
        far = str(int(time.time() * 1000) + 10 * 24 * 3600 * 1000)
        cmds = []
        for i in range(hashes):
            names = [f"f{f}" for f in range(1000)]
            cmds.append((resp("HPEXPIREAT", f"m:{i}", far, "FIELDS", "1000", *names), 1001))
            if len(cmds) >= 50:
                pipelined(port, cmds)
                cmds = []
        if cmds:
            pipelined(port, cmds)
        with_ttl = B.info_field(port, "used_memory")
        return base / fields, (with_ttl - base) / fields
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--fields", type=int, default=1000000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["cpu", "expiry", "memory"])
    a = ap.parse_args()
    print(f"# Valkey: {VALKEY}")
    if a.only in (None, "cpu"):
        cpu_table(a)
    if a.only in (None, "expiry"):
        expiry_table(a)
    if a.only in (None, "memory"):
        memory_table(a)


def cpu_table(a):
    print("## CPU per operation (µs, server), medians of", a.rounds, "rounds; ops/s in brackets")
    work = {
        "HGET plain": (False, ["HGET", "h:__rand_int__", "f1"]),
        "HGET volatile field": (True, ["HGET", "h:__rand_int__", "f2"]),
        "HSET plain": (False, ["HSET", "h:__rand_int__", "f1", "x"]),
        "HSET in a hash with deadlines": (True, ["HSET", "h:__rand_int__", "f1", "x"]),
    }
    for name, (vol, cmd) in work.items():
        row = []
        for kind in ("valkey", "atoll"):
            runs = [cpu_per_op(kind, vol, cmd, a.requests) for _ in range(a.rounds)]
            row.append((statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)))
        (vc, vo), (ac, ao) = row
        print(f"{name:32} valkey {vc:6.2f} [{vo:8.0f}]  atoll {ac:6.2f} [{ao:8.0f}]  ratio {ac / vc:.2f}")


def expiry_table(a):
    print(f"## Active expiry of {a.fields} fields of one hash, all due at once")
    for kind in ("valkey", "atoll"):
        gone, cpu, p50, p99, mx = active_expiry(kind, a.fields)
        print(f"{kind:7} key gone after {gone if gone is None else round(gone, 2)} s, server CPU {cpu:.2f} s; "
              f"GET latency meanwhile p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {mx:.2f} ms")


def memory_table(a):
    print(f"## Memory, {a.fields} fields in hashes of 1000 (used_memory)")
    for kind in ("valkey", "atoll"):
        per, extra = memory(kind, a.fields)
        print(f"{kind:7} {per:6.1f} bytes per field without deadlines, +{extra:5.1f} bytes per field with one")


if __name__ == "__main__":
    main()
