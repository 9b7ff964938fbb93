//! TLS settings: the `tls-*` parameters turned into the rustls configuration every new TLS
//! connection starts from (Redis's `tlsConfigure`). Building is all-or-nothing: a bad file or
//! value leaves the configuration in use untouched, as Redis's SSL_CTX swap does, so CONFIG SET
//! of a certificate that does not load changes nothing. The per-connection codec is
//! `server::tls`.
//!
//! Where rustls and OpenSSL differ, Atoll says so rather than pretend:
//! * rustls speaks TLSv1.2 and TLSv1.3 only: `tls-protocols` naming TLSv1 or TLSv1.1 is refused;
//! * its TLSv1.2 suites are the ECDHE AEAD ones: a `tls-ciphers` list that selects none of them
//!   (e.g. only `AES128-SHA256`) is refused, as OpenSSL refuses a list that selects nothing;
//! * there is no finite-field (DHE) key exchange, so `tls-dh-params-file` is checked as Redis
//!   checks it (the file must hold DH parameters) and then has nothing to configure: every
//!   handshake uses ECDHE.

use crate::config::Config;
use crate::lockorder::{rank, Mutex, RwLock};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::{NoServerSessionStorage, StoresServerSessions, WebPkiClientVerifier};
use rustls::{CipherSuite, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The configuration new TLS connections use; replaced whole by `reconfigure`.
#[derive(Default)]
pub struct TlsContext {
    current: RwLock<Option<Arc<ServerConfig>>, { rank::LEAF }>,
    /// For the connections Atoll makes (a replica's link to its master).
    client: RwLock<Option<Arc<ClientConfig>>, { rank::LEAF }>,
}

impl TlsContext {
    /// The configuration for a connection accepted now (None until TLS is configured).
    pub fn server_config(&self) -> Option<Arc<ServerConfig>> {
        self.current.read().clone()
    }

    /// The configuration for a connection made now (None until TLS is configured).
    pub fn client_config(&self) -> Option<Arc<ClientConfig>> {
        self.client.read().clone()
    }

    /// Builds the configuration from the `tls-*` parameters and puts it in use. On error
    /// (Redis's log line) the one in use stays.
    pub fn reconfigure(&self, config: &Config) -> Result<(), TlsError> {
        let (server, client) = build(config)?;
        *self.current.write() = Some(Arc::new(server));
        *self.client.write() = client.map(Arc::new);
        Ok(())
    }
}

/// Why the TLS configuration could not be built; its text is Redis's log line.
#[derive(Debug, Clone, PartialEq)]
pub enum TlsError {
    /// A setting is missing, or asks for what rustls does not do.
    Setting(String),
    /// A certificate file does not load.
    Certificate { path: String, why: String },
    /// A private key file does not load.
    Key { path: String, why: String },
    /// The CA certificates (`tls-ca-cert-file`, `tls-ca-cert-dir`) do not load.
    Roots(String),
    /// `tls-dh-params-file` does not hold DH parameters.
    DhParams(String),
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::Setting(m) | TlsError::DhParams(m) => f.write_str(m),
            TlsError::Certificate { path, why } => write!(f, "Failed to load certificate: {path}: {why}"),
            TlsError::Key { path, why } => write!(f, "Failed to load private key: {path}: {why}"),
            TlsError::Roots(why) => write!(f, "Failed to configure CA certificate(s) file/directory: {why}"),
        }
    }
}

/// A helper's reason, for the caller to place in a `TlsError`.
#[derive(Debug)]
struct Why(String);

/// True if the settings ask for TLS at all (Redis configures it only then).
pub fn wanted(config: &Config) -> bool {
    config.int(crate::config::p::TLS_PORT) != 0
        || config.flag(crate::config::p::TLS_REPLICATION)
        || config.flag(crate::config::p::TLS_CLUSTER)
}

/// The `tls-auth-clients` modes.
#[derive(Clone, Copy, PartialEq, Debug)]
enum ClientAuth {
    No,
    Yes,
    Optional,
}

