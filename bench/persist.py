#!/usr/bin/env python3
"""Persistence benchmarks, side by side with redis-server in one run (DESIGN §4).

  aof   SET, 50 clients, server CPU µs/op and ops/s: Atoll and Redis without AOF, with
        appendfsync everysec and always (Atoll also with aof-preallocate), over TCP and over a
        unix socket; the load generator's CPU per request too (over TCP it is the limit).
        Server pinned to CPU 0, the load generator to CPU 1, medians of alternating rounds.
        Each table twice: with redis-benchmark, and with bench/loadgen (the same load at
        about half the client CPU per request, so the servers' limits show; --clients).
        Per configuration the rounds' figures too, and Atoll's `always` ÷ Redis's paired by
        round. --aof-configs always,always+pre runs only those settings (both servers).
  save  N keys loaded, then BGSAVE while 50 clients write: the server's peak memory during
        the save (Redis: PSS summed over the server and its forked child, from
        /proc/PID/smaps_rollup; Atoll: its RSS), p99 of the writers during the save vs steady,
        the file's size, and the time each server takes to load that file at start-up.

  rewrite  the same for BGREWRITEAOF (appendonly yes, everysec): Redis forks a child that
        writes the base while the parent buffers the writes; Atoll writes it from a
        point-in-time snapshot while serving (no fork, no pause).
  bigkey  a sorted set of --big members, then BGSAVE while one client keeps writing a small
        key in the same shard ({bz}:small) one command at a time: that client's worst and
        p99 latency during the save (Atoll writes big values a piece per lock; set
        $ATOLL_BASE to an older build to compare with one that wrote the shard whole).

Usage: python3 bench/persist.py [--only aof|save|rewrite|bigkey] [--rounds 3] [--requests 300000] [--keys 1000000] [--big 2000000]
                               [--clients redis-benchmark,loadgen] [--aof-configs always,always+pre]
Needs: redis-server and redis-benchmark (Debian's 7.0.15, as bench.py), taskset, a release build.
"""
import argparse, os, resource, shutil, statistics, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (its server start-up and CPU accounting)


def start_in(kind, d, extra=()):
    return bench.start(kind, extra=["--dir", d, *extra])


def aof_suite(rounds, requests, clients=("redis-benchmark", "loadgen"), only=None):
    configs = [
        ("atoll", "no AOF", ["--appendonly", "no"]),
        ("atoll", "everysec", ["--appendonly", "yes", "--appendfsync", "everysec"]),
        ("atoll", "always", ["--appendonly", "yes", "--appendfsync", "always"]),
        # The incremental file written into padding allocated ahead: an fsync without a
        # metadata write for the new size.
        ("atoll", "always+pre", ["--appendonly", "yes", "--appendfsync", "always", "--aof-preallocate", "yes"]),
        ("redis", "no AOF", ["--appendonly", "no"]),
        ("redis", "everysec", ["--appendonly", "yes", "--appendfsync", "everysec"]),
        ("redis", "always", ["--appendonly", "yes", "--appendfsync", "always"]),
    ]
    if only:
        # `--aof-configs always`: only those settings, on both servers (more rounds in the time).
        configs = [c for c in configs if c[1] in only]
    # Over TCP the load generator's core is the limit (its CPU per request includes the
    # kernel's loopback work for both ends); over a unix socket it costs less, and the
    # servers' own cost — the fsync's included — shows more.
    for client, transport in ((c, t) for c in clients for t in ("tcp", "unix")):
        res = {(k, n): [] for k, n, _ in configs}
        for r in range(rounds):
            order = configs if r % 2 == 0 else list(reversed(configs))
            for kind, name, extra in order:
                d = tempfile.mkdtemp(prefix="atoll-bench-aof-")
                sock = os.path.join(d, "s.sock") if transport == "unix" else None
                p, port = start_in(kind, d, extra + (["--unixsocket", sock] if sock else []))
                try:
                    (u0, s0) = bench.proc_user_sys_ticks(p.pid)
                    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    if client == "loadgen":
                        ops, p99 = bench.run_loadgen(port, "set", requests, sock=sock)
                    else:
                        ops, lat = bench.run_bench(port, "set", requests, 1, sock=sock)
                        p99 = lat[4] if len(lat) >= 5 else float("nan")
                    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    (u1, s1) = bench.proc_user_sys_ticks(p.pid)
                    us = (u1 - u0 + s1 - s0) / bench.HZ * 1e6 / requests
                    cus = (c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime) * 1e6 / requests
                    res[(kind, name)].append((ops, us, cus, p99))
                finally:
                    p.kill()
                    p.wait()
                    shutil.rmtree(d, ignore_errors=True)
        print(f"\nSET, 50 clients, {client}, {transport} | ops/s | server CPU µs/op | client CPU µs/op | p99 ms")
        med = {}
        for (kind, name), v in res.items():
            m = [statistics.median(x[i] for x in v) for i in range(4)]
            med[(kind, name)] = m
            print(f"{kind:5} {name:10} | {m[0]:9.0f} | {m[1]:6.2f} | {m[2]:6.2f} | {m[3]:6.2f}"
                  f"   rounds: {' '.join(f'{x[0]:.0f}' for x in v)}")
        # The disk's fsync time drifts over minutes, and both servers with it: each round's
        # Atoll ÷ Redis (runs seconds apart), then their median, is steadier than a ratio of
        # medians.
        for name in ("always", "always+pre"):
            a, r = res.get(("atoll", name)), res.get(("redis", "always"))
            if a and r:
                pr = sorted(x[0] / y[0] for x, y in zip(a, r))
                print(f"Atoll {name} ÷ Redis always, paired by round: median {statistics.median(pr):.2f}× "
                      f"(rounds: {' '.join(f'{x:.2f}' for x in pr)})")
        if only:
            continue
        a0, ae, aa, ap = (med[("atoll", n)] for n in ("no AOF", "everysec", "always", "always+pre"))
        r0, re_, ra = (med[("redis", n)] for n in ("no AOF", "everysec", "always"))
        print(f"Atoll everysec ÷ Atoll without AOF: ops {ae[0] / a0[0]:.2f}×, CPU/op {ae[1] / a0[1]:.2f}×")
        print(f"Atoll ÷ Redis, everysec: ops {ae[0] / re_[0]:.2f}×, CPU/op {ae[1] / re_[1]:.2f}×")
        print(f"Atoll ÷ Redis, always: ops {aa[0] / ra[0]:.2f}× (with aof-preallocate {ap[0] / ra[0]:.2f}×), "
              f"CPU/op {aa[1] / ra[1]:.2f}× ({ap[1] / ra[1]:.2f}×)")
        print(f"always ÷ no AOF, each server: Atoll {aa[0] / a0[0]:.2f}× (with aof-preallocate {ap[0] / a0[0]:.2f}×), "
              f"Redis {ra[0] / r0[0]:.2f}×; Atoll without AOF ÷ Redis always: {a0[0] / ra[0]:.2f}×")


