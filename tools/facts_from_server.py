#!/usr/bin/env python3
"""Reads the facts of commands Redis 7.2 lacks from a running Valkey 9.1.2 (the oracle for
them, scripts/valkey.sh) and writes them, in the schema of shared/reference/commands.json,
to tools/beyond72.json, which tools/gen_specs.py merges over the reference. Facts only
(arity, flags, ACL categories, tips, key specs, argument structure, since, group): no prose.

Usage: python3 tools/facts_from_server.py PORT NAME...   (NAME as `DELIFEQ` or `SCRIPT SHOW`)
"""
import json, os, socket, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Conn:
    """Just enough RESP3 to read COMMAND INFO and COMMAND DOCS."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")
        self.cmd("HELLO", "3")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()[:-2]
        t, rest = line[:1], line[1:]
        if t in (b"+", b"("):
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"_":
            return None
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2].decode()
            return data[4:] if t == b"=" else data
        if t in (b"*", b"~", b">"):
            return [self.read() for _ in range(int(rest))]
        if t == b"%":
            return {self.read(): self.read() for _ in range(int(rest))}
        raise RuntimeError(f"unexpected RESP {line!r}")


# Categories Redis and Valkey add from a command's flags; the reference lists only the others.
IMPLIED = {"write", "read", "admin", "dangerous", "pubsub", "fast", "slow", "blocking"}


def key_spec(ks):
    bs, fk = ks["begin_search"], ks["find_keys"]
    begin = {"index": {"pos": bs["spec"]["index"]}} if bs["type"] == "index" else {bs["type"]: bs["spec"]}
    spec = dict(fk["spec"])
    if "keystep" in spec:
        spec["step"] = spec.pop("keystep")
    find = {fk["type"]: spec} if fk["type"] != "unknown" else {"unknown": None}
    return {"begin_search": begin, "find_keys": find, "flags": [f.upper() for f in ks["flags"]]}


def argument(a):
    out = {k: a[k] for k in ("name", "type", "key_spec_index", "token", "since") if k in a}
    for f in a.get("flags", []):
        out[f.replace("-", "_")] = True
    if "arguments" in a:
        out["arguments"] = [argument(x) for x in a["arguments"]]
    return out


def facts(c, name):
    wire = name.lower().replace(" ", "|")
    [info] = c.cmd("COMMAND", "INFO", wire)
    docs = c.cmd("COMMAND", "DOCS", wire)[wire]
    _, arity, flags, _, _, _, cats, tips, kspecs = info[:9]
    spec = {
        "arity": arity,
        "command_flags": [f.upper() for f in flags if f != "movablekeys"],
        "acl_categories": [c[1:].upper() for c in cats if c[1:] not in IMPLIED],
        "group": docs["group"],
        "since": docs["since"],
    }
    if tips:
        spec["command_tips"] = [t.upper() for t in tips]
    if kspecs:
        spec["key_specs"] = [key_spec(k) for k in kspecs]
    if docs.get("arguments"):
        spec["arguments"] = [argument(a) for a in docs["arguments"]]
    if " " in name:
        spec["container"] = name.split(" ")[0]
    return spec


def main():
    port, names = int(sys.argv[1]), sys.argv[2:]
    c = Conn(port)
    dst = os.path.join(root, "tools", "beyond72.json")
    out = json.load(open(dst)) if os.path.exists(dst) else {}
    for n in names:
        out[n.upper()] = facts(c, n)
    with open(dst, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(out)} command facts to {dst}")


main()