fn build(config: &Config) -> Result<(ServerConfig, Option<ClientConfig>), TlsError> {
    let opt = |p: crate::config::table::Param<String>| Some(config.text(p)).filter(|v| !v.is_empty());
    let cert_file =
        opt(crate::config::p::TLS_CERT_FILE).ok_or_else(|| TlsError::Setting("No tls-cert-file configured!".into()))?;
    let key_file =
        opt(crate::config::p::TLS_KEY_FILE).ok_or_else(|| TlsError::Setting("No tls-key-file configured!".into()))?;
    let auth = match config.text(crate::config::p::TLS_AUTH_CLIENTS).as_str() {
        "no" => ClientAuth::No,
        "optional" => ClientAuth::Optional,
        _ => ClientAuth::Yes,
    };
    let (ca_file, ca_dir) = (opt(crate::config::p::TLS_CA_CERT_FILE), opt(crate::config::p::TLS_CA_CERT_DIR));
    if (auth != ClientAuth::No
        || config.flag(crate::config::p::TLS_CLUSTER)
        || config.flag(crate::config::p::TLS_REPLICATION))
        && ca_file.is_none()
        && ca_dir.is_none()
    {
        return Err(TlsError::Setting("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into()));
    }
    let versions = protocols(&config.text(crate::config::p::TLS_PROTOCOLS)).map_err(|w| TlsError::Setting(w.0))?;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = cipher_suites(
        &provider,
        &config.text(crate::config::p::TLS_CIPHERS),
        &config.text(crate::config::p::TLS_CIPHERSUITES),
    )
    .map_err(|w| TlsError::Setting(w.0))?;
    let provider = Arc::new(provider);

    let chain = load_certs(&cert_file).map_err(|w| TlsError::Certificate { path: cert_file.clone(), why: w.0 })?;
    let key = load_key(&key_file, &config.text(crate::config::p::TLS_KEY_FILE_PASS))
        .map_err(|w| TlsError::Key { path: key_file.clone(), why: w.0 })?;
    let roots = load_roots(ca_file.as_deref(), ca_dir.as_deref()).map_err(|w| TlsError::Roots(w.0))?;
    if let Some(f) = opt(crate::config::p::TLS_DH_PARAMS_FILE) {
        check_dh_params(&f)?;
    }
    let certified = Arc::new(certified_key(chain, key, &provider, &cert_file, &key_file)?);
    // The certificate Atoll shows when it connects out (a replica to its master):
    // `tls-client-cert-file` with its key if both are set, else the server's, as Redis builds
    // its client context.
    let client_cert = match (opt(crate::config::p::TLS_CLIENT_CERT_FILE), opt(crate::config::p::TLS_CLIENT_KEY_FILE)) {
        (Some(c), Some(k)) => {
            let chain = load_certs(&c).map_err(|w| TlsError::Certificate { path: c.clone(), why: w.0 })?;
            let key = load_key(&k, &config.text(crate::config::p::TLS_CLIENT_KEY_FILE_PASS))
                .map_err(|w| TlsError::Key { path: k.clone(), why: w.0 })?;
            Arc::new(certified_key(chain, key, &provider, &c, &k)?)
        }
        _ => certified.clone(),
    };
    // Without a CA (`tls-auth-clients no`, no `tls-replication`) there is nothing to check a
    // master's certificate against, and no outgoing TLS to make.
    let client = if roots.is_empty() {
        None
    } else {
        let chain_check = WebPkiServerVerifier::builder_with_provider(Arc::new(roots.clone()), provider.clone())
            .build()
            .map_err(|e| TlsError::Roots(e.to_string()))?;
        let c = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| TlsError::Setting(format!("Failed to configure ciphers: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(chain_check)))
            .with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(client_cert)));
        Some(c)
    };
    let verifier = match auth {
        ClientAuth::No => WebPkiClientVerifier::no_client_auth(),
        _ => {
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let b = if auth == ClientAuth::Optional { b.allow_unauthenticated() } else { b };
            b.build().map_err(|e| TlsError::Roots(e.to_string()))?
        }
    };
    let mut sc = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Setting(format!("Failed to configure ciphers: {e}")))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
    sc.ignore_client_order = config.flag(crate::config::p::TLS_PREFER_SERVER_CIPHERS);
    if config.flag(crate::config::p::TLS_SESSION_CACHING) {
        let size = config.int(crate::config::p::TLS_SESSION_CACHE_SIZE).max(0) as usize;
        let timeout = Duration::from_secs(config.int(crate::config::p::TLS_SESSION_CACHE_TIMEOUT).max(0) as u64);
        sc.session_storage = Arc::new(SessionCache::new(size, timeout));
    } else {
        sc.session_storage = Arc::new(NoServerSessionStorage {});
        // TLSv1.3 tickets are entries of the cache: none to hand out.
        sc.send_tls13_tickets = 0;
    }
    Ok((sc, client))
}

/// How a replica checks its master's certificate: signed by a CA it trusts, whatever names
/// it carries, as Redis's client context does (OpenSSL's SSL_VERIFY_PEER without a host
/// check): masters are often reached by an address their certificate does not name.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain first and the name last: a wrong name means the chain held.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `tls-protocols`: "" is Redis's default (TLSv1.2 and TLSv1.3).
fn protocols(v: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, Why> {
    if v.is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut out: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for tok in v.split(' ') {
        let p = match tok.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(Why(format!("{tok} is specified in tls-protocols but not supported by Atoll (rustls speaks TLSv1.2 and TLSv1.3 only).")))
            }
            _ => {
                return Err(Why(
                    "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'."
                        .into(),
                ))
            }
        };
        if !out.iter().any(|q| q.version == p.version) {
            out.push(p);
        }
    }
    Ok(out)
}

