//! The server's I/O: worker threads and their event loops (`net`, `evloop`, `uring`), the
//! per-connection session (`session`) that turns bytes into commands for `exec`, and the active
//! expiry cycle the workers run.

pub mod debugging;
pub mod evloop;
pub mod expire;
pub mod http;
pub mod net;
pub mod rehash;
pub mod session;
pub mod tls;
pub mod uring;
pub mod worker;

pub use crate::exec::{unix_ms, unix_us, Clock, Server, ShutdownMode};
