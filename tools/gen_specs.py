#!/usr/bin/env python3
"""Extracts the command facts Atoll implements into atoll-server/src/cmdspec/specs.json
(embedded in the binary for COMMAND INFO/DOCS, arity and key positions). Facts only: arity,
flags, ACL categories, tips, key specs, argument structure — none of Redis's prose (its
summaries, key-spec notes, complexity and history stay out); the summary and complexity each
command gets in COMMAND DOCS are our own, from tools/prose.json.

Redis 7.2's commands come from Redis 7.2.6's own src/commands/*.json, in the oracle's source
tree (scripts/oracle.sh fetches and builds it; its cache is ~/.cache/atoll-redis72, or
$REDIS72_HOME). Commands Redis 7.2 lacks come from tools/beyond72.json (facts read from Valkey
9.1.2 by tools/facts_from_server.py) and, for those only Redis 8 has (no server here runs
them), from tools/redis8.json, written by hand from Redis 8's command reference (facts only).
The arguments Valkey and Redis 8 added to 7.2's commands are added below, each named.

Usage: python3 tools/gen_specs.py [path/to/redis-7.2.6/src/commands]
The list of commands is read from the command table (atoll-server/src/commands/table.rs), so
adding a command there and re-running this script is all it takes.
"""
import json, os, re, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
home = os.environ.get("REDIS72_HOME", os.path.expanduser("~/.cache/atoll-redis72"))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(home, "redis-7.2.6", "src", "commands")
if not os.path.isdir(src):
    sys.exit(f"{src}: no Redis 7.2.6 source tree (run scripts/oracle.sh first)")
table = open(os.path.join(root, "atoll-server/src/commands/table.rs")).read()
names = set(m.upper().replace("|", " ") for m in re.findall(r'c\("([a-z0-9_\-|]+)"', table))
ref = {}
for f in sorted(os.listdir(src)):
    if f.endswith(".json"):
        for name, spec in json.load(open(os.path.join(src, f))).items():
            ref[f"{spec['container']} {name}" if "container" in spec else name] = spec
# Commands Redis 7.2 lacks, read from Valkey 9.1.2 by tools/facts_from_server.py.
beyond = json.load(open(os.path.join(root, "tools", "beyond72.json")))
ref.update({k: v for k, v in beyond.items() if k not in ref})
redis8 = json.load(open(os.path.join(root, "tools", "redis8.json")))
# COMMAND DOCS's summaries and complexities, written for Atoll (not Redis's prose).
prose = json.load(open(os.path.join(root, "tools", "prose.json")))
ref.update(redis8)
# Arguments Valkey added to 7.2's commands (facts from Valkey 9.1.2's COMMAND DOCS): SET's
# condition gains IFEQ (Valkey 8.1), HSCAN NOVALUES (Valkey 8.0), CLIENT KILL MAXAGE (Valkey 8.0).
IFEQ = {"name": "comparison-value", "since": "8.1.0", "token": "IFEQ", "type": "string"}
NOVALUES = {"name": "novalues", "optional": True, "since": "8.0.0", "token": "NOVALUES", "type": "pure-token"}
MAXAGE = {"name": "maxage", "optional": True, "since": "8.0.0", "token": "MAXAGE", "type": "integer"}
# … and Redis 8.4 IFNE, IFDEQ and IFDNE (Redis 8.4's command reference).
REDIS84 = [
    {"name": "ifne-value", "since": "8.4.0", "token": "IFNE", "type": "string"},
    {"name": "ifdeq-digest", "since": "8.4.0", "token": "IFDEQ", "type": "integer"},
    {"name": "ifdne-digest", "since": "8.4.0", "token": "IFDNE", "type": "integer"},
]


def find_arg(args, name):
    """The argument called `name`, at any depth."""
    for a in args:
        if a.get("name") == name:
            return a
        found = find_arg(a.get("arguments", []), name)
        if found:
            return found
    return None


def strip(spec):
    """The structural facts of a spec, without prose."""
    spec = json.loads(json.dumps(spec))
    for k in ("summary", "complexity", "history", "doc_flags_text", "function", "reply_schema",
              "get_keys_function"):
        spec.pop(k, None)
    for ks in spec.get("key_specs", []):
        ks.pop("notes", None)
    return spec


out = {}
for name in sorted(names):
    if name not in ref:
        sys.exit(f"{name} is not in Redis 7.2.6's commands nor in tools/beyond72.json or tools/redis8.json")
    spec = strip(ref[name])
    if name == "SET":
        find_arg(spec["arguments"], "condition")["arguments"] += [IFEQ] + REDIS84
    if name == "HSCAN":
        spec["arguments"].append(NOVALUES)
    if name == "CLIENT KILL":
        find_arg(spec["arguments"], "new-format")["arguments"].append(MAXAGE)
    # COMMAND DOCS's prose (summary, complexity) is ours, from tools/prose.json.
    if name not in prose:
        sys.exit(f"{name} has no summary and complexity in tools/prose.json")
    spec["summary"] = prose[name]["summary"]
    spec["complexity"] = prose[name]["complexity"]
    out[name] = spec
    if " " in name:
        parent = name.split(" ")[0]
        if parent not in names:
            sys.exit(f"container {parent} must be in the table too")
dst = os.path.join(root, "atoll-server/src/cmdspec/specs.json")
with open(dst, "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
    f.write("\n")
print(f"wrote {len(out)} command specs to {dst}")
