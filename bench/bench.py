#!/usr/bin/env python3
"""Side-by-side benchmark of atoll-server and redis-server (DESIGN §4).

Per-core efficiency: each server pinned to CPU 0 (Atoll with one worker thread), the load
generator (redis-benchmark) pinned to CPU 1. For each workload the two servers alternate for
several rounds, a fresh server per workload, keyspace preloaded. Reported per workload:
ops/s, server CPU µs per op (utime+stime of the server from /proc/PID/stat over the run, divided
by the operations), whole-machine CPU µs per op (from /proc/stat: loopback networking is billed
to whoever runs it), medians over rounds, and the Atoll/Redis ratios.

Memory: RSS growth per key after loading 1M string keys (16-byte keys, 32-byte values), and RSS
per idle connection with 10,000 connections open.

Usage: python3 bench/bench.py [--rounds 3] [--requests 1000000] [--only cpu|unix|mem|types|elements]
                              [--backends io_uring,epoll,base] [--pipelines 1,16]
Atoll runs as "atoll-io_uring" (the default backend) and/or "atoll-epoll"; "evict" (and
"redis-evict") run with maxmemory 32mb allkeys-lru, filled to the limit first, the load SETs of
new keys from a 10M keyspace (every write evicts); "acl" (and
"redis-acl" for Redis) is the default backend with the load run as a restricted ACL user (keys
~key:*, commands +@all -@dangerous) instead of the default user; "tls" (and "redis-tls") serve the
load over TLS (TLSv1.3, a P-256 certificate, client certificates required; redis-benchmark
--tls), certificates made once with the openssl tool; "cluster" (and "redis-cluster") run in
cluster mode as one node serving all 16384 slots (what routing costs); "untracked" is the
default backend with latency tracking and hot-key sampling off (their cost); "base" is an older
build given by $ATOLL_BASE, for before/after comparisons in one run. Server CPU is also split
into user space and kernel ("user" column): loopback TCP costs both servers the same kernel work.
Needs: redis-server, redis-benchmark (apt-get install redis-server redis-tools), taskset, and
a release build (cargo build --release).
"""
import argparse, os, socket, statistics, subprocess, sys, time, resource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATOLL = os.path.join(ROOT, "target", "release", "atoll-server")
# The Redis beside Atoll: $REDIS_SERVER (e.g. the 7.2.6 that scripts/oracle.sh builds), else
# the redis-server on the PATH. Its version is printed with the results.
REDIS = os.environ.get("REDIS_SERVER", "redis-server")

# bench/loadgen: the same unpipelined load as redis-benchmark at about half its CPU per request,
# for runs where redis-benchmark's one core is the limit (built with the workspace).
LOADGEN = os.path.join(ROOT, "target", "release", "atoll-loadgen")
HZ = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_ready(port, proc):
    for _ in range(500):
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.returncode}: {' '.join(map(str, proc.args))}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.02)
    raise SystemExit("server did not start")


# The restricted user of the "acl" kinds: every key the load uses, not the rest.
ACL_USER = [b"ACL", b"SETUSER", b"bench", b"on", b">benchpw", b"~key:*", b"~counter:*", b"~mylist",
            b"~myset", b"~myhash", b"~myzset", b"~zbench", b"~xbench", b"~k:*", b"+@all", b"-@dangerous"]


# The "evict" kinds: a memory limit every SET of a new key must evict to stay under.
EVICT_ARGS = ["--maxmemory", "32mb", "--maxmemory-policy", "allkeys-lru"]


# The "tls" kinds: a CA, a server and a client certificate (EC P-256, as rcgen and most
# deployments make them), made once; the load connects to the TLS port.
TLS_DIR = "/tmp/atoll-bench-tls"
TLS_PORT = {}


def tls_files():
    f = lambda n: os.path.join(TLS_DIR, n)  # noqa: E731
    if not os.path.exists(f("client.crt")):
        os.makedirs(TLS_DIR, exist_ok=True)
        run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-sha256"]
        run("req", "-x509", *ec, "-days", "30", "-subj", "/CN=bench CA", "-keyout", f("ca.key"), "-out", f("ca.crt"))
        with open(f("ext.cnf"), "w") as e:
            e.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        for who in ("server", "client"):
            run("req", *ec, "-subj", f"/CN={who}", "-keyout", f(f"{who}.key"), "-out", f(f"{who}.csr"))
            run("x509", "-req", "-in", f(f"{who}.csr"), "-CA", f("ca.crt"), "-CAkey", f("ca.key"),
                "-CAcreateserial", "-days", "30", "-extfile", f("ext.cnf"), "-out", f(f"{who}.crt"))
    return f


