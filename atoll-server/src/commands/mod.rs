//! Commands: the rows of the command table ([`table`]) and one module per family of commands
//! that is not a data type's (keys, strings, bitmaps, connection, server, transactions). The
//! data types' commands live in `types`; what runs them all is `exec`.

pub mod acl;
pub mod admin;
pub mod bitmap;
pub mod cluster;
pub mod connection;
pub mod debug;
pub mod hotkeys;
pub mod info;
pub mod keys;
pub mod latency;
pub mod memory;
pub mod metrics;
pub mod multi;
pub mod persist;
pub mod pubsub;
pub mod server;
pub mod string;
pub mod table;
