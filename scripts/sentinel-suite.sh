#!/usr/bin/env bash
# Redis 7.2.6's own Sentinel tests (tests/sentinel in its source tree, run by its
# runtest-sentinel) with Atoll as the five monitored data nodes and Redis 7.2.6's own
# redis-sentinel as the five sentinels — the way an operator swaps Atoll in under Sentinel.
#
#   scripts/sentinel-suite.sh [--server BIN|redis] [--out DIR] [-- runtest-sentinel args]
#
# --server: the data nodes' binary (default target/release/atoll-server; `redis` runs Redis
#   itself, to see what it passes on this machine). Args after -- go to runtest-sentinel
#   (e.g. --single 07-down-conditions).
# Output: each test's line as the harness prints it (OK or FAILED; a failure skips the rest
# of its unit), then a count of OK, FAILED and units stopped by an error, in $out/summary.txt.
# With `-- --tls` every link is TLS (the data nodes' replication included, `tls-replication
# yes`): certificates are made by Redis's utils/gen-test-certs.sh (needs openssl), and the
# harness's client needs Tcl's TLS package (apt-get install tcl-tls).
# The oracle is built by scripts/oracle.sh (needs tclsh: apt-get install tcl).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=target/release/atoll-server out="" extra=()
while [ $# -gt 0 ]; do case $1 in
  --server) bin=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --) shift; extra=("$@"); break ;;
  *) echo "usage: $0 [--server BIN|redis] [--out DIR] [-- runtest-sentinel args]" >&2; exit 2 ;;
esac; done
command -v tclsh >/dev/null || { echo "needs tclsh (apt-get install tcl)" >&2; exit 2; }
redis=$(scripts/oracle.sh) || exit 2
src=$(dirname "$(dirname "$redis")")
[ -n "$out" ] || out=$(mktemp -d /tmp/sentinel-suite.XXXX)
mkdir -p "$out"; out=$(cd "$out" && pwd)

# A private copy of the tree the harness runs in: src/redis-sentinel is Redis's (the binary
# acts as a sentinel when so named), src/redis-server the server under test.
run=$(mktemp -d /tmp/sentinel-run.XXXX)
trap 'rm -rf "$run"' EXIT
cp -r "$src/tests" "$run/tests"; cp "$src/runtest-sentinel" "$run/"; mkdir -p "$run/src" "$run/tests/sentinel/tmp"
for t in redis-cli redis-sentinel; do ln -s "$src/src/$t" "$run/src/$t"; done
if [ "$bin" = redis ]; then
  ln -s "$redis" "$run/src/redis-server"
else
  [ -x "$bin" ] || { echo "no $bin — cargo build --release first, or pass --server" >&2; exit 2; }
  ln -s "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" "$run/src/redis-server"
fi
if [[ " ${extra[*]:-} " == *" --tls "* ]]; then
  echo 'package require tls' | tclsh >/dev/null 2>&1 || { echo "--tls needs Tcl's TLS package (apt-get install tcl-tls)" >&2; exit 2; }
  cp -r "$src/utils" "$run/utils"
  (cd "$run" && ./utils/gen-test-certs.sh >/dev/null 2>&1) || { echo "gen-test-certs.sh failed" >&2; exit 2; }
fi
log=$out/sentinel.log
(cd "$run" && timeout -k 10 3600 ./runtest-sentinel "${extra[@]}" >"$log" 2>&1)
rc=$?
sed -i 's/\x1b\[[0-9;]*m//g' "$log"
# Servers the harness could not stop (only those started from this run's copy).
for pid in $(ps -eo pid=,args= | awk -v s="$run/" 'index($0, s) {print $1}'); do kill "$pid" 2>/dev/null; done
grep -E '^Testing unit|^[0-9:]+> ' "$log"
ok=$(grep -cE '^[0-9:]+> .*: OK$' "$log")
failed=$(grep -cE '^[0-9:]+> .*FAILED' "$log")
stopped=$(grep -c '^FAILED: caught an error' "$log")
# The harness's own verdict counts more than failed tests: a crash report in a log, or any
# line on an instance's standard error ("WARNING N test(s) failed" at the end).
verdict=$(grep -oE 'WARNING [0-9]+ test\(s\) failed|GOOD! No errors\.' "$log" | tail -1)
echo "TOTAL ok=$ok failed=$failed units-stopped=$stopped harness: ${verdict:-no verdict} (exit $rc; log $log)" | tee "$out/summary.txt"