def start(kind, cpu="0", extra=()):
    if kind in ("evict", "redis-evict"):
        extra = list(extra) + EVICT_ARGS
    tls_port = None
    if kind in ("tls", "redis-tls"):
        f, tls_port = tls_files(), free_port()
        extra = list(extra) + ["--tls-port", str(tls_port), "--tls-cert-file", f("server.crt"),
                               "--tls-key-file", f("server.key"), "--tls-ca-cert-file", f("ca.crt")]
    if kind in ("cluster", "redis-cluster"):
        # A one-node cluster serving every slot: what cluster mode costs a command.
        import tempfile
        extra = list(extra) + ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                               "--dir", tempfile.mkdtemp(prefix="bench-cluster-")]
    base = {"redis-acl": "redis", "redis-evict": "redis", "redis-tls": "redis", "redis-cluster": "redis",
            "acl": "atoll", "evict": "atoll", "tls": "atoll", "cluster": "atoll"}.get(kind, kind)
    p, port = start_server(base, cpu, extra)
    if kind in ("cluster", "redis-cluster"):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(resp(b"CLUSTER", b"ADDSLOTSRANGE", b"0", b"16383"))
            assert s.recv(16).startswith(b"+OK")
        for _ in range(100):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(resp(b"CLUSTER", b"INFO"))
                if b"cluster_state:ok" in s.recv(4096):
                    break
            time.sleep(0.1)
        else:
            raise SystemExit(f"{kind}: the one-node cluster never came up")
    if tls_port:
        TLS_PORT[port] = tls_port
    if kind in ("acl", "redis-acl"):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(resp(*ACL_USER))
            assert s.recv(16).startswith(b"+OK")
    return p, port


def start_server(kind, cpu="0", extra=()):
    port = free_port()
    if kind.startswith("atoll") or kind == "base":
        # "atoll-epoll" / "atoll-io_uring": this build on that backend ("atoll": the default,
        # io_uring); "base": an older build named by $ATOLL_BASE, for before/after comparisons.
        backend = kind.split("-", 1)[1] if "-" in kind else "io_uring"
        # "atoll-untracked": the default backend with latency tracking and hot-key sampling
        # off, to measure what they cost.
        untracked = backend == "untracked"
        if untracked:
            backend = "io_uring"
        binary = os.environ["ATOLL_BASE"] if kind == "base" else ATOLL
        cmd = [binary, "--port", str(port), "--threads", "1", "--save", "", "--loglevel", "warning"]
        if kind != "base":
            cmd += ["--io-backend", backend]
        if untracked:
            cmd += ["--latency-tracking", "no", "--hotkeys", "no"]
    else:
        cmd = [REDIS, "--port", str(port), "--save", "", "--appendonly", "no", "--loglevel", "warning"]
    cmd += list(extra)
    if cpu is not None:
        cmd = ["taskset", "-c", cpu] + cmd
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, p)
    return p, port


def info_field(port, field):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"INFO\r\n")
        buf = b""
        while b"# Keyspace" not in buf:
            buf += s.recv(1 << 16)
    for line in buf.decode().split("\r\n"):
        if line.startswith(field + ":"):
            return int(line.split(":")[1])
    return None


def proc_user_sys_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]), int(parts[12])  # utime, stime


def proc_cpu_ticks(pid):
    return sum(proc_user_sys_ticks(pid))


def machine_busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle


def rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# Data-type workloads (issue 3): redis-benchmark's own tests where it has them, otherwise a
# custom command line with __rand_int__ placeholders.
TYPE_WORKLOADS = {
    "lpush": ["-t", "lpush"],
    "lpop": ["-t", "lpop"],
    "sadd": ["-t", "sadd"],
    "hset": ["-t", "hset"],
    "zadd": ["-t", "zadd"],
    "zrange": ["ZRANGE", "zbench", "0", "9", "WITHSCORES"],
    "xadd": ["XADD", "xbench", "*", "field", "__rand_int__"],
    # A script per request (scripting, issue 18): EVALSHA of a one-call script, loaded first.
    "evalsha": ["EVALSHA", None, "1", "k:__rand_int__"],
}
EVAL_SCRIPT = b"return redis.call('INCR', KEYS[1])"
EVAL_SHA = __import__("hashlib").sha1(EVAL_SCRIPT).hexdigest()
TYPE_WORKLOADS["evalsha"][1] = EVAL_SHA