def tree_memory(pid):
    """PSS of the process and its children (a forked child shares pages until written)."""
    total = 0
    pids = [pid]
    try:
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        pids += [int(k) for k in kids]
    except Exception:
        pass
    for q in pids:
        try:
            with open(f"/proc/{q}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def info(port, field, section="persistence"):
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", section], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def save_one(kind, keys, rewrite=False):
    d = tempfile.mkdtemp(prefix="atoll-bench-save-")
    aof = ["--appendonly", "yes", "--appendfsync", "everysec", "--auto-aof-rewrite-percentage", "0"] if rewrite else []
    p, port = start_in(kind, d, ["--save", "", *aof])
    try:
        # Random keys from a range of `keys` (about 86 % of them end up set), 100-byte values.
        subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-t", "set", "-r", str(keys),
                        "-n", str(keys * 2), "-P", "64", "-d", "100", "-q"], capture_output=True, check=True)
        base = tree_memory(p.pid)
        # Steady p99 of 50 writers, then the same load during BGSAVE.
        _, steady = bench.run_bench(port, "set", 200000, 1)
        peak = [base]
        lat = {}

        def load():
            lat["v"] = bench.run_bench(port, "set", 2000000, 1)[1]
        t = threading.Thread(target=load)
        t.start()
        time.sleep(0.5)
        t0 = time.time()
        subprocess.run(["redis-cli", "-p", str(port), "BGREWRITEAOF" if rewrite else "BGSAVE"], capture_output=True,
                       check=True)
        time.sleep(0.05)
        flag = "aof_rewrite_in_progress" if rewrite else "rdb_bgsave_in_progress"
        while info(port, flag) == "1":
            peak.append(tree_memory(p.pid))
            time.sleep(0.05)
        save_s = time.time() - t0
        # The server's stall to start its child: Redis's fork; Atoll's posix_spawn (0: a build
        # without a child).
        fork_us = info(port, "latest_fork_usec", "stats")
        t.join()
        if rewrite:
            ad = os.path.join(d, "appendonlydir")
            size = sum(os.path.getsize(os.path.join(ad, f)) for f in os.listdir(ad) if ".base." in f)
        else:
            size = os.path.getsize(os.path.join(d, "dump.rdb"))
    finally:
        p.kill()
        p.wait()
    if rewrite:
        shutil.rmtree(d, ignore_errors=True)
        return dict(base=base, peak=max(peak), save_s=save_s, size=size, load_s=float("nan"),
                    p99_steady=steady[4], p99_save=lat["v"][4], fork_us=fork_us)
    # Load time: start-up until PING answers (not -LOADING); Atoll also on both cores (it
    # decodes on one thread per core; Redis loads on one whatever it is given).
    loads = []
    for cpu in ("0", "0,1") if kind == "atoll" else ("0",):
        t0 = time.time()
        p2, port2 = bench.start(kind, cpu, ["--dir", d, "--save", ""])
        loads.append(time.time() - t0)
        p2.kill()
        p2.wait()
    shutil.rmtree(d, ignore_errors=True)
    return dict(base=base, peak=max(peak), save_s=save_s, size=size, load_s=loads[0], load2_s=loads[-1],
                p99_steady=steady[4], p99_save=lat["v"][4], fork_us=fork_us)


