//! Atoll: a multi-core, Redis-compatible in-memory data store.
//!
//! Layers, top to bottom (DESIGN §1): `server` (threads, event loops, sessions), `protocol`
//! (RESP parsing and reply encoding, no storage knowledge), `commands` (the command table and
//! one module per family), `engine` (the sharded keyspace and value types), `config`.

pub mod commands;
pub mod config;
pub mod engine;
pub mod protocol;
pub mod server;
pub mod types;

/// The Redis version Atoll reports (tools gate features on it; DESIGN §3).
pub const REDIS_VERSION: &str = "7.2.4";
