//! The command facts: what each command is (arity, flags, ACL categories, key specs, docs),
//! from Redis's own command JSON, and where its keys are in its arguments. Below the call path
//! (`exec`), which supplies what runs each command; above `protocol` only.

pub mod keyspec;
pub mod table;

pub use table::{category_bit, flags, AclKeys, Channels, Command, CommandTable, Row, CATEGORIES};

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[inline]
pub fn eq_ic(a: &[u8], kw: &str) -> bool {
    a.eq_ignore_ascii_case(kw.as_bytes())
}
