#!/bin/bash
# Server CPU per operation of two Atoll builds, alternating, pipelined (the command's own work,
# not the system calls): each build pinned to CPU 0 with one worker thread, redis-benchmark
# on CPU 1, the server's user + system time read from /proc/<pid>/stat around each run.
#
#   bench/pair_cpu.sh OLD_BINARY NEW_BINARY [ROUNDS] [TESTS]      (TESTS: lpush,lpop by default)
#
# Needs redis-benchmark ($REDIS_BENCHMARK, or on PATH) and taskset. Resolution: clock ticks
# (10 ms) over 2,000,000 requests, about ±1 % at 0.7 µs per op.
set -euo pipefail
old=$1 new=$2 rounds=${3:-4} tests=${4:-lpush,lpop}
rb=${REDIS_BENCHMARK:-redis-benchmark}
port=7795
cpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
for r in $(seq 1 "$rounds"); do
  for which in old new; do
    bin=$old; [ "$which" = new ] && bin=$new
    taskset -c 0 "$bin" --port $port --save "" --threads 1 >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 50); do "${rb%benchmark}cli" -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
    for t in ${tests//,/ }; do
      s0=$(cpu $pid)
      taskset -c 1 "$rb" -p $port -P 16 -n 2000000 -t "$t" -q >/dev/null
      s1=$(cpu $pid)
      awk -v r="$r" -v w="$which" -v t="$t" -v a="$s0" -v b="$s1" \
        'BEGIN { printf "round %d %-3s %-6s %.3f us/op server CPU\n", r, w, t, (b - a) * 10000 / 2000000 }'
    done
    kill $pid; wait $pid 2>/dev/null || true
  done
done
