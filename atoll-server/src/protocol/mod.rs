//! The wire protocol: request parsing and reply encoding. Knows nothing of storage.
pub mod parser;
pub mod reply;
pub mod value;

pub use parser::{parse_i64, Limits, Parsed, Parser};
pub use reply::{fmt_double, Proto, Reply};