def script_load(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n" % (len(EVAL_SCRIPT), EVAL_SCRIPT))
        assert EVAL_SHA.encode() in s.recv(128)


def run_bench(port, test, requests, pipeline, clients=50, sock=None, user=None, keyspace="100000"):
    spec = TYPE_WORKLOADS.get(test, ["-t", test])
    target = ["-s", sock] if sock else ["-p", str(port)]
    if port in TLS_PORT:
        f = tls_files()
        target = ["-p", str(TLS_PORT[port]), "--tls", "--cacert", f("ca.crt"), "--cert", f("client.crt"),
                  "--key", f("client.key")]
    if user:
        target += ["--user", user, "-a", "benchpw"]
    cmd = ["taskset", "-c", "1", "redis-benchmark"] + target + ["-c", str(clients),
           "-n", str(requests), "-r", keyspace, "-d", "32", "-P", str(pipeline), "-q", "--csv"]
    cmd += spec if spec[0] == "-t" else spec
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [[x.strip('"') for x in line.split(",")] for line in out.splitlines() if line.strip()]
    rows = [r for r in rows if len(r) > 1 and r[0] != "test"]
    for f in rows:
        if spec[0] != "-t" or f[0].upper().startswith(test.upper()):
            return float(f[1]), [float(x) for x in f[2:8]] if len(f) >= 8 else []
    raise SystemExit(f"unexpected redis-benchmark output: {out}")


def run_loadgen(port, test, requests, clients=50, sock=None, keyspace="100000"):
    """The load `run_bench` puts (random keys, 32-byte values) from bench/loadgen instead of
    redis-benchmark: (ops/s, p99 ms). It exits non-zero on any error reply."""
    if not os.path.exists(LOADGEN):
        raise SystemExit(f"{LOADGEN} is missing: cargo build --release")
    target = ["-s", sock] if sock else ["-p", str(port)]
    cmd = ["taskset", "-c", "1", LOADGEN] + target + ["-t", test, "-c", str(clients), "-n", str(requests),
                                                      "-r", keyspace, "-d", "32"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    kv = dict(x.split("=", 1) for x in out.split())
    return float(kv["ops_per_sec"]), float(kv["p99_ms"])


def measure(kind, test, requests, pipeline, unix=False, clients=50):
    sock = f"/tmp/atoll-bench-{kind}.sock" if unix else None
    p, port = start(kind, extra=["--unixsocket", sock] if unix else ())
    try:
        # Preload the keyspace so GETs hit (and the sorted set ZRANGE reads); under a memory
        # limit, fill it to the limit from a keyspace far larger than it holds.
        keyspace = "10000000" if kind.endswith("evict") else "100000"
        n = "1500000" if kind.endswith("evict") else "200000"
        subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-t", "set", "-r", keyspace,
                        "-n", n, "-P", "64", "-d", "32", "-q"], capture_output=True, check=True)
        if test == "zrange":
            subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-r", "100000", "-n", "1000",
                            "-P", "64", "-q", "ZADD", "zbench", "__rand_int__", "m__rand_int__"],
                           capture_output=True, check=True)
        if test == "evalsha":
            script_load(port)
        (u0, s0), m0 = proc_user_sys_ticks(p.pid), machine_busy_ticks()
        user = "bench" if kind in ("acl", "redis-acl") else None
        keyspace = "10000000" if kind.endswith("evict") else "100000"
        ops, lat = run_bench(port, test, requests, pipeline, clients=clients, sock=sock, user=user,
                             keyspace=keyspace)
        evicted = info_field(port, "evicted_keys") if kind.endswith("evict") else None
        if evicted is not None and evicted == 0:
            raise SystemExit(f"{kind}: nothing was evicted, the limit was never reached")
        (u1, s1), m1 = proc_user_sys_ticks(p.pid), machine_busy_ticks()
        per_op = lambda ticks: ticks / HZ * 1e6 / requests
        p99 = lat[4] if len(lat) >= 5 else float("nan")  # avg,min,p50,p95,p99,max (ms)
        avg = lat[0] if lat else float("nan")
        # server CPU µs/op, whole-machine µs/op, p99 ms, the server's user-space share, mean latency ms
        return ops, per_op(u1 - u0 + s1 - s0), per_op(m1 - m0), p99, per_op(u1 - u0), avg
    finally:
        p.kill()
        p.wait()


