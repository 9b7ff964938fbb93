//! Services: state a subsystem owns, with the narrow API the call path uses. Nothing here
//! knows the whole server (`.ci/run` fails when a file in this folder names the server's
//! struct), so each service can be read, tested and locked on its own.

pub mod acl;
pub mod clients;
pub mod clock;
pub mod cluster;
pub mod commandlog;
pub mod effects;
pub mod evict;
pub mod freeze;
pub mod gates;
pub mod hotkeys;
pub mod latency;
pub mod lazyfree;
pub mod migrate;
pub mod notify;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripts;

pub mod stats;
pub mod tls;
pub mod tracking;
pub mod watchdog;
