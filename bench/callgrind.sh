#!/usr/bin/env bash
# Instructions per request under callgrind: repeatable where CPU time on this VM is not.
#
# Usage: bench/callgrind.sh [binary] [test] [pipeline]
#   binary   default target/release/atoll-server (give an older build to compare)
#   test     redis-benchmark -t name, default get
#   pipeline default 16
# Runs the server with one worker under valgrind, preloads 100k keys (as bench.py does), zeroes
# the counters, runs `redis-benchmark -c 50 -n 400000 -r 100000 -d 32 -P <pipeline> -t <test>`,
# and prints instructions per request for the whole server and for `Session::process` (the
# request path without the event loop and periodic tasks, whose share grows under valgrind's
# slowdown). $ATOLL_ARGS adds server arguments (e.g. "--latency-tracking no --hotkeys no").
# ATOLL_CLUSTER=1 runs it as a one-node cluster serving all 16384 slots (cluster mode's cost
# on the call path, counted in instructions rather than seconds).
# Needs valgrind; redis-benchmark and redis-cli come from the PATH or Redis 7.2.6 (scripts/oracle.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/target/release/atoll-server}"
# Redis 7.2.6's redis-cli and redis-benchmark, from the oracle's build when not on the PATH.
if ! command -v redis-benchmark >/dev/null || ! command -v redis-cli >/dev/null; then
    PATH="$(dirname "$("$ROOT/scripts/oracle.sh" | tail -1)"):$PATH"
fi
TEST="${2:-get}"
PIPE="${3:-16}"
N=400000
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
OUT="$(mktemp -d)"
trap 'kill "$VP" 2>/dev/null || true; rm -rf "$OUT"' EXIT

CLUSTER_ARGS=""
if [ "${ATOLL_CLUSTER:-0}" = 1 ]; then
    CLUSTER_ARGS="--cluster-enabled yes --cluster-config-file nodes.conf --dir $OUT"
fi
# shellcheck disable=SC2086
valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" "$BIN" --port "$PORT" --threads 1 --save "" $CLUSTER_ARGS ${ATOLL_ARGS:-} \
    >/dev/null 2>&1 &
VP=$!
# Start-up under valgrind takes from seconds to over a minute on this VM.
UP=0
for _ in $(seq 900); do
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && { UP=1; break; }
    sleep 0.2
done
[ "$UP" = 1 ] || { echo "server did not start under valgrind" >&2; exit 1; }
if [ -n "$CLUSTER_ARGS" ]; then
    redis-cli -p "$PORT" cluster addslotsrange 0 16383 >/dev/null
    for _ in $(seq 300); do
        redis-cli -p "$PORT" cluster info | grep -q 'cluster_state:ok' && break
        sleep 0.2
    done
    redis-cli -p "$PORT" cluster info | grep -q 'cluster_state:ok' || { echo "the one-node cluster is not ok" >&2; exit 1; }
fi
redis-benchmark -p "$PORT" -t set -r 100000 -n 200000 -P 64 -d 32 -q >/dev/null
callgrind_control -z "$VP" >/dev/null 2>&1
redis-benchmark -p "$PORT" -c 50 -n "$N" -r 100000 -d 32 -P "$PIPE" -q -t "$TEST" >/dev/null
callgrind_control -d "$VP" >/dev/null 2>&1
sleep 1
DUMP=$(ls -t "$OUT"/cg.* | head -1)
callgrind_annotate --inclusive=yes --threshold=100 "$DUMP" 2>/dev/null | awk -v n="$N" '
    /PROGRAM TOTALS/ { gsub(",", "", $1); printf "whole server     %6.0f instructions/request\n", $1 / n }
    /atoll::server::session::Session::process \[/ { gsub(",", "", $1); printf "Session::process %6.0f instructions/request\n", $1 / n }'
