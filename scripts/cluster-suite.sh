#!/usr/bin/env bash
# Redis 7.2.6's own cluster tests with Atoll standing in for redis-server:
#
#   unit    tests/unit/cluster/*.tcl, each run by `runtest --single` (the framework's
#           start_cluster makes the nodes; `cluster-response-tls` only with -- --tls)
#   legacy  tests/cluster/tests/*.tcl, run by `runtest-cluster` (20 nodes, appendonly yes)
#
#   scripts/cluster-suite.sh [--server BIN|redis] [--out DIR] [--part unit|legacy|all]
#                            [--per-file-s N] [-- args for runtest / runtest-cluster]
#
# --server: the binary under test (default target/release/atoll-server; `redis` runs Redis
#   itself, to see what it passes on this machine). Args after -- go to runtest (unit) or
#   runtest-cluster (legacy), e.g. `--part legacy -- --single 02-failover`.
# Output: per unit file its ok/err/exception counts; for legacy each test's line as the harness
# prints it (a failure stops its file: the harness goes on with the next). Both end in a TOTAL
# line, also in $out/summary.txt.
# The oracle tree is built by scripts/oracle.sh (needs tclsh: apt-get install tcl).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=target/release/atoll-server out="" part=all per=900 extra=()
while [ $# -gt 0 ]; do case $1 in
  --server) bin=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --part) part=$2; shift 2 ;;
  --per-file-s) per=$2; shift 2 ;;
  --) shift; extra=("$@"); break ;;
  *) echo "usage: $0 [--server BIN|redis] [--out DIR] [--part unit|legacy|all] [-- args]" >&2; exit 2 ;;
esac; done
case $part in unit|legacy|all) ;; *) echo "--part is unit, legacy or all" >&2; exit 2 ;; esac
command -v tclsh >/dev/null || { echo "needs tclsh (apt-get install tcl)" >&2; exit 2; }
redis=$(scripts/oracle.sh) || exit 2
src=$(dirname "$(dirname "$redis")")
[ -n "$out" ] || out=$(mktemp -d /tmp/cluster-suite.XXXX)
mkdir -p "$out"; out=$(cd "$out" && pwd)
if [ "$bin" != redis ]; then
  [ -x "$bin" ] || { echo "no $bin — cargo build --release first, or pass --server" >&2; exit 2; }
  bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
fi
tls=no
[[ " ${extra[*]:-} " == *" --tls "* ]] && tls=yes

# A private copy of the tree the harness runs in, src/redis-server being the binary under test.
# The unit framework waits for Redis's start-up lines on stdout ("PID:", "Server initialized"),
# which Atoll's log does not print in Redis's words: a wrapper prints them first.
run=$(mktemp -d /tmp/cluster-run.XXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$run"' EXIT
cp -r "$src/tests" "$run/tests"; cp "$src/runtest" "$src/runtest-cluster" "$run/"
mkdir -p "$run/src" "$run/tests/tmp" "$run/tests/cluster/tmp"
for t in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do ln -s "$src/src/$t" "$run/src/$t"; done
if [ "$bin" = redis ]; then
  ln -s "$redis" "$run/src/redis-server"
else
  printf '#!/bin/bash\necho " PID: $$"; echo "Server initialized"\nexec "%s" "$@"\n' "$bin" >"$run/src/redis-server"
  chmod +x "$run/src/redis-server"
fi
if [ $tls = yes ]; then
  echo 'package require tls' | tclsh >/dev/null 2>&1 || { echo "--tls needs Tcl's TLS package (apt-get install tcl-tls)" >&2; exit 2; }
  cp -r "$src/utils" "$run/utils"
  (cd "$run" && ./utils/gen-test-certs.sh >/dev/null 2>&1) || { echo "gen-test-certs.sh failed" >&2; exit 2; }
fi
reap() { for pid in $(ps -eo pid=,args= | awk -v s="$run/" 'index($0, s) {print $1}'); do kill -9 "$pid" 2>/dev/null; done; }

: >"$out/summary.txt"
if [ $part != legacy ]; then
  printf "%-44s %5s %5s %5s %s\n" file ok err exc note | tee -a "$out/summary.txt"
  for f in "$src"/tests/unit/cluster/*.tcl; do
    name=unit/cluster/$(basename "$f" .tcl)
    [ "$name" = unit/cluster/cluster-response-tls ] && [ $tls = no ] && continue
    log=$out/$(echo "$name" | tr / _).log
    (cd "$run" && timeout -k 10 "$per" ./runtest --single "$name" --clients 1 --timeout 120 \
      "${extra[@]}" >"$log" 2>&1)
    rc=$?
    sed -i 's/\x1b\[[0-9;]*m//g' "$log"
    ok=$(grep -c '^\[ok\]' "$log"); err=$(grep -c '^\[err\]' "$log"); exc=$(grep -c '^\[exception\]' "$log")
    note=""
    [ $rc = 124 ] && note="timeout after ${per}s"
    grep -q '^\[TIMEOUT\]' "$log" && note="a test timed out"
    printf "%-44s %5s %5s %5s %s\n" "$name" "$ok" "$err" "$exc" "$note" | tee -a "$out/summary.txt"
    reap
  done
  awk '$1 ~ /^unit/ && $2 ~ /^[0-9]+$/ {o+=$2; e+=$3; x+=$4} END {printf "TOTAL unit ok=%d err=%d exception=%d\n", o, e, x}' \
    "$out/summary.txt" | tee -a "$out/summary.txt"
fi
if [ $part != unit ]; then
  # This runner waits for a node's port, not for its start-up lines: the binary itself, so a
  # restart's output does not split a test's line.
  [ "$bin" = redis ] || ln -sf "$bin" "$run/src/redis-server"
  log=$out/legacy.log
  (cd "$run" && timeout -k 10 5400 ./runtest-cluster "${extra[@]}" >"$log" 2>&1)
  rc=$?
  sed -i 's/\x1b\[[0-9;]*m//g' "$log"
  reap
  grep -E '^Testing unit|^[0-9:]+> ' "$log"
  # Each test's result is the first OK or FAILED after its line ("12:00:00> name: "), on
  # the same line or after what the test printed (redis-cli's output, a restart's PID).
  read -r ok failed < <(awk '/^[0-9:]+> / {p = 1} p && /FAILED/ {f++; p = 0} p && /OK$/ {o++; p = 0}
    END {print o + 0, f + 0}' "$log")
  stopped=$(grep -c '^FAILED: caught an error' "$log")
  # The harness's own verdict also counts crash reports and lines on a node's standard error.
  verdict=$(grep -oE 'WARNING [0-9]+ test\(s\) failed|GOOD! No errors\.' "$log" | tail -1)
  echo "TOTAL legacy ok=$ok failed=$failed units-stopped=$stopped harness: ${verdict:-no verdict} (exit $rc; log $log)" | tee -a "$out/summary.txt"
fi
