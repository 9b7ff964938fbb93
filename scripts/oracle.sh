#!/usr/bin/env bash
# Prints the path of a redis-server 7.2.6 — the oracle the differential tests compare Atoll
# with — building it once into a cache.
#
# The source is Redis 7.2.6's release tarball: the team's copy in ../shared/oracles when it is
# beside the checkout, otherwise downloaded from Redis's download site ($REDIS72_URL to use
# another place, file:// included). Either way its SHA-256 must be the one Redis published
# before anything is built. The build goes into $REDIS72_HOME (default
# ~/.cache/atoll-redis72), with TLS when OpenSSL's headers are there.
#
#   scripts/oracle.sh          print the path (building first if needed)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=7.2.6
# The SHA-256 of Redis's release tarball redis-7.2.6.tar.gz (redis-hashes on GitHub lists each
# release's; the copy in ../shared/oracles, kept as released, has it too).
SHA256=f861f87f962faad33d690238e7d37e8d1b5d1cd40955921b9e645bb4a0287822
home=${REDIS72_HOME:-$HOME/.cache/atoll-redis72}
src="$home/redis-$VERSION"
bin="$src/src/redis-server"

say() { echo "==> $*" >&2; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

# Build tools, installed with apt when missing (each step says what it does).
need=()
command -v make >/dev/null 2>&1 || need+=(make)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v curl >/dev/null 2>&1 || need+=(curl ca-certificates)
command -v sha256sum >/dev/null 2>&1 || need+=(coreutils)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} (to build the Redis $VERSION oracle)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

mkdir -p "$home"
tarball="$home/redis-$VERSION.tar.gz"
shared="../shared/oracles/redis-$VERSION.tar.gz"
if [ -f "$shared" ] && [ -z "${REDIS72_URL:-}" ]; then
  say "Redis $VERSION source: $shared"
  cp "$shared" "$tarball.part"
else
  url=${REDIS72_URL:-https://download.redis.io/releases/redis-$VERSION.tar.gz}
  say "downloading Redis $VERSION from $url"
  curl -fsSL --retry 3 -o "$tarball.part" "$url"
fi
got=$(sha256sum "$tarball.part" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  rm -f "$tarball.part"
  echo "oracle.sh: redis-$VERSION.tar.gz has SHA-256 $got, not the published $SHA256" >&2
  exit 1
fi
mv "$tarball.part" "$tarball"

say "building Redis $VERSION in $src (about a minute, once)"
rm -rf "$src"
tar -xzf "$tarball" -C "$home"
tls=()
if [ -f /usr/include/openssl/ssl.h ]; then tls=(BUILD_TLS=yes); fi
make -C "$src" -j"$(nproc)" MALLOC=libc "${tls[@]}" >"$home/build.log" 2>&1 || {
  echo "oracle.sh: building Redis $VERSION failed; the end of $home/build.log:" >&2
  tail -20 "$home/build.log" >&2
  exit 1
}
echo "$bin"
