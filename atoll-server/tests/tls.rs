//! TLS: the `tls-*` parameters beside Redis 7.2.6 built with TLS (the oracle of
//! `common::redis_bin`), with real clients — rustls as a client library and Debian's
//! `redis-cli --tls` — over certificates made here with rcgen (a fresh CA per test).
//!
//! Each test runs the same handshakes against both servers and compares what succeeds.

mod common;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CA and a server and a client certificate it signed, as PEM files in `dir`.
struct Pki {
    dir: PathBuf,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new(dir: &Path, name: &str) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, format!("Atoll test CA {name}"));
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).unwrap();
        let pki = Pki { dir: dir.to_path_buf(), ca, ca_key };
        std::fs::write(pki.path("ca.crt"), pki.ca.pem()).unwrap();
        pki.issue("server", &[ExtendedKeyUsagePurpose::ServerAuth]);
        pki.issue("client", &[ExtendedKeyUsagePurpose::ClientAuth]);
        // A node's certificate when it is both (a replica shows its server certificate to
        // its master unless `tls-client-cert-file` is set).
        pki.issue("node", &[ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]);
        pki
    }

    fn issue(&self, who: &str, usage: &[ExtendedKeyUsagePurpose]) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, who);
        p.extended_key_usages = usage.to_vec();
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        std::fs::write(self.path(&format!("{who}.crt")), cert.pem()).unwrap();
        std::fs::write(self.path(&format!("{who}.key")), key.serialize_pem()).unwrap();
    }

    fn path(&self, f: &str) -> String {
        self.dir.join(f).to_string_lossy().into_owned()
    }

    /// The server's `--tls-*` arguments (owned strings, see `args`).
    fn server_args(&self, tls_port: u16) -> Vec<String> {
        self.args_with(tls_port, "server")
    }

    /// `server_args` with the certificate for both ends of a link.
    fn node_args(&self, tls_port: u16) -> Vec<String> {
        self.args_with(tls_port, "node")
    }

    fn args_with(&self, tls_port: u16, cert: &str) -> Vec<String> {
        [
            ("--tls-port", tls_port.to_string()),
            ("--tls-cert-file", self.path(&format!("{cert}.crt"))),
            ("--tls-key-file", self.path(&format!("{cert}.key"))),
            ("--tls-ca-cert-file", self.path("ca.crt")),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect()
    }
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(|s| s.as_str()).collect()
}

/// How a test client connects: which CA it trusts, whether it shows the client
/// certificate, which versions and suites it offers; one config per client so that its
/// session cache is its own.
struct Client {
    config: Arc<ClientConfig>,
}

impl Client {
    fn new(ca: &str, cert: Option<(&str, &str)>, versions: &[&'static rustls::SupportedProtocolVersion]) -> Client {
        Client::with_suites(ca, cert, versions, None)
    }

    fn with_suites(
        ca: &str,
        cert: Option<(&str, &str)>,
        versions: &[&'static rustls::SupportedProtocolVersion],
        suites: Option<Vec<rustls::SupportedCipherSuite>>,
    ) -> Client {
        use rustls::pki_types::pem::PemObject;
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let mut provider = rustls::crypto::ring::default_provider();
        if let Some(s) = suites {
            provider.cipher_suites = s;
        }
        let b = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots);
        let config = match cert {
            Some((c, k)) => {
                let chain: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_file_iter(c).unwrap().map(|c| c.unwrap()).collect();
                b.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(k).unwrap()).unwrap()
            }
            None => b.with_no_client_auth(),
        };
        Client { config: Arc::new(config) }
    }

    /// Connects and completes the handshake with a PING; Err(what failed) otherwise.
    fn connect(&self, port: u16) -> Result<TlsConn, String> {
        let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let conn = ClientConnection::new(self.config.clone(), ServerName::try_from("localhost").unwrap())
            .map_err(|e| e.to_string())?;
        let mut c = TlsConn { s: StreamOwned::new(conn, sock), buf: Vec::new() };
        // TLSv1.3 servers check the client certificate after the client's last handshake
        // message: a refusal shows on the first reply.
        match c.try_cmd(&[b"PING"])? {
            r if r == b"+PONG\r\n" => Ok(c),
            r => Err(format!("unexpected reply {}", show(&r))),
        }
    }
}

