//! Stored values. Each data type has its own module beside this one (`list`, `hash` …); this
//! enum is the one place that knows them all. Aggregates are boxed so the enum stays 40 bytes, except hashes, sets
//! and sorted sets, which are small enough (a packed buffer, or their big encoding boxed) to
//! sit inline and save an allocation.

use super::{hash::Hash, list::List, set::Set, stream::Stream, zset::ZSet};

/// Redis creates an `embstr` (object and bytes in one allocation) for strings up to 44 bytes.
pub const EMBSTR_MAX: usize = 44;
/// Strings up to this length live inside the value itself (and so inside the key's dict node):
/// no allocation of their own and no extra cache miss to read them. 38 makes `Value` 40 bytes
/// and a key's node 80 — one jemalloc size class for key, object and a typical small value.
pub const EMB_INLINE: usize = 38;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A short string set whole, stored inline (`embstr`).
    Emb {
        len: u8,
        buf: [u8; EMB_INLINE],
    },
    /// A string set whole (SET, MSET …): `embstr` or `raw` by length, as Redis reports.
    Str(Box<[u8]>),
    /// A string that was modified in place (APPEND, SETRANGE, SETBIT): always `raw`, with
    /// spare capacity so repeated appends are amortised O(1).
    Raw(Vec<u8>),
    /// A string that is a canonical 64-bit integer (`int` encoding).
    Int(i64),
    List(Box<List>),
    Hash(Hash),
    Set(Set),
    ZSet(ZSet),
    Stream(Box<Stream>),
}

/// An aggregate type's value as [`Value`] holds it, for the typed lookups
/// (`KsView::read::<List>`, `KsView::write::<Hash>` …): Some when `v` is of this type.
pub trait Aggregate {
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
}

macro_rules! aggregate {
    ($($t:ty => $variant:ident),*) => {$(
        impl Aggregate for $t {
            #[inline]
            fn of_mut(v: &mut Value) -> Option<&mut Self> {
                match v {
                    Value::$variant(x) => {
                        // A boxed variant (List, Stream) derefs to its value here.
                        let x: &mut Self = x;
                        Some(x)
                    }
                    _ => None,
                }
            }
        }
    )*};
}

aggregate!(List => List, Hash => Hash, Set => Set, ZSet => ZSet, Stream => Stream);

/// Where the access clock starts: seconds since start are counted from here, so a key can be
/// given an idle time longer than the server has been up (RESTORE … IDLETIME, RDB `IDLE`).
/// 2^22 s is 48 days; the 32-bit clock then lasts 130 years.
pub const LRU_BASE: u32 = 1 << 22;

/// A key's value plus its access clock (`LRU_BASE` + seconds since start, for OBJECT IDLETIME).
#[derive(Debug, Clone)]
pub struct Obj {
    pub val: Value,
    pub lru: u32,
}

impl Value {
    /// About how many allocations freeing this value takes (Redis's `lazyfreeGetFreeEffort`,
    /// with the same encodings counting as one block). Atoll's quicklist is one allocation
    /// per element, so its effort is its length where Redis counts quicklist nodes.
    pub fn free_effort(&self) -> usize {
        match self {
            Value::List(l) if l.encoding() == "quicklist" => l.len(),
            Value::Hash(h) if h.encoding() == "hashtable" => h.len(),
            Value::Set(s) if s.encoding() == "hashtable" => s.len(),
            Value::ZSet(z) if z.encoding() == "skiplist" => z.len(),
            Value::Stream(s) => s.free_effort(),
            _ => 1,
        }
    }

    /// Builds a string value the way Redis's `tryObjectEncoding` would store it.
    pub fn from_bytes(b: &[u8]) -> Value {
        if b.len() <= 20 {
            if let Some(i) = crate::protocol::parse_i64(b) {
                return Value::Int(i);
            }
        }
        Value::from_text(b)
    }

    /// A string value holding exactly these bytes (never int-encoded).
    pub fn from_text(b: &[u8]) -> Value {
        if b.len() <= EMB_INLINE {
            let mut buf = [0u8; EMB_INLINE];
            buf[..b.len()].copy_from_slice(b);
            Value::Emb { len: b.len() as u8, buf }
        } else {
            Value::Str(b.into())
        }
    }

    /// The bytes of a string stored as text (not int-encoded); None otherwise.
    pub fn text_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Emb { len, buf } => Some(&buf[..*len as usize]),
            Value::Str(b) => Some(b),
            Value::Raw(v) => Some(v),
            _ => None,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Emb { .. } | Value::Str(_) | Value::Raw(_) | Value::Int(_) => "string",
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
            Value::Emb { .. } => "embstr",
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
        matches!(self, Value::Emb { .. } | Value::Str(_) | Value::Raw(_) | Value::Int(_))
    }

    /// The string's bytes (integers rendered into `buf`). None for non-string types.
    pub fn as_bytes<'a>(&'a self, buf: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
        match self {
            Value::Emb { len, buf: b } => Some(&b[..*len as usize]),
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
            Value::Emb { .. } | Value::Str(_) | Value::Int(_) => {
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
            Value::Emb { len, .. } => Some(*len as usize),
            Value::Str(b) => Some(b.len()),
            Value::Raw(v) => Some(v.len()),
            Value::Int(i) => Some(itoa::Buffer::new().format(*i).len()),
            _ => None,
        }
    }

    /// What the value allocates in the heap (`engine::footprint`; a short string or an
    /// integer lives inside its key's node and allocates nothing).
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::cls;
        match self {
            Value::Emb { .. } | Value::Int(_) => 0,
            Value::Str(b) => cls(b.len()),
            Value::Raw(v) => cls(v.capacity()),
            Value::List(l) => l.footprint(samples),
            Value::Hash(h) => h.footprint(samples),
            Value::Set(s) => s.footprint(samples),
            Value::ZSet(z) => z.footprint(samples),
            Value::Stream(s) => s.footprint(samples),
        }
    }
}