def cpu_suite(rounds, requests, tests=("get", "set"), pipelines=(1, 16), unix=False, kinds=("redis", "atoll"),
              clients=(50,)):
    rows = []
    for test, pipeline, nclients in ((t, p, c) for t in tests for p in pipelines for c in clients):
        res = {k: [] for k in kinds}
        for r in range(rounds):
            # Alternate the order so drift on the machine does not favour one server.
            order = kinds if r % 2 == 0 else tuple(reversed(kinds))
            for kind in order:
                n = requests if pipeline == 1 else requests * 4
                res[kind].append(measure(kind, test, n, pipeline, unix=unix, clients=nclients))
        med = {k: [statistics.median(x[i] for x in v) for i in range(6)] for k, v in res.items()}
        rows.append((test.upper(), pipeline, med))
        r = med["redis"]
        via = "unix " if unix else ""
        via += "" if clients == (50,) else f"-c {nclients:<3} "
        line = (f"{via}{test.upper():4} -P {pipeline:<2} | redis {r[0]:>10.0f} ops/s {r[1]:6.2f} us/op srv "
                f"(user {r[4]:.2f}) {r[2]:6.2f} us/op mach p99 {r[3]:.3f}ms")
        if clients != (50,):
            line += f" avg {r[5]:.3f}ms"
        for k in kinds[1:]:
            a = med[k]
            line += (f" | {k} {a[0]:>10.0f} ops/s {a[1]:6.2f} us/op srv (user {a[4]:.2f}) {a[2]:6.2f} us/op mach "
                     f"p99 {a[3]:.3f}ms" + (f" avg {a[5]:.3f}ms" if clients != (50,) else "") +
                     f" | ratio ops {a[0]/r[0]:.2f}x srv-cpu {a[1]/r[1]:.2f}x mach-cpu {a[2]/r[2]:.2f}x")
            # The same ratio round by round (each Atoll round beside the Redis round next to
            # it in time), so drift of the host during the run shows as a spread, not a bias.
            paired = sorted(x[1] / y[1] for x, y in zip(res[k], res["redis"]))
            line += f" (paired srv-cpu {statistics.median(paired):.2f}x, {paired[0]:.2f}-{paired[-1]:.2f})"
        print(line, flush=True)
    return rows


