//! Daemons: the threads that drive the call path on their own schedule rather than a
//! client's — the RDB scheduler, the watchdog. They sit above `exec` and may take the whole
//! server; the state they keep lives in `services`.

pub mod aof;
pub mod cluster_bus;
pub mod persistence;
pub mod replica_link;
pub mod replication;
pub mod scheduler;
pub mod slot_export;
pub mod upstream_conn;
pub mod watchdog;

use crate::exec;

/// Who ran a command that came from the log of writes and replied with an error.
pub enum Replayer {
    /// The master's stream, on this replica.
    Master,
    /// The AOF, loading.
    Aof,
}

/// A command from the master's stream or the AOF answered with an error: the data may diverge
/// from here. Logged as Redis logs it; with `propagation-error-behavior panic` (or
/// `panic-on-replicas`, for a read-only replica's stream) the server stops, as Redis's
/// `afterErrorReply` panics.
#[cold]
pub fn replay_error(srv: &exec::Server, who: Replayer, args: &[&[u8]], reply: &[u8]) {
    // Redis logs what the command passed: most errors without their default `ERR ` code, the
    // shared ones (WRONGTYPE …) whole, dash included.
    let end = reply.iter().position(|&c| c == b'\r').unwrap_or(reply.len()).min(4097);
    let line = &reply[..end];
    let text = String::from_utf8_lossy(line.strip_prefix(b"-ERR ").unwrap_or(line));
    let name = match srv.table.lookup(args[0]) {
        Some(_) => String::from_utf8_lossy(args[0]).to_lowercase(),
        None => "<unknown>".into(),
    };
    let (from, to) = match who {
        Replayer::Master => ("replica", "master"),
        Replayer::Aof => ("server", "AOF-loading-client"),
    };
    crate::log_warning!(
        "== CRITICAL == This {from} is sending an error to its {to}: '{text}' after processing the command '{name}'"
    );
    let behavior = srv.config.text(crate::config::p::PROPAGATION_ERROR_BEHAVIOR);
    let panics = match who {
        Replayer::Master => {
            srv.config.flag(crate::config::p::REPLICA_READ_ONLY)
                && (behavior == "panic" || behavior == "panic-on-replicas")
        }
        Replayer::Aof => behavior == "panic",
    };
    if panics {
        let why = format!("This {from} panicked sending an error to its {to} after processing the command '{name}'");
        crate::log_warning!("Guru Meditation: {why}");
        crate::log::crash(&why);
    }
}
