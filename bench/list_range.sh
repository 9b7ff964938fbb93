#!/bin/bash
# Server CPU per LRANGE of 100 elements at the head and in the middle of one list of 1M
# three-byte elements, pipelined 16, for each server given (Atoll builds with one worker, or a
# redis-server), alternating, each pinned to CPU 0 with redis-benchmark on CPU 1; the server's
# user + system time read from /proc/<pid>/stat around each run.
#
#   bench/list_range.sh [ROUNDS] BINARY...
#
# Needs redis-benchmark ($REDIS_BENCHMARK, or on PATH) and taskset.
set -euo pipefail
rounds=$1; shift
rb=${REDIS_BENCHMARK:-redis-benchmark}
port=7796
cpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    args=(--port $port --save "")
    # One worker for Atoll; redis-server has one anyway.
    [ "$(basename "$bin")" = redis-server ] || args+=(--threads 1)
    taskset -c 0 "$bin" "${args[@]}" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 50); do "${rb%benchmark}cli" -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
    taskset -c 1 "$rb" -p $port -P 16 -n 1000000 -q -t lpush >/dev/null
    s0=$(cpu $pid)
    taskset -c 1 "$rb" -p $port -P 16 -n 500000 -q lrange mylist 0 99 >/dev/null
    s1=$(cpu $pid)
    taskset -c 1 "$rb" -p $port -P 16 -n 500000 -q lrange mylist 500000 500099 >/dev/null
    s2=$(cpu $pid)
    awk -v r="$r" -v b="$bin" -v a="$s0" -v m="$s1" -v e="$s2" 'BEGIN {
      printf "round %d %s: LRANGE 0 99 %.2f us, LRANGE 500000 500099 %.2f us server CPU\n",
        r, b, (m - a) * 10000 / 500000, (e - m) * 10000 / 500000 }'
    kill $pid; wait $pid 2>/dev/null || true
  done
done
