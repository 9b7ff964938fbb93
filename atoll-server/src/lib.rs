//! Atoll: a multi-core, Redis-compatible in-memory data store.
//!
//! Layers, top to bottom (DESIGN §1); each imports only the ones below it:
//! * `server` — threads, event loops, sessions (bytes in, bytes out);
//! * `commands` — the command table's rows and the commands that are not a data type's;
//! * `types` — each data type's commands (LPUSH in `types::list` …);
//! * `exec` — the execution core: command context, dispatch and `call`, the write epilogue,
//!   client state, blocking, statistics, the shared `Server` state;
//! * `persist` — RDB files and DUMP payloads in Redis's formats, fork-less snapshots;
//! * `config`, `log` — the configuration table and Redis-format logging;
//! * `engine` — the sharded keyspace and the values it stores;
//! * `protocol` — RESP parsing and reply encoding, no storage knowledge;
//! * `alloc` — the counting allocator (`used_memory`).

pub mod alloc;
pub mod cmdspec;
pub mod collate;
pub mod commands;
pub mod config;
pub mod daemons;
pub mod engine;
pub mod exec;
pub mod lockorder;
pub mod log;
pub mod persist;
pub mod protocol;
pub mod scripting;
pub mod server;
pub mod services;
pub mod types;

/// The Redis version Atoll reports (tools gate features on it; DESIGN §3).
pub const REDIS_VERSION: &str = "7.2.4";