/// OpenSSL's names of the TLSv1.2 suites rustls implements.
const TLS12_NAMES: &[(&str, CipherSuite)] = &[
    ("ECDHE-ECDSA-AES128-GCM-SHA256", CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ("ECDHE-ECDSA-AES256-GCM-SHA384", CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ("ECDHE-ECDSA-CHACHA20-POLY1305", CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ("ECDHE-RSA-AES128-GCM-SHA256", CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ("ECDHE-RSA-AES256-GCM-SHA384", CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ("ECDHE-RSA-CHACHA20-POLY1305", CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
];

/// The TLSv1.3 suites by their standard names (`tls-ciphersuites`).
const TLS13_NAMES: &[(&str, CipherSuite)] = &[
    ("TLS_AES_128_GCM_SHA256", CipherSuite::TLS13_AES_128_GCM_SHA256),
    ("TLS_AES_256_GCM_SHA384", CipherSuite::TLS13_AES_256_GCM_SHA384),
    ("TLS_CHACHA20_POLY1305_SHA256", CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
];

/// The suites `tls-ciphers` (TLSv1.2, OpenSSL's cipher-list syntax) and `tls-ciphersuites`
/// (TLSv1.3, a `:` list of names) allow, in the order they give. Of the cipher-list syntax,
/// the forms Redis's own configs use are read: names, the keywords `DEFAULT`, `ALL` and `HIGH`
/// (every suite here qualifies), and `!name` / `-name` removing one. Names of suites rustls
/// does not implement select nothing, as unknown names do in OpenSSL; a list that ends up
/// selecting nothing is refused.
fn cipher_suites(p: &CryptoProvider, ciphers: &str, suites13: &str) -> Result<Vec<SupportedCipherSuite>, Why> {
    let find = |cs: CipherSuite| p.cipher_suites.iter().copied().find(|s| s.suite() == cs);
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    if suites13.is_empty() {
        out.extend(p.cipher_suites.iter().copied().filter(|s| s.version() == &rustls::version::TLS13));
    } else {
        for name in suites13.split(':').filter(|n| !n.is_empty()) {
            let Some(s) = TLS13_NAMES.iter().find(|(n, _)| *n == name).and_then(|&(_, cs)| find(cs)) else {
                return Err(Why(format!("Failed to configure ciphersuites: {suites13}")));
            };
            out.push(s);
        }
    }
    let tls12: Vec<SupportedCipherSuite> =
        p.cipher_suites.iter().copied().filter(|s| s.version() == &rustls::version::TLS12).collect();
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    if ciphers.is_empty() {
        chosen = tls12;
    } else {
        let mut removed: Vec<CipherSuite> = Vec::new();
        for tok in ciphers.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
            let (remove, name) = match tok.as_bytes()[0] {
                b'!' | b'-' => (true, &tok[1..]),
                b'+' => (false, &tok[1..]),
                _ => (false, tok),
            };
            let picked: Vec<SupportedCipherSuite> = match name {
                "DEFAULT" | "ALL" | "HIGH" => tls12.clone(),
                _ => TLS12_NAMES.iter().filter(|(n, _)| *n == name).filter_map(|&(_, cs)| find(cs)).collect(),
            };
            for s in picked {
                if remove {
                    removed.push(s.suite());
                    chosen.retain(|c| c.suite() != s.suite());
                } else if !removed.contains(&s.suite()) && !chosen.iter().any(|c| c.suite() == s.suite()) {
                    chosen.push(s);
                }
            }
        }
        if chosen.is_empty() {
            return Err(Why(format!("Failed to configure ciphers: {ciphers}")));
        }
    }
    out.extend(chosen);
    Ok(out)
}

/// The server's certificate chain with its private key, checked to belong together as
/// OpenSSL's `SSL_CTX_check_private_key` does. rustls checks through webpki, which reads X.509
/// v3 only; a v1 certificate — what `openssl x509 -req` writes without `-extfile`, common in
/// internal PKIs — is served as Redis serves it, its key checked by finding the key's
/// SubjectPublicKeyInfo in the certificate (DER encodes it one way only), with a warning.
fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
    cert_file: &str,
    key_file: &str,
) -> Result<rustls::sign::CertifiedKey, TlsError> {
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::Key { path: key_file.into(), why: e.to_string() })?;
    let ck = rustls::sign::CertifiedKey::new(chain, signing);
    let mismatch = || TlsError::Key {
        path: key_file.into(),
        why: "the private key does not match the certificate's public key".into(),
    };
    match ck.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(ck),
        Err(rustls::Error::InconsistentKeys(_)) => Err(mismatch()),
        Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o)))
            if format!("{o:?}").contains("UnsupportedCertVersion") =>
        {
            let spki = ck.key.public_key().ok_or_else(mismatch)?;
            let cert: &[u8] = ck.cert[0].as_ref();
            if !cert.windows(spki.len()).any(|w| w == spki.as_ref()) {
                return Err(mismatch());
            }
            crate::log_warning!(
                "{cert_file} is an X.509 v1 certificate: served as it is (a v3 certificate, signed with extensions, is what TLS clients expect today)"
            );
            Ok(ck)
        }
        Err(e) => Err(TlsError::Certificate { path: cert_file.into(), why: e.to_string() }),
    }
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, Why> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(&e))?;
    if certs.is_empty() {
        return Err(Why("no certificate found".into()));
    }
    Ok(certs)
}