struct TlsConn {
    s: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsConn {
    fn try_cmd(&mut self, a: &[&[u8]]) -> Result<Vec<u8>, String> {
        let v: Vec<Vec<u8>> = a.iter().map(|x| x.to_vec()).collect();
        self.s.write_all(&encode(&v)).map_err(|e| e.to_string())?;
        self.s.flush().map_err(|e| e.to_string())?;
        self.read_reply()
    }

    fn cmd(&mut self, a: &[&str]) -> Vec<u8> {
        let v: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
        self.try_cmd(&v).unwrap()
    }

    fn read_reply(&mut self) -> Result<Vec<u8>, String> {
        loop {
            if !self.buf.is_empty() {
                if let Some(end) = reply_end(&self.buf, 0) {
                    return Ok(self.buf.drain(..end).collect());
                }
            }
            let mut tmp = [0u8; 65536];
            match self.s.read(&mut tmp) {
                Ok(0) => return Err("closed".into()),
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn resumed(&self) -> bool {
        self.s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }
}

const BOTH: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];
const TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
const TLS13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// Redis 7.2.6 and Atoll with the same TLS settings, each with a plain port too.
struct Pair {
    redis: ServerProc,
    atoll: ServerProc,
    redis_tls: u16,
    atoll_tls: u16,
}

impl Pair {
    fn start(pki: &Pki, extra: &[&str]) -> Pair {
        let (rt, at) = (free_port(), free_port());
        let mut r = pki.server_args(rt);
        let mut a = pki.server_args(at);
        r.extend(extra.iter().map(|s| s.to_string()));
        a.extend(extra.iter().map(|s| s.to_string()));
        let redis = start_redis(&args(&r));
        let atoll = start_atoll(&args(&a));
        Pair { redis, atoll, redis_tls: rt, atoll_tls: at }
    }

    /// CONFIG SET on both over their plain ports; the replies must be equal.
    fn config_set(&self, kv: &[&str]) -> Vec<u8> {
        let mut cmd: Vec<&[u8]> = vec![b"CONFIG", b"SET"];
        cmd.extend(kv.iter().map(|s| s.as_bytes()));
        let r = RawConn::connect(self.redis.port).cmd(&cmd);
        let a = RawConn::connect(self.atoll.port).cmd(&cmd);
        assert_eq!(show(&a), show(&r), "CONFIG SET {kv:?}");
        a
    }

    /// Whether `client` gets through on each: (redis, atoll).
    fn outcome(&self, client: &Client) -> (bool, bool) {
        (client.connect(self.redis_tls).is_ok(), client.connect(self.atoll_tls).is_ok())
    }
}

fn pki_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("atoll-tls-{}-{tag}", std::process::id()))
}

#[test]
fn tls_and_tcp_ports_serve_side_by_side() {
    let pki = Pki::new(&pki_dir("side"), "side");
    let tls_port = free_port();
    let at = start_atoll(&args(&pki.server_args(tls_port)));
    let client = Client::new(&pki.path("ca.crt"), Some((&pki.path("client.crt"), &pki.path("client.key"))), BOTH);
    let mut t = client.connect(tls_port).expect("TLS connection");
    let mut p = RawConn::connect(at.port);
    assert_eq!(t.cmd(&["SET", "k", "over-tls"]), b"+OK\r\n");
    assert_eq!(p.cmd(&[b"GET", b"k"]), b"$8\r\nover-tls\r\n");
    // A value larger than any TLS record, each way, and a pipeline of many small ones.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    t.try_cmd(&[b"SET", b"big", &big]).unwrap();
    assert_eq!(p.cmd(&[b"STRLEN", b"big"]), b":3000000\r\n");
    let got = t.try_cmd(&[b"GET", b"big"]).unwrap();
    assert_eq!(&got[got.len() - 2 - big.len()..got.len() - 2], &big[..]);
    let mut pipeline = Vec::new();
    for i in 0..5000 {
        pipeline.extend(encode(&v(&["INCRBY", "n", &i.to_string()])));
    }
    t.s.write_all(&pipeline).unwrap();
    for i in 0..5000u64 {
        assert_eq!(t.read_reply().unwrap(), format!(":{}\r\n", i * (i + 1) / 2).into_bytes());
    }
    // Pub/Sub across the two: a message published over TCP reaches a TLS subscriber.
    let mut sub = client.connect(tls_port).unwrap();
    sub.cmd(&["SUBSCRIBE", "ch"]);
    assert_eq!(p.cmd(&[b"PUBLISH", b"ch", b"hello"]), b":1\r\n");
    assert_eq!(sub.read_reply().unwrap(), b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n");
    // Plain RESP on the TLS port gets no reply (the server answers with a TLS alert and
    // closes); a TLS handshake on the plain port fails.
    let mut raw = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut back = Vec::new();
    let _ = raw.read_to_end(&mut back);
    assert!(!back.starts_with(b"+PONG"), "{}", show(&back));
    assert!(client.connect(at.port).is_err());
    // CLIENT LIST shows TLS clients as any other. The failed handshake's connection is
    // closed by the client; the server (maybe on another worker) sees that close a moment
    // later, so wait for it rather than race it. (It once never saw it on epoll: the reset
    // came in the same edge as the handshake's last bytes — see blackbox's
    // `clients_that_reset_right_after_their_last_bytes_are_let_go`.)
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list = p.cmd(&[b"CLIENT", b"LIST"]);
        let n = String::from_utf8_lossy(&list).matches("cmd=").count();
        if n == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "{n} clients: {}", show(&list));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn client_certificate_modes_match_redis() {
    let pki = Pki::new(&pki_dir("auth"), "auth");
    let pair = Pair::start(&pki, &[]);
    let ca = pki.path("ca.crt");
    let (crt, key) = (pki.path("client.crt"), pki.path("client.key"));
    // A certificate from another CA is not a client certificate of this one.
    let other = Pki::new(&pki_dir("auth-other"), "other");
    let (ocrt, okey) = (other.path("client.crt"), other.path("client.key"));
    // Fresh clients for every check: a session resumed from one made while certificates
    // were not required would skip the check (OpenSSL lets it; rustls does not resume it).
    let with = || Client::new(&ca, Some((&crt, &key)), BOTH);
    let without = || Client::new(&ca, None, BOTH);
    let stranger = || Client::new(&ca, Some((&ocrt, &okey)), BOTH);
    for (mode, expect) in [("yes", [true, false, false]), ("no", [true; 3]), ("optional", [true, true, false])] {
        pair.config_set(&["tls-auth-clients", mode]);
        for ((name, c), e) in
            [("with", with()), ("without", without()), ("stranger", stranger())].into_iter().zip(expect)
        {
            let (r, a) = pair.outcome(&c);
            assert_eq!((r, a), (e, e), "tls-auth-clients {mode}, client {name}: redis {r}, atoll {a}");
        }
    }
    pair.config_set(&["tls-auth-clients", "yes"]);
    // Debian's redis-cli, built with TLS, as a real client of both.
    for port in [pair.redis_tls, pair.atoll_tls] {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "--tls", "--cacert", &ca, "--cert", &crt, "--key", &key])
            .args(["SET", "cli", "yes"])
            .output()
            .expect("redis-cli (apt: redis-tools) is needed");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n", "redis-cli on {port}");
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "--tls", "--cacert", &ca, "GET", "cli"])
            .output()
            .unwrap();
        assert!(!String::from_utf8_lossy(&out.stdout).contains("yes"), "no certificate, no reply on {port}");
    }
}

