//! Data types other than strings: one module per type, each holding its type API (encoding
//! hidden behind it) followed by its commands, like Redis's `t_list.c`.

pub mod geo;
pub mod hash;
pub mod hll;
pub mod list;
pub mod packed;
pub mod set;
pub mod sort;
pub mod stream;
pub mod zset;