/// A PEM private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC), or an encrypted PKCS#8 key
/// (`BEGIN ENCRYPTED PRIVATE KEY`, what `openssl rsa -aes256` writes) opened with `pass`.
fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, Why> {
    let pem = std::fs::read(path).map_err(|e| Why(crate::log::strerror(&e)))?;
    let text = String::from_utf8_lossy(&pem);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        if pass.is_empty() {
            return Err(Why("the key is encrypted and no password is configured".into()));
        }
        let (label, doc) = pkcs8::SecretDocument::from_pem(&text).map_err(|e| Why(e.to_string()))?;
        if label != "ENCRYPTED PRIVATE KEY" {
            return Err(Why(format!("unexpected PEM section {label}")));
        }
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes()).map_err(|e| Why(e.to_string()))?;
        let plain = info.decrypt(pass).map_err(|_| Why("bad decrypt (wrong password?)".into()))?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec())));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(Why(
            "legacy PEM encryption (Proc-Type) is not supported: convert the key with `openssl pkcs8 -topk8`".into(),
        ));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| pem_error(&e))
}

fn pem_error(e: &rustls_pki_types::pem::Error) -> Why {
    Why(match e {
        rustls_pki_types::pem::Error::Io(io) => crate::log::strerror(io),
        rustls_pki_types::pem::Error::NoItemsFound => "no PEM section of the expected kind found".into(),
        other => format!("{other:?}"),
    })
}

/// The CAs client certificates are checked against: every certificate of `file`, and of
/// every file in `dir` that holds PEM certificates (OpenSSL's hashed-name directory works,
/// as does any directory of PEM files).
fn load_roots(file: Option<&str>, dir: Option<&str>) -> Result<RootCertStore, Why> {
    let mut roots = RootCertStore::empty();
    let mut add = |certs: Vec<CertificateDer<'static>>| -> Result<(), Why> {
        for c in certs {
            roots.add(c).map_err(|e| Why(e.to_string()))?;
        }
        Ok(())
    };
    if let Some(f) = file {
        add(load_certs(f)?)?;
    }
    if let Some(d) = dir {
        let entries = std::fs::read_dir(d).map_err(|e| Why(crate::log::strerror(&e)))?;
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()) {
                if let Ok(certs) = load_certs(&e.path().to_string_lossy()) {
                    add(certs)?;
                }
            }
        }
    }
    Ok(roots)
}

