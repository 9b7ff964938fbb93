#!/usr/bin/env python3
"""Extracts the command facts Atoll implements from shared/reference/commands.json into
atoll-server/src/cmdspec/specs.json (embedded in the binary for COMMAND INFO/DOCS, arity and
key positions). Facts only: arity, flags, ACL categories, key specs, argument structure.

Commands Redis 7.2 lacks come from tools/beyond72.json (facts read from Valkey 9.1.2 by
tools/facts_from_server.py) and, for those only Redis 8 has (no server here runs them), from
tools/redis8.json, written by hand from Redis 8.4's command reference (facts only).

Usage: python3 tools/gen_specs.py [path/to/commands.json]
The list of commands is read from the command table (atoll-server/src/commands/table.rs), so
adding a command there and re-running this script is all it takes.
"""
import json, os, re, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "reference", "commands.json")
table = open(os.path.join(root, "atoll-server/src/commands/table.rs")).read()
names = set(m.upper().replace("|", " ") for m in re.findall(r'c\("([a-z0-9_\-|]+)"', table))
ref = json.load(open(src))
# Commands Redis 7.2 lacks, read from Valkey 9.1.2 by tools/facts_from_server.py.
beyond = json.load(open(os.path.join(root, "tools", "beyond72.json")))
# Where the reference (Valkey 8.0) has one already, Valkey 9.1.2's facts win: it is the oracle.
ref.update(beyond)
ref.update(json.load(open(os.path.join(root, "tools", "redis8.json"))))
# Where Redis 7.2 differs from the Valkey-8.0-derived reference (checked against Redis 7.2.6,
# ../shared/tools/redis72 path). None known.
OVERRIDES = {}
# Arguments Valkey added to 7.2's commands (facts from Valkey 9.1.2's COMMAND DOCS): SET's
# condition gains IFEQ (Valkey 8.1).
IFEQ = {"name": "comparison-value", "since": "8.1.0", "token": "IFEQ", "type": "string"}
# … and Redis 8.4 IFNE, IFDEQ and IFDNE (Redis 8.4's command reference).
REDIS84 = [
    {"name": "ifne-value", "since": "8.4.0", "token": "IFNE", "type": "string"},
    {"name": "ifdeq-digest", "since": "8.4.0", "token": "IFDEQ", "type": "integer"},
    {"name": "ifdne-digest", "since": "8.4.0", "token": "IFDNE", "type": "integer"},
]
out = {}
for name in sorted(names):
    if name not in ref:
        sys.exit(f"{name} is not in the reference")
    spec = dict(ref[name])
    # Doc prose stays out of the repository; keep the structural facts.
    for k in ("summary", "complexity", "history", "doc_flags_text"):
        spec.pop(k, None)
    spec.update(OVERRIDES.get(name, {}))
    if name == "SET":
        spec = json.loads(json.dumps(spec))
        cond = next(a for a in spec["arguments"] if a["name"] == "condition")
        for extra in [IFEQ] + REDIS84:
            if extra not in cond["arguments"]:
                cond["arguments"].append(extra)
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