def kinds():
    """Redis and Atoll, and with $ATOLL_BASE an older Atoll build beside them."""
    return ("redis", "atoll", "base") if os.environ.get("ATOLL_BASE") else ("redis", "atoll")


def save_suite(keys):
    rows = {k: save_one(k, keys) for k in kinds()}
    print(f"BGSAVE of {keys} keys (100-byte values) under 50 writers")
    print("server | memory before MB | peak during save MB | peak ÷ before | save s | p99 steady ms | p99 during save ms | RDB MB | load s | latest_fork_usec")
    for k, r in rows.items():
        print(f"{k:6} | {r['base'] / 1e6:8.1f} | {r['peak'] / 1e6:8.1f} | {r['peak'] / r['base']:.2f} | {r['save_s']:.2f} | "
              f"{r['p99_steady']:.2f} | {r['p99_save']:.2f} | {r['size'] / 1e6:.1f} | {r['load_s']:.2f} | {r['fork_us']}")
    a, r = rows["atoll"], rows["redis"]
    print(f"Atoll ÷ Redis: RDB size {a['size'] / r['size']:.3f}×, load time {a['load_s'] / r['load_s']:.2f}× "
          f"(Atoll on two cores: {a['load2_s']:.2f} s, {a['load2_s'] / r['load_s']:.2f}×)")


def rewrite_suite(keys):
    rows = {k: save_one(k, keys, rewrite=True) for k in kinds()}
    print(f"BGREWRITEAOF of {keys} keys (100-byte values) under 50 writers, appendfsync everysec")
    print("server | memory before MB | peak during rewrite MB | peak ÷ before | rewrite s | p99 steady ms | p99 during rewrite ms | base MB | latest_fork_usec")
    for k, r in rows.items():
        print(f"{k:6} | {r['base'] / 1e6:8.1f} | {r['peak'] / 1e6:8.1f} | {r['peak'] / r['base']:.2f} | {r['save_s']:.2f} | "
              f"{r['p99_steady']:.2f} | {r['p99_save']:.2f} | {r['size'] / 1e6:.1f} | {r['fork_us']}")


def bigkey_one(kind, big, cpu="0"):
    d = tempfile.mkdtemp(prefix="atoll-bench-big-")
    p, port = bench.start(kind, cpu, ["--dir", d, "--save", ""])
    try:
        import socket
        s = socket.create_connection(("127.0.0.1", port))
        f = s.makefile("rb")

        def cmd(*args):
            s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]))
            return f.readline()
        batch = 1000
        for i in range(0, big, batch):
            args = [b"ZADD", b"bz"]
            for j in range(i, min(big, i + batch)):
                args += [str(j % 100003).encode(), b"member:%d" % j]
            cmd(*args)
        cmd(b"SET", b"{bz}:small", b"0")
        lat = []
        t0 = time.time()
        cmd(b"BGSAVE")
        n = 0
        while True:
            a = time.perf_counter()
            cmd(b"SET", b"{bz}:small", str(n).encode())
            lat.append(time.perf_counter() - a)
            n += 1
            if n % 50 == 0 and info(port, "rdb_bgsave_in_progress") == "0":
                break
        save_s = time.time() - t0
        s.close()
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)
    lat.sort()
    return dict(save_s=save_s, n=len(lat), p99=lat[int(len(lat) * 0.99)] * 1e3, worst=lat[-1] * 1e3)


def bigkey_suite(big):
    kinds = ["redis", "atoll"] + (["base"] if os.environ.get("ATOLL_BASE") else [])
    print(f"BGSAVE with a {big}-member sorted set; one client writes a small key of its shard meanwhile")
    print("server, its CPUs | save s | writes | p99 ms | worst ms")
    for cpu in ("0", "0,1"):
        for k in kinds:
            r = bigkey_one(k, big, cpu)
            print(f"{k:6} cpu {cpu:3} | {r['save_s']:.2f} | {r['n']} | {r['p99']:.3f} | {r['worst']:.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["aof", "save", "rewrite", "bigkey"])
    ap.add_argument("--big", type=int, default=2000000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300000)
    ap.add_argument("--keys", type=int, default=1000000)
    ap.add_argument("--clients", default="redis-benchmark,loadgen")
    ap.add_argument("--aof-configs", default="", help="only these AOF settings, e.g. always,always+pre")
    a = ap.parse_args()
    if a.only in (None, "aof"):
        aof_suite(a.rounds, a.requests, a.clients.split(","), [c for c in a.aof_configs.split(",") if c])
    if a.only in (None, "save"):
        save_suite(a.keys)
    if a.only in (None, "rewrite"):
        rewrite_suite(a.keys)
    if a.only in (None, "bigkey"):
        bigkey_suite(a.big)


if __name__ == "__main__":
    main()
