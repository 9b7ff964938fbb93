//! Stored values. Each data type has its own module under `types/`; this enum is the one place
//! that knows them all. Aggregates are boxed so the enum stays 24 bytes.

use crate::types::{hash::Hash, list::List, set::Set, stream::Stream, zset::ZSet};

/// Redis creates an `embstr` (object and bytes in one allocation) for strings up to 44 bytes.
pub const EMBSTR_MAX: usize = 44;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string set whole (SET, MSET …): `embstr` or `raw` by length, as Redis reports.
    Str(Box<[u8]>),
    /// A string that was modified in place (APPEND, SETRANGE, SETBIT): always `raw`, with
    /// spare capacity so repeated appends are amortised O(1).
    Raw(Vec<u8>),
    /// A string that is a canonical 64-bit integer (`int` encoding).
    Int(i64),
    List(Box<List>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

/// A key's value plus its access clock (seconds since start, for OBJECT IDLETIME).
#[derive(Debug, Clone)]
pub struct Obj {
    pub val: Value,
    pub lru: u32,
}

impl Value {
    /// Builds a string value the way Redis's `tryObjectEncoding` would store it.
    pub fn from_bytes(b: &[u8]) -> Value {
        if b.len() <= 20 {
            if let Some(i) = crate::protocol::parse_i64(b) {
                return Value::Int(i);
            }
        }
        Value::Str(b.into())
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Raw(_) | Value::Int(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Str(b) if b.len() <= EMBSTR_MAX => "embstr",
            Value::Str(_) | Value::Raw(_) => "raw",
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Value::Str(_) | Value::Raw(_) | Value::Int(_))
    }

    /// The string's bytes (integers rendered into `buf`). None for non-string types.
    pub fn as_bytes<'a>(&'a self, buf: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
        match self {
            Value::Str(b) => Some(b),
            Value::Raw(v) => Some(v),
            Value::Int(i) => Some(buf.format(*i).as_bytes()),
            _ => None,
        }
    }

    /// The string's bytes as an owned vector (for in-place modification).
    pub fn to_vec(&self) -> Option<Vec<u8>> {
        let mut b = itoa::Buffer::new();
        self.as_bytes(&mut b).map(|s| s.to_vec())
    }

    /// Takes the string out as a growable buffer, converting `Str`/`Int` to `Raw` in place.
    pub fn make_raw(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            Value::Raw(v) => Some(v),
            Value::Str(_) | Value::Int(_) => {
                let v = self.to_vec()?;
                *self = Value::Raw(v);
                match self {
                    Value::Raw(v) => Some(v),
                    _ => unreachable!(),
                }
            }
            _ => None,
        }
    }

    pub fn str_len(&self) -> Option<usize> {
        match self {
            Value::Str(b) => Some(b.len()),
            Value::Raw(v) => Some(v.len()),
            Value::Int(i) => Some(itoa::Buffer::new().format(*i).len()),
            _ => None,
        }
    }

    /// Approximate heap bytes, for memory accounting.
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(b) => b.len(),
            Value::Raw(v) => v.capacity(),
            Value::Int(_) => 0,
            // Each type module will report its own size with MEMORY USAGE.
            _ => 0,
        }
    }
}
