#!/usr/bin/env bash
# Builds the Debian package atoll-server_<version>_<arch>.deb with dpkg-deb (Debian's own
# tool): the binary, /etc/atoll/atoll.conf (the package's settings, then every other
# directive with its default, commented), the systemd unit, the logrotate rule, the
# maintainer scripts (the atoll user and its directories) and the docs.
#
#   scripts/build-deb.sh [BINARY] [OUTDIR]
#
# BINARY defaults to target/release/atoll-server (build it with `cargo build --release`);
# OUTDIR to target/debian. DEB_COMPRESSION (xz by default) is dpkg-deb's -Z: the tests use
# `none` for speed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/target/release/atoll-server}"
OUT="${2:-$ROOT/target/debian}"
for tool in dpkg-deb dpkg python3; do
  command -v "$tool" >/dev/null || { echo "build-deb: $tool is needed (apt-get install dpkg python3)" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "build-deb: no binary at $BIN (cargo build --release)" >&2; exit 1; }

VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/atoll-server/Cargo.toml" | head -1)"
ARCH="$(dpkg --print-architecture)"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
chmod 755 "$STAGE"
echo "build-deb: staging atoll-server $VERSION ($ARCH) from $BIN"

install -D -m 755 "$BIN" "$STAGE/usr/bin/atoll-server"
install -D -m 644 "$ROOT/packaging/debian/atoll-server.service" "$STAGE/lib/systemd/system/atoll-server.service"
install -D -m 644 "$ROOT/packaging/debian/atoll-server.logrotate" "$STAGE/etc/logrotate.d/atoll-server"
install -D -m 644 "$ROOT/packaging/debian/README.Debian" "$STAGE/usr/share/doc/atoll-server/README.Debian"
install -D -m 644 "$ROOT/README.md" "$STAGE/usr/share/doc/atoll-server/README.md"
for f in LICENSE NOTICE; do
  if [ -f "$ROOT/$f" ]; then install -D -m 644 "$ROOT/$f" "$STAGE/usr/share/doc/atoll-server/$f"; fi
done
mkdir -p "$STAGE/etc/atoll"

# The configuration: the package's own settings, then every directive the binary knows with
# its default value, as CONFIG GET reports it (asked of the binary itself over a unix socket).
echo "build-deb: writing /etc/atoll/atoll.conf from the binary's defaults"
python3 - "$BIN" "$STAGE/etc/atoll/atoll.conf" <<'PYEOF'
import os, socket, subprocess, sys, tempfile, time
binary, dest = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="atoll-deb-")
sock_path = os.path.join(tmp, "s.sock")
proc = subprocess.Popen([binary, "--port", "0", "--unixsocket", sock_path, "--save", "", "--dir", tmp,
                         "--loglevel", "warning"], stdout=subprocess.DEVNULL)
try:
    for _ in range(500):
        if os.path.exists(sock_path):
            try:
                s = socket.socket(socket.AF_UNIX); s.connect(sock_path); break
            except OSError:
                pass
        time.sleep(0.02)
    else:
        sys.exit("build-deb: the binary did not start")
    s.sendall(b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$1\r\n*\r\n")
    buf = b""
    def need(n):
        global buf
        while len(buf) < n:
            d = s.recv(65536)
            if not d:
                sys.exit("build-deb: connection closed")
            buf += d
    def line():
        global buf
        while b"\r\n" not in buf:
            need(len(buf) + 1)
        l, buf = buf.split(b"\r\n", 1)
        return l
    head = line()
    assert head[:1] == b"*", head
    items = []
    for _ in range(int(head[1:])):
        h = line()
        n = int(h[1:])
        need(n + 2)
        items.append(buf[:n].decode()); buf = buf[n + 2:]
finally:
    proc.terminate(); proc.wait()
pairs = sorted(zip(items[0::2], items[1::2]))
ours = {
    "bind": "127.0.0.1 -::1", "port": "6379", "protected-mode": "yes", "daemonize": "no",
    "supervised": "systemd", "pidfile": "/run/atoll/atoll-server.pid",
    "logfile": "/var/log/atoll/atoll-server.log", "dir": "/var/lib/atoll",
}
# Set at start-up from where the binary ran above, not defaults.
skip = {"unixsocket", "unixsocketperm"} | set(ours)
def quoted(v):
    if v == "" or any(c in v for c in " \"'\\"):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return v
with open(dest, "w") as f:
    f.write("# Atoll's configuration, in Redis's format: every redis.conf directive is understood, and\n")
    f.write("# Redis's own documentation of redis.conf describes them.\n#\n")
    f.write("# What the Debian package runs with (the service passes --supervised systemd too):\n")
    for k, v in ours.items():
        f.write(f"{k} {v}\n")
    f.write("\n# Every other directive, with its default value:\n")
    for k, v in pairs:
        if k not in skip:
            f.write(f"# {k} {quoted(v)}\n")
PYEOF
chmod 640 "$STAGE/etc/atoll/atoll.conf"

mkdir -p "$STAGE/DEBIAN"
install -m 755 "$ROOT/packaging/debian/postinst" "$ROOT/packaging/debian/prerm" "$ROOT/packaging/debian/postrm" "$STAGE/DEBIAN/"
printf '/etc/atoll/atoll.conf\n/etc/logrotate.d/atoll-server\n' >"$STAGE/DEBIAN/conffiles"
SIZE="$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)"
cat >"$STAGE/DEBIAN/control" <<EOF
Package: atoll-server
Version: $VERSION
Architecture: $ARCH
Maintainer: Atoll developers <atoll@localhost>
Installed-Size: $SIZE
Depends: libc6, adduser
Suggests: redis-tools
Section: database
Priority: optional
Description: Redis-compatible in-memory data store using every core
 Atoll speaks Redis's protocol, reads and writes Redis's RDB and AOF files and
 replicates with Redis, keeping Redis's atomicity while running on all cores.
 Every Redis client works with it; redis-cli (redis-tools) is its command-line
 client.
EOF
mkdir -p "$OUT"
DEB="$OUT/atoll-server_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group "-Z${DEB_COMPRESSION:-xz}" --build "$STAGE" "$DEB" >/dev/null
echo "build-deb: wrote $DEB"
