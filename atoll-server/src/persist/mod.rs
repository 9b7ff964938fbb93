//! Persistence in Redis's own formats: DUMP/RESTORE payloads and RDB files (`rdbfile`).
//! The value codec itself is the storage layer's (`engine::rdb`); this layer frames it, reads
//! the thresholds it needs from the configuration, and walks the keyspace.

pub mod aof;
pub mod bigvalue;
pub mod child;
pub mod rdbfile;
pub mod transfer;

use crate::config::Config;
use crate::engine::rdb::{self, load::LoadOpts, save::SaveOpts, Input, RdbError, CRC64, RDB_VERSION};
use crate::engine::Value;
use std::sync::atomic::Ordering;

/// Why loading or saving failed. Its text (`Display`) is what the log and the replies say, in
/// Redis's words where Redis has some; the kind says what a caller may do about it.
#[derive(Debug)]
pub enum PersistError {
    /// Reading or writing a file, directory or socket failed.
    Io(std::io::Error),
    /// The data breaks its format (RDB, AOF, manifest): what was wrong, and where.
    Corrupt(String),
    /// Well-formed data this server does not load (module data, a newer format).
    Unsupported(String),
    /// Sound data that was refused: a duplicated key, a database past `databases`, a function
    /// library or a logged command that fails, a setting that forbids the step.
    Refused(String),
    /// Another snapshot is being written (SAVE while a BGSAVE runs): Redis's reply for it.
    Running,
}

/// Redis's reply when a snapshot is asked for while one is being written.
pub const ERR_SNAPSHOT_RUNNING: &str = "ERR Background save already in progress";

impl PersistError {
    /// The same kind of error, its text rewritten by `f` (a note of which file, say).
    pub fn map_text(self, f: impl FnOnce(String) -> String) -> PersistError {
        match self {
            PersistError::Io(e) => PersistError::Io(std::io::Error::new(e.kind(), f(e.to_string()))),
            PersistError::Corrupt(m) => PersistError::Corrupt(f(m)),
            PersistError::Unsupported(m) => PersistError::Unsupported(f(m)),
            PersistError::Refused(m) => PersistError::Refused(f(m)),
            PersistError::Running => PersistError::Running,
        }
    }

    /// An I/O error, its text saying what was being done (Redis's words for the step).
    pub fn io(e: std::io::Error, text: String) -> PersistError {
        PersistError::Io(std::io::Error::new(e.kind(), text))
    }

    /// The same error, saying where in the stream it was found.
    pub fn at(self, offset: u64) -> PersistError {
        match self {
            PersistError::Io(e) => PersistError::Corrupt(format!("{e} (at offset {offset})")),
            PersistError::Corrupt(m) => PersistError::Corrupt(format!("{m} (at offset {offset})")),
            PersistError::Unsupported(m) => PersistError::Unsupported(format!("{m} (at offset {offset})")),
            PersistError::Refused(m) => PersistError::Refused(format!("{m} (at offset {offset})")),
            PersistError::Running => PersistError::Running,
        }
    }
}

impl std::fmt::Display for PersistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PersistError::Io(e) => write!(f, "{e}"),
            PersistError::Corrupt(m) | PersistError::Unsupported(m) | PersistError::Refused(m) => f.write_str(m),
            PersistError::Running => f.write_str(ERR_SNAPSHOT_RUNNING),
        }
    }
}

impl std::error::Error for PersistError {}

/// The first error of several threads is kept and handed on (a parallel load's).
impl Clone for PersistError {
    fn clone(&self) -> Self {
        match self {
            PersistError::Io(e) => PersistError::Io(std::io::Error::new(e.kind(), e.to_string())),
            PersistError::Corrupt(m) => PersistError::Corrupt(m.clone()),
            PersistError::Unsupported(m) => PersistError::Unsupported(m.clone()),
            PersistError::Refused(m) => PersistError::Refused(m.clone()),
            PersistError::Running => PersistError::Running,
        }
    }
}

impl From<std::io::Error> for PersistError {
    fn from(e: std::io::Error) -> Self {
        PersistError::Io(e)
    }
}

/// A value or record that does not decode.
impl From<RdbError> for PersistError {
    fn from(e: RdbError) -> Self {
        PersistError::Corrupt(e.0)
    }
}

/// Saving options from the configuration.
pub fn save_opts(c: &Config) -> SaveOpts {
    SaveOpts {
        compress: c.flag(crate::config::p::RDBCOMPRESSION),
        list_fill: c.hot.list_max_listpack_size.load(Ordering::Relaxed),
        key_delay_us: c.text(crate::config::p::RDB_KEY_SAVE_DELAY).parse().unwrap_or(0),
    }
}

/// The encoding thresholds values are converted by on load.
pub fn load_opts(c: &Config) -> LoadOpts {
    let h = &c.hot;
    let r = |a: &std::sync::atomic::AtomicUsize| a.load(Ordering::Relaxed);
    LoadOpts {
        list_fill: h.list_max_listpack_size.load(Ordering::Relaxed),
        hash: crate::engine::hash::Limits {
            max_entries: r(&h.hash_max_listpack_entries),
            max_value: r(&h.hash_max_listpack_value),
        },
        set: crate::engine::set::SetLimits {
            intset_entries: r(&h.set_max_intset_entries).min(1 << 30),
            listpack_entries: r(&h.set_max_listpack_entries),
            listpack_value: r(&h.set_max_listpack_value),
        },
        zset: crate::engine::zset::ZLimits {
            entries: r(&h.zset_max_listpack_entries),
            value: r(&h.zset_max_listpack_value),
        },
        any_version: c.text(crate::config::p::RDB_VERSION_CHECK) == "relaxed",
        // Files and the replication stream are checked deeply only with `yes` (`clients`
        // spares them, as Redis's loading does); RESTORE decides for itself (`restore_opts`).
        deep: c.text(crate::config::p::SANITIZE_DUMP_PAYLOAD) == "yes",
        keep_expired: 0,
    }
}

