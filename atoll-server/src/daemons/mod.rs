//! Daemons: the threads that drive the call path on their own schedule rather than a
//! client's — the RDB scheduler, the watchdog. They sit above `exec` and may take the whole
//! server; the state they keep lives in `services`.

pub mod aof;
pub mod persistence;
pub mod replica_link;
pub mod replication;
pub mod scheduler;
pub mod watchdog;
