"""The Debian package (scripts/build-deb.sh): built from the binary under test, unpacked into
a throw-away root, its unit verified by systemd-analyze, and the unpacked binary started with
the unpacked configuration under a test NOTIFY_SOCKET, as systemd would start it."""
import os
import shutil
import socket
import subprocess
import tempfile

import redis

from atoll_proc import BINARY, ROOT, free_port

EXPECTED = [
    "./usr/bin/atoll-server",
    "./etc/atoll/atoll.conf",
    "./lib/systemd/system/atoll-server.service",
    "./etc/logrotate.d/atoll-server",
    "./usr/share/doc/atoll-server/README.Debian",
    "./usr/share/doc/atoll-server/README.md",
]


def build(out):
    env = dict(os.environ, DEB_COMPRESSION="none")
    subprocess.run([os.path.join(ROOT, "scripts", "build-deb.sh"), BINARY, out], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    debs = [f for f in os.listdir(out) if f.endswith(".deb")]
    assert len(debs) == 1, debs
    return os.path.join(out, debs[0])


def test_the_package_installs_and_its_service_starts():
    work = tempfile.mkdtemp(prefix="atoll-deb-test-")
    try:
        deb = build(os.path.join(work, "out"))
        assert os.path.basename(deb).startswith("atoll-server_")
        field = lambda f: subprocess.run(["dpkg-deb", "-f", deb, f], capture_output=True, text=True,
                                         check=True).stdout.strip()
        assert field("Package") == "atoll-server"
        assert "adduser" in field("Depends")
        listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
        paths = [line.split()[-1] for line in listing.splitlines()]
        for p in EXPECTED:
            assert p in paths, (p, paths)
        control = subprocess.run(["dpkg-deb", "-I", deb, "conffiles"], capture_output=True, text=True,
                                 check=True).stdout.split()
        assert control == ["/etc/atoll/atoll.conf", "/etc/logrotate.d/atoll-server"]

        root = os.path.join(work, "root")
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        unit = os.path.join(root, "lib/systemd/system/atoll-server.service")
        text = open(unit).read()
        assert "Type=notify" in text and "User=atoll" in text and "ProtectSystem=strict" in text
        # systemd checks the unit against the host's systemd, with the packaged binary laid
        # over /usr/bin in a mount namespace of its own (nothing is installed on the host).
        verify = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             f"mount -t overlay overlay -o lowerdir={root}/usr/bin:/usr/bin /usr/bin && "
             f"systemd-analyze verify {unit}"], capture_output=True, text=True)
        assert verify.returncode == 0, verify.stdout + verify.stderr

        # The unpacked binary with the unpacked config, as the unit starts it, with its paths
        # moved into the scratch directory; systemd's readiness protocol on a test socket.
        # (The package's directories, which postinst creates, are remapped into the scratch
        # directory: nothing is written outside it.)
        data = os.path.join(work, "data")
        os.makedirs(data)
        conf = os.path.join(work, "atoll.conf")
        text = open(os.path.join(root, "etc/atoll/atoll.conf")).read()
        for d in ("/var/lib/atoll", "/var/log/atoll", "/run/atoll"):
            assert d in text, d
            text = text.replace(d, data)
        open(conf, "w").write(text)
        notify_path = os.path.join(work, "notify.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(notify_path)
        listener.settimeout(20)
        port = free_port()
        proc = subprocess.Popen(
            [os.path.join(root, "usr/bin/atoll-server"), conf, "--supervised", "systemd", "--daemonize", "no",
             "--port", str(port)],
            env=dict(os.environ, NOTIFY_SOCKET=notify_path), stdout=subprocess.DEVNULL)
        try:
            messages = []
            while not any("READY=1" in m for m in messages):
                messages.append(listener.recv(4096).decode())
            r = redis.Redis(port=port)
            assert r.ping()
            assert r.config_get("bind")["bind"] == "127.0.0.1 -::1"
            assert r.info("server")["process_supervised"] == "systemd"
            assert open(os.path.join(data, "atoll-server.pid")).read().strip() == str(proc.pid)
            r.shutdown(nosave=True)
            assert "STOPPING=1" in listener.recv(4096).decode()
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert "Ready to accept connections" in open(os.path.join(data, "atoll-server.log")).read()
    finally:
        shutil.rmtree(work, ignore_errors=True)
