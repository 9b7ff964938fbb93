#!/usr/bin/env bash
# Runs all of Atoll's tests: unit tests, black-box tests against the built server, the
# differential tests against Redis 7.2.6 itself (fetched, checked and built once by
# scripts/oracle.sh; they fail — never skip — without it), real client libraries, and the
# dashboard in a real headless browser (Debian's chromium, installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# Rust: Debian's own rustc is older than Atoll's dependencies allow; rustup installs a current
# one. Stop here with what to do rather than half-way through a build.
need_rust=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' atoll-server/Cargo.toml)
if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: no Rust toolchain: install Rust $need_rust or newer with rustup (https://rustup.rs)" >&2
  exit 1
fi
have_rust=$(rustc --version | cut -d' ' -f2)
if [ "$(printf '%s\n%s\n' "$need_rust" "$have_rust" | sort -V | head -1)" != "$need_rust" ]; then
  echo "test.sh: Rust $have_rust is too old: Atoll needs $need_rust or newer (rustup update stable)" >&2
  exit 1
fi
echo "==> $(rustc --version)"

# Each test server keeps its files and log in a scratch directory of its own
# ($TMPDIR/atoll-test-<pid>-<port>), left behind so a failure can be read afterwards. Those of
# runs that ended hours ago go now (a run with big datasets leaves gigabytes); a run going on
# beside this one keeps its own.
find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'atoll-test-*' -type d -mmin +180 -exec rm -rf {} + 2>/dev/null || true

# Installs Debian packages the tests need (as root, or through sudo), saying why.
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
apt_install() {
  echo "==> installing $1"
  shift
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
  apt_install "redis-server and redis-tools (the differential tests' oracle)" redis-server redis-tools
  # The package may start a system instance on 6379; Atoll's default port. Tests use their
  # own ports, but leave 6379 free for `cargo run`.
  $SUDO service redis-server stop >/dev/null 2>&1 || true
fi
echo "==> $(redis-server --version) (redis-benchmark, redis-cli)"

# TLS: the oracle is built with TLS when OpenSSL's headers are there, and the tests make an
# encrypted key with the openssl tool.
if [ ! -f /usr/include/openssl/ssl.h ] || ! command -v openssl >/dev/null 2>&1; then
  apt_install "libssl-dev and openssl (TLS tests; the oracle's TLS build)" libssl-dev openssl
fi
# strace: the fsync settings' test counts the server's fdatasync calls with it.
if ! command -v strace >/dev/null 2>&1; then
  apt_install "strace (the fsync settings' test counts fsyncs with it)" strace
fi
# A cached oracle built before OpenSSL's headers were there has no TLS: build it again.
oracle_home=${REDIS72_HOME:-$HOME/.cache/atoll-redis72}
if [ -z "${REDIS_SERVER:-}" ] && [ -x "$oracle_home/redis-7.2.6/src/redis-server" ] \
  && ! ldd "$oracle_home/redis-7.2.6/src/redis-server" | grep -q libssl; then
  echo "==> the cached Redis 7.2.6 has no TLS: rebuilding it"
  rm -rf "$oracle_home/redis-7.2.6"
fi

# The differential oracle: Redis 7.2.6 itself (about a minute to build the first time).
if [ -z "${REDIS_SERVER:-}" ]; then
  REDIS_SERVER=$(./scripts/oracle.sh)
  export REDIS_SERVER
fi
echo "==> oracle: $("$REDIS_SERVER" --version)"

# The dashboard's browser test needs Chromium.
if ! command -v chromium >/dev/null 2>&1; then
  apt_install "chromium (the dashboard's browser test)" chromium
fi

# The power-loss test mounts forgetfs (tests/python/forgetfs.py) with FUSE: libfuse2 for fusepy.
if ! ldconfig -p | grep -q 'libfuse\.so\.2'; then
  apt_install "libfuse2 (the power-loss test's FUSE layer)" libfuse2
fi

# The Python tests' dependencies (redis-py, pytest, rq, fusepy …) go into a virtual
# environment of their own, never the system Python ($ATOLL_VENV to put it elsewhere).
venv=${ATOLL_VENV:-$HOME/.cache/atoll-venv}
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt_install "python3-venv (the Python tests' virtual environment)" python3-venv
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "==> creating the Python virtual environment $venv"
  python3 -m venv "$venv"
fi
echo "==> installing the Python test dependencies into $venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt
PY="$venv/bin/python"

log=$(mktemp)
# Tests that checked a fallback instead of what they are named for (io_uring refused by the
# kernel, batched waits without Linux 6.12's min-timeout waits …) write a line here; the run
# ends by listing them, so a pass on the fallback is never mistaken for a pass on the feature.
export ATOLL_TEST_NOTES
ATOLL_TEST_NOTES=$(mktemp)
trap 'rm -f "$log" "$ATOLL_TEST_NOTES"' EXIT

# Each test starts its own servers on ports from a per-process allocator.
cargo test --workspace -- --test-threads=2 2>&1 | tee "$log"

# The black-box suites again on the other worker backend, epoll (the default is io_uring;
# `runs_the_requested_io_backend` checks INFO's multiplexing_api, so neither pass can silently
# run on the wrong one).
ATOLL_TEST_IO_BACKEND=epoll cargo test -p atoll-server --test blackbox --test blocking --test scan --test tls \
  -- --test-threads=2 2>&1 | tee -a "$log"

# Go, for the go-redis client test (tests/go): a Go of 1.21 or newer on PATH or in
# /usr/local/go, else Go's release toolchain from the Go module proxy (the
# golang.org/toolchain module, its SHA-256 pinned here) unpacked into a cache: Debian
# bookworm's golang-go (1.19) is too old for go-redis v9.
go_ok() { [ -x "$1" ] && "$1" version 2>/dev/null | grep -qE 'go1\.(2[1-9]|[3-9][0-9])'; }
GO=$(command -v go || true)
go_ok "${GO:-}" || GO=/usr/local/go/bin/go
if ! go_ok "$GO"; then
  gocache=${ATOLL_GO_HOME:-$HOME/.cache/atoll-go}
  GO=$gocache/go/bin/go
  if ! go_ok "$GO"; then
    v=v0.0.1-go1.24.11.linux-amd64
    sha=8a9685c09d449928863152512648530dafde05e7d41fcbb21baba3a852e84ef4
    echo "==> fetching Go ($v) from the Go module proxy into $gocache"
    command -v unzip >/dev/null 2>&1 || apt_install "unzip (to unpack Go)" unzip
    mkdir -p "$gocache" && rm -rf "$gocache/go" "$gocache/golang.org"
    curl -fsSL "https://proxy.golang.org/golang.org/toolchain/@v/$v.zip" -o "$gocache/go.zip"
    echo "$sha  $gocache/go.zip" | sha256sum -c --quiet - || { echo "test.sh: the Go toolchain's SHA-256 is not the pinned one" >&2; exit 1; }
    (cd "$gocache" && unzip -q go.zip && mv "golang.org/toolchain@$v" go && rm -rf golang.org go.zip)
    chmod +x "$gocache"/go/bin/* "$gocache"/go/pkg/tool/*/*
  fi
fi
export PATH="$(dirname "$GO"):$PATH"
echo "==> $("$GO" version)"

# Java 17+ and Maven, for the Jedis and Lettuce cluster test (tests/java, built by the test;
# Maven fetches the clients from Maven Central): Debian's default JDK (17 on bookworm) if
# either is missing. javac too: a JRE alone runs but cannot build the test's program.
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
  apt_install "default-jdk-headless and maven (the Jedis and Lettuce cluster test)" default-jdk-headless maven
fi
java_major=$(java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -1)
if [ -z "$java_major" ] || [ "$java_major" -lt 17 ]; then
  echo "test.sh: Java ${java_major:-(unknown)} is too old: the Jedis and Lettuce test needs 17 or newer" >&2
  exit 1
fi
# (mvn -v colours its first line even when not on a terminal.)
echo "==> $(java -version 2>&1 | head -1); $(mvn -v 2>/dev/null | grep -o 'Apache Maven [0-9.]*')"

# Real client libraries beyond the Rust one: redis-py (and prometheus_client's parser for
# /metrics), go-redis (tests/go) and Jedis and Lettuce (tests/java), each built by its test,
# against the debug binary built above.
"$PY" -m pytest -q tests/python 2>&1 | tee -a "$log"

# A real Node.js application: a BullMQ job queue (every operation a Lua script) with worker
# processes, against the debug binary.
if ! command -v node >/dev/null 2>&1; then
  apt_install "nodejs and npm (the BullMQ test)" nodejs npm
fi
(cd tests/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
node tests/node/bullmq_test.js 2>&1 | tee -a "$log"
# ioredis's Cluster client through a cluster of Atoll nodes and a failover.
node tests/node/cluster_test.js 2>&1 | tee -a "$log"

# The live dashboard in headless Chromium: it loads, polls, and its charts move under load.
"$PY" -m pytest -q tests/browser 2>&1 | tee -a "$log"

# One closing line for the whole run (cargo's per-binary lines and pytest's summed; a pytest
# summary may list failures and warnings beside the passes: "1 failed, 45 passed, 2 warnings in 3.1s").
awk '/^test result:/ { p += $4; f += $6; next }
     / in [0-9.]+s/ && / passed/ {
       for (i = 1; i < NF; i++) {
         if ($(i+1) ~ /^passed/) p += $i
         if ($(i+1) ~ /^failed/) f += $i
       }
     }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
if [ -s "$ATOLL_TEST_NOTES" ]; then
  echo "checked on a fallback, not on the feature (this machine's kernel):"
  sort -u "$ATOLL_TEST_NOTES" | sed 's/^/  /'
fi
