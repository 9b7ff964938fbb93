#!/usr/bin/env bash
# What a running HOTKEYS session costs: server CPU per op of SET and GET pipelined 16 over
# 100,000 random keys, with no session and with `HOTKEYS START METRICS 2 CPU NET`, in
# alternating rounds. Atoll is pinned to CPU 0 with one worker, redis-benchmark to CPU 1; the
# server's CPU time is read from /proc. Results: docs/BENCHMARKS.md (seventeenth session).
#
# Usage: bench/hotkeys_session.sh [rounds]   (ATOLL=path/to/atoll-server, PORT=7720)
set -euo pipefail
cd "$(dirname "$0")/.."
atoll=${ATOLL:-target/release/atoll-server}
port=${PORT:-7720}
rounds=${1:-3}
n=2000000
cli() { python3 - "$port" "$@" <<'PY'
import socket, sys
port, args = int(sys.argv[1]), sys.argv[2:]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args))
print(s.recv(4096).decode().strip())
PY
}
taskset -c 0 "$atoll" --port "$port" --threads 1 --save "" --appendonly no \
  --latency-tracking no --hotkeys no >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
sleep 0.5
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
tck=$(getconf CLK_TCK)
for round in $(seq "$rounds"); do
  for mode in off on; do
    [ "$mode" = on ] && cli HOTKEYS START METRICS 2 CPU NET >/dev/null
    for t in set get; do
      a=$(cpu)
      taskset -c 1 redis-benchmark -p "$port" -n "$n" -P 16 -r 100000 -t "$t" -q >/dev/null
      b=$(cpu)
      echo "round $round session=$mode $t: $(python3 -c "print(round(($b - $a) / $tck / $n * 1e6, 3))") us/op"
    done
    if [ "$mode" = on ]; then cli HOTKEYS STOP >/dev/null; cli HOTKEYS RESET >/dev/null; fi
  done
done
