//! The data types' commands: one module per type (LPUSH and LPOS in `list`, HSET in `hash` …),
//! like the command half of Redis's `t_list.c`. Each type's value — its API, encodings hidden —
//! is the storage layer's (`engine::list`, `engine::hash` …), because the keyspace stores it;
//! see docs/ARCHITECTURE.md. HyperLogLog and geo are string and sorted-set values, and SORT
//! reads any of them.

pub mod geo;
pub mod hash;
pub mod hash_expiry;
pub mod hll;
pub mod list;
pub mod set;
pub mod sort;
pub mod stream;
pub mod zset;