#[test]
fn protocols_suites_and_session_resumption_match_redis() {
    let pki = Pki::new(&pki_dir("proto"), "proto");
    let pair = Pair::start(&pki, &["--tls-auth-clients", "no"]);
    let ca = pki.path("ca.crt");
    let (v12, v13) = (Client::new(&ca, None, TLS12), Client::new(&ca, None, TLS13));
    assert_eq!((pair.outcome(&v12), pair.outcome(&v13)), ((true, true), (true, true)));
    for (protocols, ok12, ok13) in [("TLSv1.2", true, false), ("TLSv1.3", false, true), ("TLSv1.2 TLSv1.3", true, true)]
    {
        pair.config_set(&["tls-protocols", protocols]);
        assert_eq!(pair.outcome(&v12), (ok12, ok12), "tls-protocols {protocols}, a TLSv1.2 client");
        assert_eq!(pair.outcome(&v13), (ok13, ok13), "tls-protocols {protocols}, a TLSv1.3 client");
    }
    // Suites: the server's list decides what a client offering one suite gets.
    // A client offering exactly these suites, in this order.
    let offering = |suites: &[rustls::CipherSuite], versions| {
        let all = rustls::crypto::ring::default_provider().cipher_suites;
        let s = suites.iter().map(|&cs| *all.iter().find(|s| s.suite() == cs).unwrap()).collect();
        Client::with_suites(&ca, None, versions, Some(s))
    };
    let only = |cs: rustls::CipherSuite, versions| offering(&[cs], versions);
    let aes128_13 = only(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256, TLS13);
    let aes256_13 = only(rustls::CipherSuite::TLS13_AES_256_GCM_SHA384, TLS13);
    pair.config_set(&["tls-ciphersuites", "TLS_AES_256_GCM_SHA384"]);
    assert_eq!((pair.outcome(&aes128_13), pair.outcome(&aes256_13)), ((false, false), (true, true)));
    pair.config_set(&["tls-ciphersuites", "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"]);
    assert_eq!(pair.outcome(&aes128_13), (true, true));
    let ecdhe128 = only(rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS12);
    let ecdhe256 = only(rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS12);
    pair.config_set(&["tls-ciphers", "DEFAULT:!ECDHE-ECDSA-AES128-GCM-SHA256"]);
    assert_eq!((pair.outcome(&ecdhe128), pair.outcome(&ecdhe256)), ((false, false), (true, true)));
    pair.config_set(&["tls-ciphers", "DEFAULT"]);
    assert_eq!(pair.outcome(&ecdhe128), (true, true));
    // tls-prefer-server-ciphers: the server's order wins over the client's.
    pair.config_set(&["tls-ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"]);
    let both12 = offering(
        &[
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ],
        TLS12,
    );
    let suite = |port| both12.connect(port).unwrap().s.conn.negotiated_cipher_suite().unwrap().suite();
    for (prefer, want) in [
        ("no", rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
        ("yes", rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ] {
        pair.config_set(&["tls-prefer-server-ciphers", prefer]);
        assert_eq!((suite(pair.redis_tls), suite(pair.atoll_tls)), (want, want), "prefer-server-ciphers {prefer}");
    }
    // Session resumption with the server-side cache, per version.
    for versions in [TLS12, TLS13] {
        for port in [pair.redis_tls, pair.atoll_tls] {
            // A client per server: its session cache is keyed by server name, the same here.
            let c = Client::new(&ca, None, versions);
            let mut first = c.connect(port).unwrap();
            assert!(!first.resumed());
            // TLSv1.3 tickets arrive after the handshake: read them with a reply.
            first.cmd(&["PING"]);
            let name = if port == pair.redis_tls { "redis" } else { "atoll" };
            assert!(c.connect(port).unwrap().resumed(), "{versions:?} session resumed by {name}");
        }
    }
    // With the cache off, Atoll has nothing to resume from (Redis's OpenSSL may still
    // resume from stateless tickets, which rustls does not issue unless asked).
    pair.config_set(&["tls-session-caching", "no"]);
    let c = Client::new(&ca, None, TLS12);
    c.connect(pair.atoll_tls).unwrap().cmd(&["PING"]);
    assert!(!c.connect(pair.atoll_tls).unwrap().resumed());
}

#[test]
fn certificates_reload_with_config_set_as_redis() {
    let dir = pki_dir("reload");
    let pki = Pki::new(&dir, "one");
    let pair = Pair::start(&pki, &["--tls-auth-clients", "no"]);
    let trusts_one = Client::new(&pki.path("ca.crt"), None, BOTH);
    let mut kept = (trusts_one.connect(pair.redis_tls).unwrap(), trusts_one.connect(pair.atoll_tls).unwrap());
    // New files from another CA, at the same paths (the server's CA file stays): CONFIG SET
    // of the same names reloads them.
    let two = Pki::new(&dir.join("two"), "two");
    for f in ["server.crt", "server.key"] {
        std::fs::copy(two.path(f), pki.path(f)).unwrap();
    }
    assert_eq!(pair.outcome(&trusts_one), (true, true), "nothing changes before CONFIG SET");
    let cert = pki.path("server.crt");
    let key = pki.path("server.key");
    assert_eq!(pair.config_set(&["tls-cert-file", &cert, "tls-key-file", &key]), b"+OK\r\n");
    let trusts_two = Client::new(&two.path("ca.crt"), None, BOTH);
    assert_eq!((pair.outcome(&trusts_one), pair.outcome(&trusts_two)), ((false, false), (true, true)));
    // Connections made before keep working.
    assert_eq!((kept.0.cmd(&["PING"]), kept.1.cmd(&["PING"])), (b"+PONG\r\n".to_vec(), b"+PONG\r\n".to_vec()));
    // A file that does not load: Redis's error, and the configuration in use stays.
    let missing = dir.join("missing.crt").to_string_lossy().into_owned();
    let err = pair.config_set(&["tls-cert-file", &missing]);
    assert!(show(&err).contains("Unable to update TLS configuration"), "{}", show(&err));
    let get = |port| RawConn::connect(port).cmd(&[b"CONFIG", b"GET", b"tls-cert-file"]);
    assert_eq!(show(&get(pair.atoll.port)), show(&get(pair.redis.port)));
    assert_eq!(pair.outcome(&trusts_two), (true, true));
    // A key that does not match the certificate is refused the same way.
    std::fs::copy(pki.path("client.key"), dir.join("wrong.key")).unwrap();
    let wrong = dir.join("wrong.key").to_string_lossy().into_owned();
    assert!(show(&pair.config_set(&["tls-key-file", &wrong])).contains("Unable to update TLS configuration"));
    // An encrypted key (PKCS#8, as `openssl pkcs8 -topk8` writes it) loads with its password.
    let enc = dir.join("server.key.enc").to_string_lossy().into_owned();
    let st = std::process::Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", &key, "-out", &enc, "-passout", "pass:1234"])
        .status()
        .expect("openssl (apt: openssl) is needed");
    assert!(st.success());
    assert!(show(&pair.config_set(&["tls-key-file", &enc])).contains("Unable to update TLS configuration"));
    assert_eq!(pair.config_set(&["tls-key-file-pass", "1234", "tls-key-file", &enc]), b"+OK\r\n");
    assert_eq!(pair.outcome(&trusts_two), (true, true));
}

/// Starts `bin` with `argv` and returns its exit code if it stops within 10 s.
fn exit_code(bin: &str, argv: &[String]) -> Option<i32> {
    let mut child = std::process::Command::new(bin)
        .args(argv)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn bad_tls_setups_stop_start_up_as_redis() {
    let pki = Pki::new(&pki_dir("bad"), "bad");
    let atoll = env!("CARGO_BIN_EXE_atoll-server").to_string();
    let redis = redis_bin();
    let setups: Vec<Vec<(&str, String)>> = vec![
        // No certificate, no key, no CA while client certificates are required, a file
        // that is not there, a protocol name that does not exist.
        vec![("--tls-key-file", pki.path("server.key")), ("--tls-ca-cert-file", pki.path("ca.crt"))],
        vec![("--tls-cert-file", pki.path("server.crt")), ("--tls-ca-cert-file", pki.path("ca.crt"))],
        vec![("--tls-cert-file", pki.path("server.crt")), ("--tls-key-file", pki.path("server.key"))],
        vec![
            ("--tls-cert-file", pki.path("nope.crt")),
            ("--tls-key-file", pki.path("server.key")),
            ("--tls-ca-cert-file", pki.path("ca.crt")),
        ],
        vec![
            ("--tls-cert-file", pki.path("server.crt")),
            ("--tls-key-file", pki.path("server.key")),
            ("--tls-ca-cert-file", pki.path("ca.crt")),
            ("--tls-protocols", "SSLv3".into()),
        ],
    ];
    for s in setups {
        let mut argv: Vec<String> = vec!["--port".into(), "0".into(), "--tls-port".into(), free_port().to_string()];
        argv.extend(["--save".into(), "".into()]);
        for (k, v) in &s {
            argv.push(k.to_string());
            argv.push(v.clone());
        }
        let (r, a) = (exit_code(&redis, &argv), exit_code(&atoll, &argv));
        assert_eq!(a, r, "{s:?}");
        assert_eq!(a, Some(1), "{s:?}");
    }
    // What rustls cannot do is refused, not ignored: TLSv1.1 only.
    let mut argv = pki.server_args(free_port());
    argv.extend(["--port".into(), "0".into(), "--tls-protocols".into(), "TLSv1.1".into()]);
    assert_eq!(exit_code(&atoll, &argv), Some(1));
}

#[test]
fn a_lua_debugging_session_runs_over_tls_as_in_redis() {
    let pki = Pki::new(&pki_dir("ldb"), "ldb");
    let pair = Pair::start(&pki, &[]);
    let client = Client::new(&pki.path("ca.crt"), Some((&pki.path("client.crt"), &pki.path("client.key"))), BOTH);
    // (Logs stay under one TLS record: Redis writes a longer one only in part.)
    let talk = |port: u16| {
        let mut t = client.connect(port).expect("TLS connection");
        let mut out = vec![
            t.cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            t.cmd(&["EVAL", "local a = 1\nlocal b = string.rep('x', 300)\nreturn a", "0"]),
            t.cmd(&["s"]),
            t.cmd(&["s"]),
            t.cmd(&["maxlen", "0"]),
            t.cmd(&["p"]),
            t.cmd(&["w"]),
        ];
        // The end of the session: its last log, the reply, then the close.
        out.push(t.cmd(&["c"]));
        out.push(t.read_reply().unwrap());
        // The end of the session: TLS's own close, then the connection's.
        out.push(show(&t.read_reply().err().unwrap_or_default().into_bytes()).into_bytes());
        out
    };
    let (r, a) = (talk(pair.redis_tls), talk(pair.atoll_tls));
    assert_eq!(a.len(), r.len());
    for (i, (a, r)) in a.iter().zip(&r).enumerate() {
        assert_eq!(show(a), show(r), "step {i}");
    }
}

/// An X.509 v1 server certificate — what `openssl x509 -req` writes without `-extfile`, common
/// in internal PKIs — is served by both, and redis-cli connects to both through it; a key that
/// is not the certificate's stops both at start-up, v1 or not.
#[test]
fn an_x509_v1_server_certificate_is_served_as_redis_serves_it() {
    let dir = pki_dir("v1");
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let openssl = |a: &[&str]| {
        let out = std::process::Command::new("openssl").args(a).output().expect("openssl (apt: openssl) is needed");
        assert!(out.status.success(), "openssl {a:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (ca_key, ca_crt) = (p("ca.key"), p("ca.crt"));
    let rsa = ["-newkey", "rsa:2048", "-nodes", "-sha256"];
    openssl(
        &[
            &["req", "-x509"],
            &rsa[..],
            &["-days", "2", "-subj", "/CN=Atoll v1 CA", "-keyout", &ca_key, "-out", &ca_crt],
        ]
        .concat(),
    );
    for who in ["server", "other"] {
        let (key, csr) = (p(&format!("{who}.key")), p(&format!("{who}.csr")));
        openssl(&[&["req"], &rsa[..], &["-subj", "/CN=localhost", "-keyout", &key, "-out", &csr]].concat());
    }
    let (csr, crt) = (p("server.csr"), p("server.crt"));
    openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_crt,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-days",
        "2",
        "-sha256",
        "-out",
        &crt,
    ]);
    let text = openssl(&["x509", "-in", &p("server.crt"), "-noout", "-text"]);
    assert!(text.contains("Version: 1 (0x0)"), "not a v1 certificate: {text}");
    let tls_args = |port: u16, key: &str| -> Vec<String> {
        [
            ("--tls-port", port.to_string()),
            ("--tls-cert-file", p("server.crt")),
            ("--tls-key-file", p(key)),
            ("--tls-ca-cert-file", p("ca.crt")),
            ("--tls-auth-clients", "no".into()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect()
    };
    let (rt, at) = (free_port(), free_port());
    let _redis = start_redis(&args(&tls_args(rt, "server.key")));
    let _atoll = start_atoll(&args(&tls_args(at, "server.key")));
    for port in [rt, at] {
        let cli = |cmd: &[&str]| {
            let out = std::process::Command::new("redis-cli")
                .args(["-p", &port.to_string(), "--tls", "--cacert", &p("ca.crt")])
                .args(cmd)
                .output()
                .expect("redis-cli (apt: redis-tools) is needed");
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        };
        assert_eq!(cli(&["SET", "v1", "served"]), "OK\n", "redis-cli on {port}");
        assert_eq!(cli(&["GET", "v1"]), "served\n", "redis-cli on {port}");
    }
    let mut wrong = vec!["--port".to_string(), "0".into(), "--save".into(), "".into()];
    wrong.extend(tls_args(free_port(), "other.key"));
    let atoll = env!("CARGO_BIN_EXE_atoll-server").to_string();
    assert_eq!(exit_code(&atoll, &wrong), exit_code(&redis_bin(), &wrong));
    assert_eq!(exit_code(&atoll, &wrong), Some(1));
}

/// One INFO field over a plain port.
fn info(port: u16, section: &str, name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(&RawConn::connect(port).cmd(&[b"INFO", section.as_bytes()])).into_owned();
    text.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.to_string()))
}

/// Replication over TLS (`tls-replication yes`), as Redis 7.2.6 makes and serves it: an Atoll
/// replica of an Atoll and of a Redis master, and a Redis replica of an Atoll master, each on
/// the master's TLS port with client certificates required. The snapshot and the stream
/// arrive (digests equal after a write load), the replica's ACKs reach the master (WAIT), and
/// the master lists the replica at its TLS port, as Redis announces it. A replica whose CA
/// does not trust the master, whose certificate the master's CA did not sign, or whose
/// certificate is for servers only (no clientAuth usage), never links — Redis's neither.
#[test]
fn replication_links_run_over_tls_as_redis_makes_them() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let pki = Pki::new(&pki_dir("repl"), "repl");
    let other = Pki::new(&pki_dir("repl-other"), "repl-other");
    let cases: [(&str, Start, &str, Start); 3] =
        [("atoll", atoll, "atoll", atoll), ("redis", redis, "atoll", atoll), ("atoll", atoll, "redis", redis)];
    for (mname, mstart, rname, rstart) in cases {
        let case = format!("{rname} replica of a {mname} master");
        let mtls = free_port();
        let mut margs = pki.node_args(mtls);
        margs.extend(["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"].map(String::from));
        let master = mstart(&args(&margs));
        let mut m = RawConn::connect(master.port);
        assert_eq!(m.cmd(&[b"DEBUG", b"POPULATE", b"5000", b"key", b"100"]), b"+OK\r\n", "{case}");
        let rtls = free_port();
        let mut rargs = pki.node_args(rtls);
        rargs.extend(
            [
                "--tls-replication",
                "yes",
                "--enable-debug-command",
                "yes",
                "--replicaof",
                "127.0.0.1",
                &mtls.to_string(),
            ]
            .map(String::from),
        );
        if rname == "atoll" && mname == "redis" {
            // The client certificate apart from the server's (`tls-client-cert-file`).
            rargs.extend(
                [
                    ("--tls-client-cert-file".to_string(), pki.path("client.crt")),
                    ("--tls-client-key-file".to_string(), pki.path("client.key")),
                ]
                .into_iter()
                .flat_map(|(k, v)| [k, v]),
            );
        }
        let replica = rstart(&args(&rargs));
        let deadline = Instant::now() + Duration::from_secs(20);
        while info(replica.port, "replication", "master_link_status").as_deref() != Some("up") {
            assert!(Instant::now() < deadline, "{case}: the link never came up");
            std::thread::sleep(Duration::from_millis(50));
        }
        // The stream: writes after the snapshot, a big value across many TLS records.
        for i in 0..2000 {
            m.cmd(&[b"INCR", format!("n{}", i % 10).as_bytes()]);
        }
        let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        m.cmd(&[b"SET", b"big", &big]);
        assert_eq!(m.cmd(&[b"WAIT", b"1", b"5000"]), b":1\r\n", "{case}: the replica's ACK");
        let mut r = RawConn::connect(replica.port);
        assert_eq!(show(&r.cmd(&[b"DEBUG", b"DIGEST"])), show(&m.cmd(&[b"DEBUG", b"DIGEST"])), "{case}");
        let slave0 = info(master.port, "replication", "slave0").unwrap();
        assert!(slave0.starts_with(&format!("ip=127.0.0.1,port={rtls},state=online")), "{case}: {slave0}");
        // Refusals: the replica does not trust the master's CA; the master does not trust the
        // replica's certificate. The link stays down (both sides log the handshake's failure).
        for (what, ca, cert) in [
            ("an untrusted master", other.path("ca.crt"), pki.path("node")),
            ("an untrusted replica", pki.path("ca.crt"), other.path("node")),
            ("a replica showing a server-only certificate", pki.path("ca.crt"), pki.path("server")),
        ] {
            let port = free_port();
            let mut bargs: Vec<String> = [
                ("--tls-port", port.to_string()),
                ("--tls-cert-file", format!("{cert}.crt")),
                ("--tls-key-file", format!("{cert}.key")),
                ("--tls-ca-cert-file", ca),
                ("--tls-replication", "yes".into()),
            ]
            .into_iter()
            .flat_map(|(k, v)| [k.to_string(), v])
            .collect();
            bargs.extend(["--replicaof", "127.0.0.1", &mtls.to_string()].map(String::from));
            let bad = rstart(&args(&bargs));
            std::thread::sleep(Duration::from_secs(3));
            assert_eq!(info(bad.port, "replication", "master_link_status").as_deref(), Some("down"), "{case}: {what}");
            assert_eq!(info(bad.port, "replication", "role").as_deref(), Some("slave"), "{case}: {what}");
        }
    }
}

/// The cluster bus over TLS (`tls-cluster yes`, with `tls-replication yes`), in a cluster of
/// Atoll and Redis 7.2.6 nodes made over TLS by Redis's `redis-cli --tls --cluster create` and
/// `add-node --cluster-slave`: Redis's bus accepts only TLS then, so the cluster forms only if
/// Atoll's links speak it both ways (handshakes with client certificates required, gossip,
/// votes). `--cluster check` is clean; an Atoll master killed is replaced by its Redis replica
/// and a Redis master by its Atoll replica, elected over TLS links, replicating over TLS, and
/// no write confirmed by WAIT is lost.
#[test]
fn a_tls_cluster_of_redis_and_atoll_nodes_forms_and_fails_over() {
    type Start = fn(&[&str]) -> ServerProc;
    let pki = Pki::new(&pki_dir("cluster"), "cluster");
    // Masters Atoll, Redis, Atoll; then a replica of the other kind for each.
    let kinds: [(&str, Start); 6] = [
        ("atoll", start_atoll),
        ("redis", start_redis),
        ("atoll", start_atoll),
        ("redis", start_redis),
        ("atoll", start_atoll),
        ("redis", start_redis),
    ];
    let mut nodes: Vec<(ServerProc, u16)> = Vec::new();
    for (_, start) in kinds {
        let tls = free_port();
        let mut a = pki.node_args(tls);
        a.extend(
            [
                "--tls-cluster",
                "yes",
                "--tls-replication",
                "yes",
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "2000",
                "--cluster-config-file",
                "nodes.conf",
                "--repl-diskless-sync-delay",
                "0",
                "--cluster-port",
                &free_port().to_string(),
            ]
            .map(String::from),
        );
        nodes.push((start(&args(&a)), tls));
    }
    let ports: Vec<u16> = nodes.iter().map(|n| n.0.port).collect();
    let tls_ports: Vec<u16> = nodes.iter().map(|n| n.1).collect();
    let cli = |a: &[String], input: Option<&str>| -> (bool, String) {
        let mut cmd = std::process::Command::new("timeout");
        cmd.arg("120").arg(Path::new(&redis_bin()).parent().unwrap().join("redis-cli"));
        cmd.args(["--tls", "--cacert", &pki.path("ca.crt"), "--cert", &pki.path("client.crt")]);
        cmd.args(["--key", &pki.path("client.key")]).args(a);
        cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        cmd.stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("redis-cli");
        child.stdin.take().unwrap().write_all(input.unwrap_or("").as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let plain = |i: usize, a: &[&str]| -> String {
        let v: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
        String::from_utf8_lossy(&RawConn::connect(ports[i]).cmd(&v)).into_owned()
    };
    let wait = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let addr = |i: usize| format!("127.0.0.1:{}", tls_ports[i]);
    let (ok, out) =
        cli(&["--cluster", "create", &addr(0), &addr(1), &addr(2), "--cluster-yes"].map(String::from), None);
    assert!(ok && out.contains("[OK] All 16384 slots covered."), "create over TLS:\n{out}");
    for r in 3..6 {
        let id = plain(r - 3, &["CLUSTER", "MYID"]);
        let id = id.lines().nth(1).unwrap().to_string();
        let (ok, out) = cli(
            &["--cluster", "add-node", &addr(r), &addr(0), "--cluster-slave", "--cluster-master-id", &id]
                .map(String::from),
            None,
        );
        assert!(ok, "add-node over TLS:\n{out}");
    }
    wait("every node ok, every replica linked over TLS", &|| {
        (0..6).all(|i| plain(i, &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
            && (3..6).all(|i| plain(i, &["INFO", "replication"]).contains("master_link_status:up"))
    });
    wait("--cluster check clean over TLS", &|| {
        let (ok, out) = cli(&["--cluster", "check", &addr(0)].map(String::from), None);
        ok && out.contains("[OK] All nodes agree about slots configuration.") && !out.contains("[ERR]")
    });
    // Clients on the TLS port see the nodes at their TLS ports, as Redis shows them.
    let (_, slots) = cli(&["-p", &tls_ports[0].to_string(), "CLUSTER", "SLOTS"].map(String::from), None);
    for port in &tls_ports[..3] {
        assert!(slots.contains(&port.to_string()), "CLUSTER SLOTS over TLS names TLS ports:\n{slots}");
    }
    // … and clients on the plain port the plain ports.
    let slots = plain(0, &["CLUSTER", "SLOTS"]);
    for port in &ports[..3] {
        assert!(slots.contains(&format!(":{port}\r\n")), "CLUSTER SLOTS over TCP names TCP ports:\n{slots}");
    }
    let sets: String = (0..200).map(|i| format!("SET k{i} {i}\n")).collect();
    let (ok, out) = cli(&["-c", "-p", &tls_ports[0].to_string()].map(String::from), Some(&sets));
    assert!(ok && out.matches("OK").count() == 200, "writes over TLS:\n{out}");
    for m in 0..3 {
        assert_eq!(plain(m, &["WAIT", "1", "5000"]), ":1\r\n", "master {m}'s replica has the writes");
    }
    // An Atoll master dies: its Redis replica (node 3) takes over; then a Redis master (node
    // 1): its Atoll replica (node 4).
    for (victim, heir) in [(0usize, 3usize), (1, 4)] {
        let _ = nodes[victim].0.child.kill();
        let _ = nodes[victim].0.child.wait();
        wait(&format!("{} replica {heir} to take over from {victim}", kinds[heir].0), &|| {
            let n = plain(heir, &["CLUSTER", "NODES"]);
            n.lines().any(|l| l.contains("myself,master"))
                && plain(heir, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
        });
    }
    let gets: String = (0..200).map(|i| format!("GET k{i}\n")).collect();
    let (ok, out) = cli(&["-c", "-p", &tls_ports[2].to_string()].map(String::from), Some(&gets));
    let got: Vec<&str> = out.lines().filter(|l| !l.is_empty() && !l.starts_with("-> Redirected")).collect();
    assert!(ok && got.len() == 200, "reads over TLS after two failovers:\n{out}");
    for (i, v) in got.iter().enumerate() {
        assert_eq!(v.trim(), i.to_string(), "k{i} after the failovers");
    }
}

/// A TLS client of a cluster whose bus is plain (`tls-cluster no`) is shown the nodes' TLS
/// ports, a TCP client their TCP ports — by the client's connection, not the bus's, as Redis's
/// getNodeClientPort decides (its `cluster-response-tls.tcl`). The same one-node cluster of
/// each kind, asked over both ports.
#[test]
fn cluster_ports_follow_the_clients_connection_as_in_redis() {
    type Start = fn(&[&str]) -> ServerProc;
    let pki = Pki::new(&pki_dir("cluster-ports"), "cluster-ports");
    for (kind, start) in [("redis", start_redis as Start), ("atoll", start_atoll as Start)] {
        let tls = free_port();
        let mut a = pki.node_args(tls);
        a.extend(
            ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--tls-cluster", "no"]
                .map(String::from),
        );
        a.extend(["--cluster-port".to_string(), free_port().to_string()]);
        let node = start(&args(&a));
        let mut c = RawConn::connect(node.port);
        assert_eq!(c.cmd(&[b"CLUSTER", b"ADDSLOTSRANGE", b"0", b"16383"]), b"+OK\r\n", "{kind}");
        for (what, port) in [("CLUSTER SLOTS", tls), ("CLUSTER NODES", tls)] {
            let out = std::process::Command::new(Path::new(&redis_bin()).parent().unwrap().join("redis-cli"))
                .args(["--tls", "--cacert", &pki.path("ca.crt"), "--cert", &pki.path("client.crt")])
                .args(["--key", &pki.path("client.key"), "-p", &tls.to_string()])
                .args(what.split(' '))
                .output()
                .expect("redis-cli");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(text.contains(&port.to_string()), "{kind}: {what} over TLS names the TLS port {port}:\n{text}");
            assert!(!text.contains(&node.port.to_string()), "{kind}: {what} over TLS names no TCP port:\n{text}");
        }
        let nodes = String::from_utf8_lossy(&c.cmd(&[b"CLUSTER", b"NODES"])).into_owned();
        assert!(nodes.contains(&format!(":{}@", node.port)), "{kind}: CLUSTER NODES over TCP:\n{nodes}");
        let slots = String::from_utf8_lossy(&c.cmd(&[b"CLUSTER", b"SLOTS"])).into_owned();
        assert!(slots.contains(&format!(":{}\r\n", node.port)), "{kind}: CLUSTER SLOTS over TCP:\n{slots}");
    }
}