def send_pipelined(port, commands):
    """Sends RESP commands in batches of 1000 and waits for every reply."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        for start_i in range(0, len(commands), 1000):
            batch = commands[start_i:start_i + 1000]
            s.sendall(b"".join(batch))
            # Every reply here is one line (+OK or :n).
            need, buf = len(batch), b""
            while buf.count(b"\r\n") < need:
                buf += s.recv(1 << 20)


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def element_suite(n):
    """RSS per element of one big hash, set and sorted set (16-byte members, 32-byte values)."""
    res = {}
    for kind in ("redis", "atoll"):
        for typ in ("hash", "set", "zset"):
            p, port = start(kind, cpu=None)
            try:
                time.sleep(0.3)
                r0 = rss(p.pid)
                cmds = []
                for i in range(n):
                    m = b"member:%09d" % i
                    if typ == "hash":
                        cmds.append(resp(b"HSET", b"big", m, b"v" * 32))
                    elif typ == "set":
                        cmds.append(resp(b"SADD", b"big", m))
                    else:
                        cmds.append(resp(b"ZADD", b"big", b"%d" % i, m))
                send_pipelined(port, cmds)
                time.sleep(0.5)
                res[(kind, typ)] = (rss(p.pid) - r0) / n
            finally:
                p.kill()
                p.wait()
    for typ in ("hash", "set", "zset"):
        r, a = res[("redis", typ)], res[("atoll", typ)]
        print(f"{typ:5} 1M members: redis {r:6.1f} B/elem  atoll {a:6.1f} B/elem  ratio {a/r:.2f}x", flush=True)
    return res


# What each key holds in the memory suite: a 32-byte string, or a small aggregate of 5
# elements (Redis keeps those in one listpack/intset): the request for key k, and its reply.
SMALL = {
    "string": (lambda k: [b"SET", k, b"v" * 32], b"+OK\r\n"),
    "hash": (lambda k: [b"HSET", k] + [x for j in range(1, 6) for x in (b"f%d" % j, b"value-%02d" % j)], b":5\r\n"),
    "set": (lambda k: [b"SADD", k] + [b"member-%02d" % j for j in range(1, 6)], b":5\r\n"),
    "zset": (lambda k: [b"ZADD", k] + [x for j in range(1, 6) for x in (b"%d" % j, b"member-%02d" % j)], b":5\r\n"),
}


def load_keys(port, n, what="string"):
    """Creates key:%012d (16 bytes) for i < n holding `what` (see SMALL), pipelined."""
    make, reply = SMALL[what]
    with socket.create_connection(("127.0.0.1", port)) as s:
        batch = 1000
        for start_i in range(0, n, batch):
            buf = bytearray()
            for i in range(start_i, min(n, start_i + batch)):
                args = make(b"key:%012d" % i)
                buf += b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
            s.sendall(buf)
            need = len(reply) * (min(n, start_i + batch) - start_i)
            got = 0
            while got < need:
                got += len(s.recv(1 << 20))


def mem_suite(keys, conns, kinds=("redis", "atoll")):
    out = {}
    for kind in kinds:
        per = {}
        for what in SMALL:
            p, port = start(kind, cpu=None)
            try:
                time.sleep(0.3)
                r0 = rss(p.pid)
                load_keys(port, keys, what)
                time.sleep(0.5)
                per[what] = (rss(p.pid) - r0) / keys
            finally:
                p.kill()
                p.wait()
        extra = ["--maxclients", str(conns + 100)]
        p, port = start(kind, cpu=None, extra=extra)
        try:
            time.sleep(0.3)
            r0 = rss(p.pid)
            socks = []
            for i in range(conns):
                s = socket.create_connection(("127.0.0.1", port))
                socks.append(s)
                if i % 500 == 499:
                    time.sleep(0.05)  # let the accept backlog drain
            for s in socks:
                s.sendall(b"PING\r\n")
            served = sum(1 for s in socks if s.recv(16).startswith(b"+PONG"))
            time.sleep(0.5)
            per_conn = (rss(p.pid) - r0) / conns
            for s in socks:
                s.close()
        finally:
            p.kill()
            p.wait()
        out[kind] = (per, per_conn, served)
        print(f"{kind:5} RSS per key holding: " + "  ".join(f"{w} {v:6.1f} B" for w, v in per.items()) +
              f"   RSS/idle-conn {per_conn:7.0f} B   served {served}/{conns}", flush=True)
    r = out["redis"]
    for k in kinds[1:]:
        a = out[k]
        print(f"ratio {k}: " + "  ".join(f"{w} {a[0][w] / r[0][w]:.2f}x" for w in SMALL) +
              f"   RSS/conn {a[1] / max(r[1], 1):.2f}x")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1000000)
    ap.add_argument("--keys", type=int, default=1000000)
    ap.add_argument("--conns", type=int, default=10000)
    ap.add_argument("--only", choices=["cpu", "mem", "types", "elements", "unix"])
    ap.add_argument("--pipelines", default="1,16", help="comma-separated pipeline depths for --only cpu/unix")
    ap.add_argument("--clients", default="50", help="comma-separated client counts for --only cpu/unix")
    ap.add_argument("--tests", help="comma-separated subset of the type workloads, e.g. zadd,xadd")
    ap.add_argument("--backends", default="io_uring",
                    help="comma-separated Atoll io-backends to measure beside Redis (epoll,io_uring); "
                         "'base' adds the build named by $ATOLL_BASE")
    a = ap.parse_args()
    if not os.path.exists(ATOLL):
        sys.exit("build first: cargo build --release")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, a.conns + 1000), hard))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} rounds={a.rounds} requests={a.requests} (x4 when pipelined)")
    redis_version = subprocess.run([REDIS, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# beside: {redis_version}")
    pipelines = tuple(int(p) for p in a.pipelines.split(","))
    own = ("base", "acl", "redis-acl", "evict", "redis-evict", "tls", "redis-tls", "cluster", "redis-cluster")
    kinds = ("redis",) + tuple(b if b in own else f"atoll-{b}" for b in a.backends.split(","))
    clients = tuple(int(c) for c in a.clients.split(","))
    if a.only in (None, "cpu"):
        cpu_suite(a.rounds, a.requests, kinds=kinds, pipelines=pipelines, clients=clients)
    if a.only in (None, "unix"):
        cpu_suite(a.rounds, a.requests, unix=True, kinds=kinds, pipelines=pipelines, clients=clients)
    if a.only in (None, "mem"):
        mem_suite(a.keys, a.conns, kinds)
    if a.only in (None, "types"):
        tests = tuple(a.tests.split(",")) if a.tests else tuple(TYPE_WORKLOADS)
        cpu_suite(a.rounds, a.requests, tests=tests, pipelines=(1,), kinds=kinds)
    if a.only in (None, "elements"):
        element_suite(a.keys)


if __name__ == "__main__":
    main()
