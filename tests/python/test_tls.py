"""redis-py over TLS (`ssl=True`, `rediss://`): a CA and certificates made with the openssl tool
(as Redis's own utils/gen-test-certs.sh does), Atoll serving TLS and plain TCP side by side,
client certificates required, optional and off, and Python's ssl module checking the server's
name."""

import os
import ssl
import subprocess
import tempfile

import pytest
import redis

from atoll_proc import atoll, free_port


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="atoll-tls-py-")
    p = lambda f: os.path.join(d, f)  # noqa: E731
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
            "-subj", "/CN=Atoll py CA", "-keyout", p("ca.key"), "-out", p("ca.crt"))
    ext = p("ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for who in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", f"/CN={who}",
                "-keyout", p(f"{who}.key"), "-out", p(f"{who}.csr"))
        openssl("x509", "-req", "-in", p(f"{who}.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext, "-out", p(f"{who}.crt"))
    return p


@pytest.fixture(scope="module")
def server(certs):
    port, tls_port = free_port(), free_port()
    # 127.0.0.2 too: an address the server listens on that its certificate does not name.
    with atoll(port, "--bind", "127.0.0.1", "127.0.0.2", "--tls-port", str(tls_port),
               "--tls-cert-file", certs("server.crt"), "--tls-key-file", certs("server.key"),
               "--tls-ca-cert-file", certs("ca.crt")):
        yield port, tls_port


def tls_client(certs, tls_port, cert=True, **kw):
    extra = dict(ssl_certfile=certs("client.crt"), ssl_keyfile=certs("client.key")) if cert else {}
    return redis.Redis(host="localhost", port=tls_port, ssl=True, ssl_ca_certs=certs("ca.crt"),
                       ssl_cert_reqs="required", ssl_check_hostname=True, **extra, **kw)


@pytest.mark.parametrize("protocol", [2, 3])
def test_commands_pipelines_and_pubsub_over_tls(certs, server, protocol):
    port, tls_port = server
    r = tls_client(certs, tls_port, protocol=protocol)
    plain = redis.Redis(port=port, protocol=protocol)
    assert r.set("tls:k", "v") and plain.get("tls:k") == b"v"
    big = os.urandom(2_000_000)
    r.set("tls:big", big)
    assert r.get("tls:big") == big
    with r.pipeline(transaction=True) as p:
        for i in range(3000):
            p.rpush("tls:list", i)
        p.lrange("tls:list", 0, -1)
        out = p.execute()
    assert out[-1] == [str(i).encode() for i in range(3000)]
    ps = r.pubsub()
    ps.subscribe("tls:ch")
    assert ps.get_message(timeout=2)["type"] == "subscribe"
    assert plain.publish("tls:ch", "hi") == 1
    assert ps.get_message(timeout=2)["data"] == b"hi"
    ps.close()
    # The connection is a real TLS one: Python's ssl module negotiated a modern version.
    conn = r.connection_pool.get_connection()
    assert conn._sock.version() in ("TLSv1.2", "TLSv1.3")
    r.connection_pool.release(conn)
    r.delete("tls:k", "tls:big", "tls:list")


def test_client_certificates_required_optional_off(certs, server):
    port, tls_port = server
    admin = redis.Redis(port=port)
    with pytest.raises(redis.ConnectionError):
        tls_client(certs, tls_port, cert=False).ping()
    admin.config_set("tls-auth-clients", "optional")
    assert tls_client(certs, tls_port, cert=False).ping()
    admin.config_set("tls-auth-clients", "no")
    assert redis.from_url(f"rediss://localhost:{tls_port}/0?ssl_ca_certs={certs('ca.crt')}").ping()
    admin.config_set("tls-auth-clients", "yes")
    assert tls_client(certs, tls_port).ping()


def test_server_name_is_checked_by_the_client(certs, server):
    _, tls_port = server

    def client(check):
        return redis.Redis(host="127.0.0.2", port=tls_port, ssl=True, ssl_ca_certs=certs("ca.crt"),
                           ssl_certfile=certs("client.crt"), ssl_keyfile=certs("client.key"),
                           ssl_check_hostname=check, socket_connect_timeout=2)
    # The server listens on 127.0.0.2 and answers there when the name is not checked …
    assert client(False).ping()
    # … and the certificate names localhost and 127.0.0.1, not 127.0.0.2: refused for that.
    with pytest.raises((redis.ConnectionError, ssl.SSLError)) as e:
        client(True).ping()
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value) or "certificate verify failed" in str(e.value), e.value


def test_an_x509_v1_server_certificate_is_served(certs):
    """What `openssl x509 -req` writes without `-extfile` (X.509 v1, no extensions) serves
    redis-py, as Redis serves it."""
    p = certs
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", "/CN=localhost",
            "-keyout", p("v1.key"), "-out", p("v1.csr"))
    openssl("x509", "-req", "-in", p("v1.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
            "-CAcreateserial", "-days", "2", "-sha256", "-out", p("v1.crt"))
    text = subprocess.run(["openssl", "x509", "-in", p("v1.crt"), "-noout", "-text"], check=True,
                          capture_output=True, text=True).stdout
    assert "Version: 1 (0x0)" in text
    port, tls_port = free_port(), free_port()
    with atoll(port, "--tls-port", str(tls_port), "--tls-cert-file", p("v1.crt"),
               "--tls-key-file", p("v1.key"), "--tls-ca-cert-file", p("ca.crt"),
               "--tls-auth-clients", "no"):
        # A v1 certificate carries no subjectAltName to check a name against.
        r = redis.Redis(host="localhost", port=tls_port, ssl=True, ssl_ca_certs=p("ca.crt"),
                        ssl_cert_reqs="required", ssl_check_hostname=False)
        assert r.set("v1", "served") and r.get("v1") == b"served"