/// RESTORE's options: `sanitize-dump-payload clients` checks a normal client's payload
/// deeply, but not one from the master, the AOF being replayed, or a user with the
/// `skip-sanitize-payload` flag (Redis's rule).
pub fn restore_opts(c: &Config, trusted: bool) -> LoadOpts {
    let mut o = load_opts(c);
    if c.text(crate::config::p::SANITIZE_DUMP_PAYLOAD) == "clients" {
        o.deep = !trusted;
    }
    o
}

/// Logs what a value decoded without deep checks let through (`rdb::load::take_repairs`),
/// naming the key and where it came from.
pub fn log_repairs(key: &[u8], from: &str) {
    for r in rdb::load::take_repairs() {
        crate::log_warning!(
            "{from} of key '{}': {r} (sanitize-dump-payload does not ask for deep checks here)",
            String::from_utf8_lossy(key)
        );
    }
}

/// A DUMP payload: the value's RDB type and body, the RDB version (2 bytes, little-endian)
/// and a CRC-64 of all that (8 bytes, little-endian).
pub fn dump(v: &Value, o: &SaveOpts) -> Vec<u8> {
    let mut out = vec![rdb::save::type_byte(v)];
    rdb::save::value(&mut out, v, o);
    // Field deadlines need Valkey's version: Redis 7.2 refuses the payload rather than
    // misreading it, Valkey 9 restores it whole.
    let fields = matches!(v, Value::Hash(h) if h.has_ttls());
    let version = if fields { rdb::RDB_VERSION_VALKEY } else { RDB_VERSION };
    out.extend_from_slice(&version.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a RESTORE payload was refused, with Redis's reply for each case.
#[derive(Debug, PartialEq)]
pub enum PayloadError {
    /// Footer: a newer RDB version or a checksum mismatch.
    VersionOrChecksum,
    /// The body does not decode (or decodes to an empty value).
    BadData(RdbError),
}

impl PayloadError {
    pub fn reply(&self) -> &'static str {
        match self {
            PayloadError::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            PayloadError::BadData(_) => "ERR Bad data format",
        }
    }
}

/// Decodes a DUMP payload (Redis's `verifyDumpPayload` then `rdbLoadObject`): the footer is
/// checked before the body is read, and the body must be used up exactly.
/// `skip_crc`: DEBUG SET-SKIP-CHECKSUM-VALIDATION (the version is still checked).
pub fn restore(payload: &[u8], o: &LoadOpts, skip_crc: bool) -> Result<Value, PayloadError> {
    if payload.len() < 10 {
        return Err(PayloadError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if !rdb::version_known(version) && !o.any_version {
        return Err(PayloadError::VersionOrChecksum);
    }
    let crc = u64::from_le_bytes(footer[2..].try_into().unwrap());
    if !skip_crc && CRC64.checksum(&payload[..payload.len() - 8]) != crc {
        return Err(PayloadError::VersionOrChecksum);
    }
    let Some((&t, rest)) = body.split_first() else {
        return Err(PayloadError::BadData(RdbError("empty payload".into())));
    };
    if !rdb::load::is_value_type(t) {
        return Err(PayloadError::BadData(RdbError(format!("not a value type: {t}"))));
    }
    let mut inp = Input::new(rest, false);
    let v = rdb::load::value(t, &mut inp, o).map_err(PayloadError::BadData)?;
    if !inp.into_inner().is_empty() {
        return Err(PayloadError::BadData(RdbError("trailing bytes after the value".into())));
    }
    v.ok_or_else(|| PayloadError::BadData(RdbError("empty value".into())))
}

/// FUNCTION DUMP's payload: each library's code as an RDB `FUNCTION2` record, then the RDB
/// version and a CRC-64, like a DUMP payload.
pub fn dump_functions<'a>(codes: impl Iterator<Item = &'a [u8]>, o: &SaveOpts) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(rdb::OP_FUNCTION2);
        rdb::put_str(&mut out, code, o.compress);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes of a FUNCTION RESTORE payload, or Redis's error text.
pub fn restore_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    if payload.len() < 10 {
        return Err("DUMP payload version or checksum are wrong");
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().unwrap());
    if version > RDB_VERSION || CRC64.checksum(&payload[..payload.len() - 8]) != crc {
        return Err("DUMP payload version or checksum are wrong");
    }
    let mut rest = body;
    let mut codes = Vec::new();
    while let Some((&t, after)) = rest.split_first() {
        match t {
            rdb::OP_FUNCTION_PRE_GA => return Err("Pre-GA function format not supported"),
            rdb::OP_FUNCTION2 => {}
            _ => return Err("given type is not a function"),
        }
        let mut inp = Input::new(after, false);
        codes.push(inp.string().map_err(|_| "failed loading the given functions payload")?);
        rest = inp.into_inner();
    }
    Ok(codes)
}
