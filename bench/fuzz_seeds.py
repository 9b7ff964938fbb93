#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (bench/fuzz.sh): RESP requests of every form the parser
knows, and the bodies of DUMP payloads (footer cut: the target adds its own) of every type and
encoding, made by a running Atoll. Usage: fuzz_seeds.py ATOLL_BINARY CORPUS_DIR"""
import os, socket, subprocess, sys, tempfile, time

import redis

binary, out = sys.argv[1], sys.argv[2]
resp_dir, dump_dir = os.path.join(out, "resp_parser"), os.path.join(out, "restore_payload")
os.makedirs(resp_dir, exist_ok=True)
os.makedirs(dump_dir, exist_ok=True)

# The parser's selector byte first (0: default limits, whole-buffer pieces of 1 byte).
requests = [
    b"*1\r\n$4\r\nPING\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    b"PING\r\nSET a \"b c\\x41\" 'd'\r\n\r\n",
    b"*0\r\n*-1\r\n*2\r\n$-1\r\n",
    b"*2\r\n$3\r\nGET\r\n$10\r\nshort\r\n",
    b"*99999999999\r\n",
    b"$5\r\nhello\r\n",
    b"*1\r\n$0\r\n\r\n" * 3,
]
for i, r in enumerate(requests):
    for sel in (0x00, 0x3f, 0xf1):
        with open(os.path.join(resp_dir, f"seed{i}-{sel:02x}"), "wb") as f:
            f.write(bytes([sel]) + r)

s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--dir", tempfile.mkdtemp()],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    r = redis.Redis(port=port)
    for _ in range(200):
        try:
            r.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    r.set("int", 12345)
    r.set("str", "hello")
    r.set("lzf", "a" * 200)
    r.rpush("list", *range(5), "x" * 70)
    r.rpush("biglist", *[f"e{i}" for i in range(200)])
    r.hset("hash", mapping={"a": 1, "b": "two"})
    r.hset("bighash", mapping={f"f{i}": i for i in range(200)})
    r.sadd("intset", 1, 2, 3)
    r.sadd("lpset", "a", "b")
    r.sadd("bigset", *[f"m{i}" for i in range(600)])
    r.zadd("zset", {"a": 1.5, "b": 2})
    r.zadd("bigzset", {f"m{i}": i for i in range(200)})
    r.pfadd("hll", *range(50))
    r.xadd("stream", {"f": "v"})
    r.xadd("stream", {"f": "w"})
    r.xgroup_create("stream", "g", id="0")
    r.xreadgroup("g", "c", {"stream": ">"}, count=1)
    for k in r.keys():
        payload = r.dump(k)
        with open(os.path.join(dump_dir, k.decode()), "wb") as f:
            f.write(b"\x00" + payload[:-10])
finally:
    proc.terminate()
    proc.wait()
print(f"seeds: {len(os.listdir(resp_dir))} requests, {len(os.listdir(dump_dir))} payloads")