/// `tls-dh-params-file` must name a file of DH parameters (Redis fails otherwise). They
/// configure nothing here: rustls has no DHE suites (see the module comment).
fn check_dh_params(path: &str) -> Result<(), TlsError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TlsError::DhParams(format!("Failed to load {path}: {}", crate::log::strerror(&e))))?;
    if !text.contains("-----BEGIN DH PARAMETERS-----") {
        return Err(TlsError::DhParams(format!("{path}: failed to read DH params.")));
    }
    Ok(())
}

/// The server-side session cache (`tls-session-caching`): at most `size` sessions (0: no
/// limit, as OpenSSL's), each valid for `timeout` (`tls-session-cache-timeout`). rustls's own
/// memory cache has no expiry and allocates its whole capacity up front; this one grows with
/// use and drops the oldest entry when full.
pub struct SessionCache {
    size: usize,
    timeout: Duration,
    inner: Mutex<Sessions, { rank::LEAF }>,
}

#[derive(Default)]
struct Sessions {
    map: HashMap<Vec<u8>, (Vec<u8>, Instant)>,
    /// Keys in insertion order, for dropping the oldest (may name keys already taken).
    order: VecDeque<Vec<u8>>,
}

impl SessionCache {
    pub fn new(size: usize, timeout: Duration) -> SessionCache {
        SessionCache { size, timeout, inner: Mutex::new(Sessions::default()) }
    }

    fn live(&self, entry: (Vec<u8>, Instant)) -> Option<Vec<u8>> {
        (entry.1.elapsed() < self.timeout).then_some(entry.0)
    }
}

impl std::fmt::Debug for SessionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCache").field("size", &self.size).field("timeout", &self.timeout).finish()
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut s = self.inner.lock();
        if self.size != 0 {
            while s.map.len() >= self.size {
                let Some(old) = s.order.pop_front() else { break };
                s.map.remove(&old);
            }
        }
        // Keys of taken sessions linger in `order`: compact when it is mostly those.
        if s.order.len() > 2 * s.map.len() + 64 {
            let Sessions { map, order } = &mut *s;
            order.retain(|k| map.contains_key(k));
        }
        if s.map.insert(key.clone(), (value, Instant::now())).is_none() {
            s.order.push_back(key);
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let s = self.inner.lock();
        s.map.get(key).cloned().and_then(|e| self.live(e))
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let e = self.inner.lock().map.remove(key)?;
        self.live(e)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_and_cipher_lists_read_as_redis_configs_write_them() {
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("tlsv1.2 TLSv1.3").unwrap().len(), 2);
        assert!(protocols("TLSv1.1 TLSv1.2").unwrap_err().0.contains("not supported by Atoll"));
        assert!(protocols("SSLv3").unwrap_err().0.starts_with("Invalid tls-protocols"));
        let p = rustls::crypto::ring::default_provider();
        let all = cipher_suites(&p, "", "").unwrap();
        assert_eq!(all.len(), p.cipher_suites.len());
        // DEFAULT minus one; an OpenSSL-only name selects nothing; nothing at all is refused.
        let s = cipher_suites(&p, "DEFAULT:!ECDHE-RSA-AES128-GCM-SHA256", "TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(s.len(), 1 + 5);
        assert!(!s.iter().any(|c| c.suite() == CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
        let one = cipher_suites(&p, "AES128-SHA256:ECDHE-RSA-AES256-GCM-SHA384", "").unwrap();
        assert_eq!(one.last().unwrap().suite(), CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384);
        assert!(cipher_suites(&p, "AES128-SHA256", "").is_err());
        assert!(cipher_suites(&p, "", "TLS_NOPE").is_err());
    }

    #[test]
    fn session_cache_honours_size_and_timeout() {
        let c = SessionCache::new(2, Duration::from_secs(300));
        for k in [b"a", b"b", b"c"] {
            c.put(k.to_vec(), k.to_vec());
        }
        assert_eq!(c.get(b"a"), None);
        assert_eq!(c.get(b"c"), Some(b"c".to_vec()));
        assert_eq!(c.take(b"b"), Some(b"b".to_vec()));
        assert_eq!(c.take(b"b"), None);
        let expired = SessionCache::new(0, Duration::ZERO);
        expired.put(b"k".to_vec(), b"v".to_vec());
        assert_eq!(expired.get(b"k"), None);
    }
}
