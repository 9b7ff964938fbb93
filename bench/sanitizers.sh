#!/usr/bin/env bash
# The scripting and blocking tests under AddressSanitizer and ThreadSanitizer (issue 34): the
# server and the tests built with nightly's -Zsanitizer (the server is the binary the tests
# start), in target dirs of their own. The busy poll (a worker serving its other connections
# from inside a running script, through the interpreter's hook) and blocked clients served by
# other workers are the code these runs are for. The server counts memory over the system
# allocator in these builds (`--features system-alloc`), which the sanitizers intercept.
#
#   bench/sanitizers.sh                 both sanitizers, both test files
#   SANITIZERS=address bench/sanitizers.sh
#   TESTS="scripting" bench/sanitizers.sh
#
# A report stops the run (halt_on_error) and is printed with its stack. ThreadSanitizer needs
# std built with it too (-Zbuild-std, from nightly's rust-src), or it would not see std's own
# synchronization; AddressSanitizer does without.
# Needs: rustup with a nightly toolchain and its rust-src (installed here if missing).
# Results: docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
rustup component add rust-src --toolchain nightly >/dev/null
target=$(rustc -vV | sed -n 's/^host: //p')
status=0
for san in ${SANITIZERS:-address thread}; do
  tests=()
  for t in ${TESTS:-scripting blocking}; do tests+=(--test "$t"); done
  echo "==> $san: building (target/san-$san) and running ${TESTS:-scripting blocking}"
  start=$(date +%s)
  log=/tmp/atoll-san-$san.log
  build_std=()
  if [ "$san" = thread ]; then build_std=(-Zbuild-std); fi
  # One test at a time: the sanitizers slow the server 2-15x and the tests have timeouts.
  if RUSTFLAGS="-Zsanitizer=$san" RUSTDOCFLAGS="-Zsanitizer=$san" \
    ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1" \
    TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1" \
    cargo +nightly test "${build_std[@]}" -p atoll-server --features system-alloc --target "$target" --target-dir "target/san-$san" "${tests[@]}" \
      -- --test-threads=1 >"$log" 2>&1; then
    echo "$san: passed in $(( $(date +%s) - start )) s ($(grep -h '^test result' "$log" | tr '\n' ' '))"
  else
    status=1
    echo "$san: FAILED after $(( $(date +%s) - start )) s; the report:"
    grep -n -E "ERROR: (Address|Thread)Sanitizer|WARNING: ThreadSanitizer|SUMMARY|panicked|FAILED" "$log" | head -20
    echo "full log: $log"
  fi
done
exit $status
