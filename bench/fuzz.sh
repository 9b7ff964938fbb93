#!/usr/bin/env bash
# Fuzzing (issues 19, 34): the RESP parser, RESTORE payloads and sequences of commands across
# clients (command_sequences: MULTI, scripts, CLIENT KILL/PAUSE, SWAPDB, DEBUG RELOAD …; a reply
# missing or a run longer than 10 s is a finding) under libFuzzer (cargo-fuzz, nightly),
# RUNS executions each (default 10M), from seed corpora made by bench/fuzz_seeds.py. Prints
# libFuzzer's final statistics (stat::number_of_executed_units is the count recorded in
# docs/BENCHMARKS.md). A crash stops the script with the reproducer in fuzz/artifacts/.
# SANITIZER=none turns AddressSanitizer off (about 6x the executions per second; the parser
# has no unsafe code; the RESTORE path goes through the dict's, so it also gets a run with it).
# Needs: rustup with a nightly toolchain, cargo-fuzz (installed here if missing), a release
# build of atoll-server (for the seeds), python3 with redis-py.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10000000}
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
[ -x target/release/atoll-server ] || cargo build --release
corpus=$(mktemp -d /tmp/atoll-fuzz-corpus.XXXX)
python3 bench/fuzz_seeds.py target/release/atoll-server "$corpus"
for t in ${TARGETS:-resp_parser restore_payload command_sequences}; do
  mkdir -p "$corpus/$t"
  echo "==> $t: $RUNS runs"
  start=$(date +%s)
  # Debug assertions on (-a): overflow checks, and the lock-order check of atoll::lockorder.
  cargo +nightly fuzz run -a --fuzz-dir fuzz ${SANITIZER:+--sanitizer "$SANITIZER"} "$t" "$corpus/$t" -- \
    -runs="$RUNS" -max_len=4096 -timeout=10 -print_final_stats=1 2>&1 | tee "/tmp/atoll-fuzz-$t.log" | grep -E "^stat::|ERROR|panicked" || true
  grep -q "^stat::number_of_executed_units" "/tmp/atoll-fuzz-$t.log" \
    || { echo "$t did not finish: see /tmp/atoll-fuzz-$t.log"; exit 1; }
  echo "$t: $(( $(date +%s) - start )) s"
done
