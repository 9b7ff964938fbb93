//! Sets (Redis's `t_set.c`): the set type API, then the set commands.
//!
//! Three encodings, as Redis 7.2 reports them in OBJECT ENCODING:
//! * `intset`: a sorted `i64` array while every member is a canonical integer and there are at
//!   most `set-max-intset-entries` of them;
//! * `listpack`: the members packed into one byte buffer in insertion order (7.2), searched
//!   linearly, while there are at most `set-max-listpack-entries` members of at most
//!   `set-max-listpack-value` bytes;
//! * `hashtable`: our [`Dict`], with SCAN cursors and random sampling, beyond that.
//!
//! A set never converts back to a smaller encoding, like Redis.
//!
//! Commands reading several keys at once use [`Loaned`], which moves the values out of the
//! keyspace for the duration of the command (the command holds the shard locks, so nobody can
//! observe it) instead of copying them.

use crate::commands::{eq_ic, parse_int, CmdError, CmdResult, Ctx, KsView};
use crate::engine::dict::Dict;
use crate::engine::glob::glob_match;
use crate::engine::Value;
use crate::types::packed::{get_str, push_str, put_len, Packed, Slot, Walk, LEN_MAX};
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

// ---------------------------------------------------------------------------------------------
// Set type API
// ---------------------------------------------------------------------------------------------

/// The encoding thresholds, read once per command from the hot config.
#[derive(Clone, Copy, Debug)]
pub struct SetLimits {
    pub intset_entries: usize,
    pub listpack_entries: usize,
    pub listpack_value: usize,
}

impl SetLimits {
    pub fn from_ctx(ctx: &Ctx) -> SetLimits {
        let h = &ctx.srv.config.hot;
        SetLimits {
            // Redis caps the intset at 2^30 entries whatever the configuration says.
            intset_entries: h.set_max_intset_entries.load(Ordering::Relaxed).min(1 << 30),
            listpack_entries: h.set_max_listpack_entries.load(Ordering::Relaxed),
            listpack_value: h.set_max_listpack_value.load(Ordering::Relaxed),
        }
    }
}

/// A `Dict<()>` with the value semantics `Set` derives (Dict itself is not Clone/Eq).
pub struct Table(pub Dict<()>);

impl Clone for Table {
    fn clone(&self) -> Self {
        let mut d = Dict::new();
        self.0.for_each(|k, _| d.insert_new_slice(k, ()));
        Table(d)
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        let mut same = self.0.len() == other.0.len();
        if same {
            self.0.for_each(|k, _| same = same && other.0.contains_key(k));
        }
        same
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({} members)", self.0.len())
    }
}

/// The members of a `listpack`-encoded set, like Redis's listpack: each member with its length
/// prefix, in insertion order, in one allocation. Five 9-byte members take 50 bytes, where a
/// vector of boxed members took an 80-byte array plus five small allocations.
#[derive(Debug, Clone, Default, PartialEq)]
struct Members(Packed);

impl Members {
    fn iter(&self) -> Walk<'_, &[u8]> {
        self.0.walk(get_str)
    }

    fn find(&self, m: &[u8]) -> Option<Slot<&[u8]>> {
        self.iter().find(|e| e.item == m)
    }

    /// Appends a member known to be absent.
    fn push(&mut self, m: &[u8]) {
        let mut l = [0u8; LEN_MAX];
        self.0.push(&[put_len(m.len(), &mut l), m]);
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        let span = self.find(m).map(|e| (e.start, e.end));
        self.0.delete_found(span)
    }

    /// Removes and returns the member at `index` (< len); later members keep their order.
    fn take(&mut self, index: usize) -> Option<Vec<u8>> {
        let (start, end, m) = self.iter().nth(index).map(|e| (e.start, e.end, e.item.to_vec()))?;
        self.0.delete(start, end, 1);
        Some(m)
    }

    /// Removes `count` (< len) distinct random members in one pass and returns them.
    fn take_random<R: Rng>(&mut self, count: usize, rng: &mut R) -> Vec<Vec<u8>> {
        let len = self.0.len();
        let mut picked = vec![false; len];
        for i in rand::seq::index::sample(rng, len, count) {
            picked[i] = true;
        }
        let mut out = Vec::with_capacity(count);
        let mut kept = Vec::with_capacity(self.0.bytes().len());
        for (e, pick) in self.iter().zip(picked) {
            if pick {
                out.push(e.item.to_vec());
            } else {
                kept.extend_from_slice(&self.0.bytes()[e.start..e.end]);
            }
        }
        *self = Members(Packed::from_vec(kept, len - out.len()));
        out.shuffle(rng);
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Repr {
    /// Sorted, distinct integers, allocated to size (no growth slack: intsets are often many
    /// small values, and Redis's intset reallocates on every change too).
    Ints(Box<[i64]>),
    /// Distinct members in insertion order.
    Pack(Members),
    /// Boxed so `Set` stays small enough to sit inside `Value` unboxed.
    Table(Box<Table>),
}

/// A set value.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    repr: Repr,
}

/// Inserts `i` at `pos` of a tight integer array (one realloc, in place when it can be).
fn ints_insert(v: &mut Box<[i64]>, pos: usize, i: i64) {
    let mut w = std::mem::take(v).into_vec();
    w.reserve_exact(1);
    w.insert(pos, i);
    *v = w.into_boxed_slice();
}

/// Removes and returns the integer at `pos`, shrinking the allocation to fit.
fn ints_remove(v: &mut Box<[i64]>, pos: usize) -> i64 {
    let mut w = std::mem::take(v).into_vec();
    let i = w.remove(pos);
    *v = w.into_boxed_slice();
    i
}

/// Number of characters of `v` in decimal, sign included (Redis's `sdigits10`).
fn digits10(v: i64) -> usize {
    itoa::Buffer::new().format(v).len()
}

impl Default for Set {
    fn default() -> Self {
        Set::new_intset()
    }
}

impl Set {
    /// An empty `intset` (what Redis's SINTERSTORE/SUNIONSTORE start from).
    pub fn new_intset() -> Set {
        Set { repr: Repr::Ints(Box::default()) }
    }

    /// Redis's `setTypeCreate`: the encoding for a set about to receive `size_hint` members,
    /// the first of which is `first`.
    pub fn create(first: &[u8], size_hint: usize, lim: &SetLimits) -> Set {
        if crate::protocol::parse_i64(first).is_some() && size_hint <= lim.intset_entries {
            Set::new_intset()
        } else if size_hint <= lim.listpack_entries {
            Set { repr: Repr::Pack(Members::default()) }
        } else {
            Set { repr: Repr::Table(Box::new(Table(Dict::new()))) }
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Ints(_) => "intset",
            Repr::Pack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => v.len(),
            Repr::Pack(p) => p.0.len(),
            Repr::Table(t) => t.0.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(v) => crate::protocol::parse_i64(m).is_some_and(|i| v.binary_search(&i).is_ok()),
            Repr::Pack(p) => p.find(m).is_some(),
            Repr::Table(t) => t.0.contains_key(m),
        }
    }

    /// Converts to `hashtable`.
    fn convert_to_table(&mut self) {
        let mut d = Dict::new();
        self.for_each(|m| d.insert_new_slice(m, ()));
        self.repr = Repr::Table(Box::new(Table(d)));
    }

    /// Adds `m`; returns true if it was not there (Redis's `setTypeAdd`, conversions included).
    pub fn add(&mut self, m: &[u8], lim: &SetLimits) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => {
                if let Some(i) = crate::protocol::parse_i64(m) {
                    match v.binary_search(&i) {
                        Ok(_) => return false,
                        Err(pos) => ints_insert(v, pos, i),
                    }
                    if v.len() > lim.intset_entries {
                        self.convert_to_table();
                    }
                    return true;
                }
                // A non-integer: listpack if everything fits, else hashtable.
                let maxlen = match (v.first(), v.last()) {
                    (Some(&a), Some(&b)) => digits10(a).max(digits10(b)),
                    _ => 0,
                };
                if v.len() < lim.listpack_entries && m.len() <= lim.listpack_value && maxlen <= lim.listpack_value {
                    let mut bytes = Vec::new();
                    let mut b = itoa::Buffer::new();
                    for i in v.iter() {
                        push_str(&mut bytes, b.format(*i).as_bytes());
                    }
                    push_str(&mut bytes, m);
                    self.repr = Repr::Pack(Members(Packed::from_vec(bytes, v.len() + 1)));
                } else {
                    self.convert_to_table();
                    self.add(m, lim);
                }
                true
            }
            Repr::Pack(p) => {
                if p.find(m).is_some() {
                    return false;
                }
                if p.0.len() < lim.listpack_entries && m.len() <= lim.listpack_value {
                    p.push(m);
                } else {
                    self.convert_to_table();
                    self.add(m, lim);
                }
                true
            }
            Repr::Table(t) => {
                if t.0.contains_key(m) {
                    return false;
                }
                t.0.insert_new_slice(m, ());
                true
            }
        }
    }

    /// Removes `m`; returns true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => match crate::protocol::parse_i64(m).map(|i| v.binary_search(&i)) {
                Some(Ok(pos)) => {
                    ints_remove(v, pos);
                    true
                }
                _ => false,
            },
            Repr::Pack(p) => p.remove(m),
            Repr::Table(t) => t.0.remove(m).is_some(),
        }
    }

    /// Visits every member (integers rendered as text).
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match &self.repr {
            Repr::Ints(v) => {
                let mut b = itoa::Buffer::new();
                for i in v.iter() {
                    f(b.format(*i).as_bytes());
                }
            }
            Repr::Pack(p) => p.iter().for_each(|e| f(e.item)),
            Repr::Table(t) => t.0.for_each(|k, _| f(k)),
        }
    }

    pub fn members(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// A random member (None when empty).
    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<Vec<u8>> {
        match &self.repr {
            Repr::Ints(v) => v.choose(rng).map(|i| itoa::Buffer::new().format(*i).as_bytes().to_vec()),
            Repr::Pack(p) if p.0.len() == 0 => None,
            Repr::Pack(p) => p.iter().nth(rng.gen_range(0..p.0.len())).map(|e| e.item.to_vec()),
            Repr::Table(t) => t.0.random(rng).map(|(k, _)| k.to_vec()),
        }
    }

    /// Visits `n` uniformly random members, repeats allowed. A listpack's members are listed
    /// once (it has no index to jump into) rather than walked for every pick.
    pub fn sample<R: Rng>(&self, n: u64, rng: &mut R, mut f: impl FnMut(&[u8])) {
        if let Repr::Pack(p) = &self.repr {
            let all: Vec<&[u8]> = p.iter().map(|e| e.item).collect();
            (0..n).map_while(|_| all.choose(rng)).for_each(|m| f(m));
            return;
        }
        (0..n).map_while(|_| self.random(rng)).for_each(|m| f(&m));
    }

    /// Removes and returns a random member.
    pub fn pop_random<R: Rng>(&mut self, rng: &mut R) -> Option<Vec<u8>> {
        match &mut self.repr {
            Repr::Ints(v) if !v.is_empty() => {
                let i = ints_remove(v, rng.gen_range(0..v.len()));
                Some(itoa::Buffer::new().format(i).as_bytes().to_vec())
            }
            Repr::Pack(p) if p.0.len() > 0 => {
                let i = rng.gen_range(0..p.0.len());
                p.take(i)
            }
            Repr::Table(t) => {
                let k = t.0.random(rng)?.0.to_vec();
                t.0.remove(&k);
                Some(k)
            }
            _ => None,
        }
    }

    /// Removes and returns `count` distinct random members (`count` < len). A listpack is
    /// rewritten once rather than once per member.
    pub fn pop_many<R: Rng>(&mut self, count: usize, rng: &mut R) -> Vec<Vec<u8>> {
        match &mut self.repr {
            Repr::Pack(p) if count < p.0.len() => p.take_random(count, rng),
            _ => (0..count).map_while(|_| self.pop_random(rng)).collect(),
        }
    }

    /// One SSCAN step: small encodings are returned whole (cursor 0), like Redis; the
    /// hashtable uses the dict's reverse-binary cursor, visiting about `count` buckets.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        match &self.repr {
            Repr::Table(t) => {
                let mut cursor = cursor;
                let mut seen = 0usize;
                let mut maxiter = count * 10;
                loop {
                    cursor = t.0.scan(cursor, |k, _| {
                        seen += 1;
                        f(k)
                    });
                    maxiter -= 1;
                    if cursor == 0 || seen >= count || maxiter == 0 {
                        return cursor;
                    }
                }
            }
            _ => {
                self.for_each(f);
                0
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers shared with the sorted-set and geo commands
// ---------------------------------------------------------------------------------------------

/// Values of several keys borrowed at once. `KsView` hands out one `&mut` at a time, so the
/// values are moved out of their shards (O(1) each) and moved back by [`Loaned::restore`].
/// The command holds every shard lock meanwhile, so no other client can observe the gap.
/// A key named twice is taken once.
pub(crate) struct Loaned<'a> {
    slots: Vec<(&'a [u8], Option<Value>)>,
    /// Argument position → slot.
    map: Vec<usize>,
}

impl<'a> Loaned<'a> {
    /// Takes the values of `keys` (lookups for reading: hits, misses and expiry as Redis's
    /// `lookupKeyRead`).
    pub fn take(ks: &mut KsView, keys: &[&'a [u8]]) -> Loaned<'a> {
        let mut slots: Vec<(&'a [u8], Option<Value>)> = Vec::with_capacity(keys.len());
        let mut index: HashMap<&'a [u8], usize> = HashMap::new();
        let mut map = Vec::with_capacity(keys.len());
        for &k in keys {
            if let Some(&j) = index.get(k) {
                map.push(j);
                continue;
            }
            let v = ks.lookup_read(k).map(|mut o| std::mem::replace(o.val_mut(), Value::Int(0)));
            index.insert(k, slots.len());
            map.push(slots.len());
            slots.push((k, v));
        }
        Loaned { slots, map }
    }

    pub fn get(&self, i: usize) -> Option<&Value> {
        self.slots[self.map[i]].1.as_ref()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Puts every value back where it was. Must run before the command touches these keys.
    pub fn restore(self, ks: &mut KsView) {
        for (k, v) in self.slots {
            if let Some(v) = v {
                if let Some(mut o) = ks.shard(k).keys.get_mut(k) {
                    o.set(v);
                }
            }
        }
    }
}

/// SSCAN/ZSCAN/HSCAN options: `COUNT n` (≥ 1) and `MATCH pattern`.
pub(crate) struct ScanOpts<'a> {
    pub count: usize,
    pub pattern: Option<&'a [u8]>,
}

impl ScanOpts<'_> {
    pub fn matches(&self, m: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, m, false))
    }
}

pub(crate) fn parse_scan_opts<'a>(args: &[&'a [u8]]) -> Result<ScanOpts<'a>, CmdError> {
    let mut o = ScanOpts { count: 10, pattern: None };
    let mut i = 0;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        if eq_ic(args[i], "COUNT") {
            let c = parse_int(args[i + 1])?;
            if c < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = c.min(1 << 40) as usize;
        } else if eq_ic(args[i], "MATCH") {
            o.pattern = if args[i + 1] == b"*" { None } else { Some(args[i + 1]) };
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

pub(crate) use crate::commands::keys::parse_scan_cursor;

/// Reads `numkeys` for SINTERCARD/ZINTERCARD-style commands: Redis's wording for each error.
pub(crate) fn parse_numkeys(ctx: &Ctx, idx: usize) -> Result<usize, CmdError> {
    let bad = || CmdError::msg("ERR numkeys should be greater than 0");
    let n = crate::protocol::parse_i64(ctx.arg(idx)).ok_or_else(bad)?;
    if n <= 0 {
        return Err(bad());
    }
    if n as usize > ctx.args.len() - idx - 1 {
        return Err(CmdError::msg("ERR Number of keys can't be greater than number of args"));
    }
    Ok(n as usize)
}

/// Reads a set for writing: Ok(None) if missing, WRONGTYPE for other types.
fn set_for_write<'v>(ks: &'v mut KsView, key: &[u8]) -> Result<Option<&'v mut Set>, CmdError> {
    match ks.lookup_write(key) {
        None => Ok(None),
        Some(o) => match o.into_obj() {
            Some(Value::Set(s)) => Ok(Some(s)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Reads a set for reading: Ok(None) if missing, WRONGTYPE for other types.
fn set_for_read<'v>(ks: &'v mut KsView, key: &[u8]) -> Result<Option<&'v mut Set>, CmdError> {
    match ks.lookup_read(key) {
        None => Ok(None),
        Some(o) => match o.into_obj() {
            Some(Value::Set(s)) => Ok(Some(s)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Replies with members as a RESP3 set (an array in RESP2).
fn reply_members(ctx: &mut Ctx, members: &[Vec<u8>]) {
    ctx.reply.set(members.len());
    for m in members {
        ctx.reply.bulk(m);
    }
}

/// After removals: deletes the key if the set became empty (Redis never keeps empty sets).
fn delete_if_empty(ks: &mut KsView, key: &[u8]) -> bool {
    let empty = matches!(ks.peek(key), Some(o) if matches!(&*o, Value::Set(s) if s.is_empty()));
    if empty {
        ks.delete(key);
    }
    empty
}

// ---------------------------------------------------------------------------------------------
// Set commands
// ---------------------------------------------------------------------------------------------

// SADD key member [member ...]
pub fn sadd(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let lim = SetLimits::from_ctx(ctx);
    let members = &ctx.args[2..];
    let added = match set_for_write(&mut ctx.ks, key)? {
        Some(s) => members.iter().filter(|m| s.add(m, &lim)).count(),
        None => {
            let mut s = Set::create(members[0], members.len(), &lim);
            let n = members.iter().filter(|m| s.add(m, &lim)).count();
            ctx.ks.insert_new(key, Value::Set(s));
            n
        }
    };
    if added > 0 {
        ctx.ks.modified(key);
    }
    ctx.reply.int(added as i64);
    Ok(())
}

// SREM key member [member ...]
pub fn srem(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let members = &ctx.args[2..];
    let removed = match set_for_write(&mut ctx.ks, key)? {
        Some(s) => {
            let mut n = 0;
            for m in members {
                if s.remove(m) {
                    n += 1;
                    if s.is_empty() {
                        break;
                    }
                }
            }
            n
        }
        None => 0,
    };
    if removed > 0 && !delete_if_empty(&mut ctx.ks, key) {
        ctx.ks.modified(key);
    }
    ctx.reply.int(removed);
    Ok(())
}

// SMEMBERS key
pub fn smembers(ctx: &mut Ctx) -> CmdResult {
    let members = match set_for_read(&mut ctx.ks, ctx.args[1])? {
        Some(s) => s.members(),
        None => Vec::new(),
    };
    reply_members(ctx, &members);
    Ok(())
}

// SISMEMBER key member
pub fn sismember(ctx: &mut Ctx) -> CmdResult {
    let found = set_for_read(&mut ctx.ks, ctx.args[1])?.is_some_and(|s| s.contains(ctx.args[2]));
    ctx.reply.int(found as i64);
    Ok(())
}

// SMISMEMBER key member [member ...]
pub fn smismember(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let found: Vec<bool> = match set_for_read(&mut ctx.ks, args[1])? {
        Some(s) => args[2..].iter().map(|m| s.contains(m)).collect(),
        None => vec![false; args.len() - 2],
    };
    ctx.reply.array(found.len());
    for f in found {
        ctx.reply.int(f as i64);
    }
    Ok(())
}

// SCARD key
pub fn scard(ctx: &mut Ctx) -> CmdResult {
    let n = set_for_read(&mut ctx.ks, ctx.args[1])?.map_or(0, |s| s.len());
    ctx.reply.int(n as i64);
    Ok(())
}

/// Effects of SPOP are SREMs of what was popped, in batches like Redis's
/// `SPOP_MOVE_STRATEGY` propagation (1024 members per SREM).
fn emit_srem(ctx: &mut Ctx, key: &[u8], popped: &[Vec<u8>]) {
    for chunk in popped.chunks(1024) {
        let mut argv = Vec::with_capacity(chunk.len() + 2);
        argv.push(b"SREM".to_vec());
        argv.push(key.to_vec());
        argv.extend(chunk.iter().cloned());
        ctx.rewrite_effect(argv);
    }
}

// SPOP key [count]
pub fn spop(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    if ctx.args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = if ctx.args.len() == 3 {
        // getPositiveLongFromObjectOrReply: one message for both failures.
        let bad = || CmdError::msg("ERR value is out of range, must be positive");
        let c = crate::protocol::parse_i64(ctx.arg(2)).ok_or_else(bad)?;
        if c < 0 {
            return Err(bad());
        }
        Some(c as u64)
    } else {
        None
    };
    let mut rng = rand::thread_rng();
    let Some(s) = set_for_write(&mut ctx.ks, key)? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.set(0),
        }
        return Ok(());
    };
    match count {
        None => {
            let m = s.pop_random(&mut rng).expect("sets are never empty");
            ctx.reply.bulk(&m);
            delete_if_empty(&mut ctx.ks, key);
            ctx.ks.modified(key);
            ctx.rewrite_effect(vec![b"SREM".to_vec(), key.to_vec(), m]);
        }
        Some(0) => ctx.reply.set(0),
        Some(c) if c >= s.len() as u64 => {
            // The whole set: reply with it and delete the key, propagated as DEL.
            let members = s.members();
            reply_members(ctx, &members);
            ctx.ks.delete(key);
            ctx.rewrite_effect(vec![b"DEL".to_vec(), key.to_vec()]);
        }
        Some(c) => {
            let popped = s.pop_many(c as usize, &mut rng);
            reply_members(ctx, &popped);
            ctx.ks.modified(key);
            emit_srem(ctx, key, &popped);
        }
    }
    Ok(())
}

// SRANDMEMBER key [count]
pub fn srandmember(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = if ctx.args.len() == 3 {
        let c = parse_int(ctx.arg(2))?;
        if c == i64::MIN {
            return Err(CmdError::msg(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ));
        }
        Some(c)
    } else {
        None
    };
    let mut rng = rand::thread_rng();
    let Some(s) = set_for_read(&mut ctx.ks, ctx.args[1])? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.array(0),
        }
        return Ok(());
    };
    let picks = match count {
        None => {
            let m = s.random(&mut rng).expect("sets are never empty");
            ctx.reply.bulk(&m);
            return Ok(());
        }
        Some(c) if c < 0 => {
            // Streamed: the reply grows with the data, never sized up front by the count.
            let n = c.unsigned_abs();
            let reply = &mut *ctx.reply;
            reply.array(n as usize);
            s.sample(n, &mut rng, |m| reply.bulk(m));
            return Ok(());
        }
        Some(c) => random_distinct(s, c as u64, &mut rng),
    };
    ctx.reply.array(picks.len());
    for p in &picks {
        ctx.reply.bulk(p);
    }
    Ok(())
}

/// `count` distinct random members (all of them when count ≥ size). Large requests shuffle a
/// copy; small ones sample until they have enough distinct picks (Redis's CASE 3 / CASE 4).
fn random_distinct<R: Rng>(s: &Set, count: u64, rng: &mut R) -> Vec<Vec<u8>> {
    let size = s.len() as u64;
    if count >= size {
        return s.members();
    }
    if count * 3 > size {
        let mut all = s.members();
        let (picked, _) = all.partial_shuffle(rng, count as usize);
        return picked.to_vec();
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(count as usize);
    while (out.len() as u64) < count {
        let m = s.random(rng).unwrap();
        if seen.insert(m.clone()) {
            out.push(m);
        }
    }
    out
}

// SMOVE source destination member
pub fn smove(ctx: &mut Ctx) -> CmdResult {
    let (src, dst, m) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let lim = SetLimits::from_ctx(ctx);
    let Some(s) = set_for_write(&mut ctx.ks, src)? else {
        // Redis checks the destination's type only when the source exists.
        ctx.reply.int(0);
        return Ok(());
    };
    let src_has = s.contains(m);
    let dst_exists = set_for_write(&mut ctx.ks, dst)?.is_some();
    if src == dst {
        ctx.reply.int(src_has as i64);
        return Ok(());
    }
    if !src_has {
        ctx.reply.int(0);
        return Ok(());
    }
    if let Some(s) = set_for_write(&mut ctx.ks, src)? {
        s.remove(m);
    }
    if !delete_if_empty(&mut ctx.ks, src) {
        ctx.ks.modified(src);
    }
    if dst_exists {
        if let Some(d) = set_for_write(&mut ctx.ks, dst)? {
            if d.add(m, &lim) {
                ctx.ks.modified(dst);
            }
        }
    } else {
        let mut d = Set::create(m, 1, &lim);
        d.add(m, &lim);
        ctx.ks.insert_new(dst, Value::Set(d));
        ctx.ks.modified(dst);
    }
    ctx.reply.int(1);
    Ok(())
}

/// Which multi-set operation.
#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

/// Computes an intersection, union or difference of the sets at `keys` (missing keys are
/// empty). WRONGTYPE if any key holds another type, checked before computing, as Redis does.
/// `limit` stops an intersection early (SINTERCARD); 0 means no limit.
fn set_op(ks: &mut KsView, keys: &[&[u8]], op: SetOp, limit: usize) -> Result<Set, CmdError> {
    let loaned = Loaned::take(ks, keys);
    let result = compute_set_op(&loaned, op, limit);
    loaned.restore(ks);
    result
}

fn compute_set_op(loaned: &Loaned, op: SetOp, limit: usize) -> Result<Set, CmdError> {
    let mut sets: Vec<Option<&Set>> = Vec::with_capacity(loaned.len());
    for i in 0..loaned.len() {
        match loaned.get(i) {
            None => sets.push(None),
            Some(Value::Set(s)) => sets.push(Some(s)),
            Some(_) => return Err(CmdError::WrongType),
        }
    }
    // The result is collected in a hashtable (O(1) dedup); `store_set` re-encodes it.
    let mut out = Set { repr: Repr::Table(Box::new(Table(Dict::new()))) };
    let mut add = |m: &[u8]| {
        if let Repr::Table(t) = &mut out.repr {
            if !t.0.contains_key(m) {
                t.0.insert_new_slice(m, ());
            }
        }
    };
    match op {
        SetOp::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return Ok(out);
            }
            let mut sets: Vec<&Set> = sets.into_iter().flatten().collect();
            // Walk the smallest set, probe the others.
            sets.sort_by_key(|s| s.len());
            let mut n = 0;
            let mut done = false;
            sets[0].for_each(|m| {
                if done {
                    return;
                }
                if sets[1..].iter().all(|s| s.contains(m)) {
                    add(m);
                    n += 1;
                    if limit > 0 && n >= limit {
                        done = true;
                    }
                }
            });
        }
        SetOp::Union => {
            for s in sets.iter().flatten() {
                s.for_each(&mut add);
            }
        }
        SetOp::Diff => {
            if let Some(first) = sets[0] {
                first.for_each(|m| {
                    if !sets[1..].iter().flatten().any(|s| s.contains(m)) {
                        add(m);
                    }
                });
            }
        }
    }
    Ok(out)
}

/// Stores a computed set at `dst` the way Redis builds it (from an empty intset, member by
/// member, so the encoding follows the thresholds), or deletes `dst` when it is empty.
fn store_set(ctx: &mut Ctx, dst: &[u8], result: Set) -> usize {
    let lim = SetLimits::from_ctx(ctx);
    let n = result.len();
    if n == 0 {
        ctx.ks.delete(dst);
        return 0;
    }
    let mut s = Set::new_intset();
    result.for_each(|m| {
        s.add(m, &lim);
    });
    ctx.ks.set(dst, Value::Set(s), false);
    n
}

fn reply_set(ctx: &mut Ctx, s: &Set) {
    ctx.reply.set(s.len());
    s.for_each(|m| ctx.reply.bulk(m));
}

// SINTER key [key ...]
pub fn sinter(ctx: &mut Ctx) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[1..], SetOp::Inter, 0)?;
    reply_set(ctx, &r);
    Ok(())
}

// SUNION key [key ...]
pub fn sunion(ctx: &mut Ctx) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[1..], SetOp::Union, 0)?;
    reply_set(ctx, &r);
    Ok(())
}

// SDIFF key [key ...]
pub fn sdiff(ctx: &mut Ctx) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[1..], SetOp::Diff, 0)?;
    reply_set(ctx, &r);
    Ok(())
}

fn store_op(ctx: &mut Ctx, op: SetOp) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[2..], op, 0)?;
    let n = store_set(ctx, ctx.args[1], r);
    ctx.reply.int(n as i64);
    Ok(())
}

// SINTERSTORE destination key [key ...]
pub fn sinterstore(ctx: &mut Ctx) -> CmdResult {
    store_op(ctx, SetOp::Inter)
}

// SUNIONSTORE destination key [key ...]
pub fn sunionstore(ctx: &mut Ctx) -> CmdResult {
    store_op(ctx, SetOp::Union)
}

// SDIFFSTORE destination key [key ...]
pub fn sdiffstore(ctx: &mut Ctx) -> CmdResult {
    store_op(ctx, SetOp::Diff)
}

// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn sintercard(ctx: &mut Ctx) -> CmdResult {
    let n = parse_numkeys(ctx, 1)?;
    let limit = parse_card_limit(ctx, 2 + n)?;
    let r = set_op(&mut ctx.ks, &ctx.args[2..2 + n], SetOp::Inter, limit)?;
    ctx.reply.int(r.len() as i64);
    Ok(())
}

/// `[LIMIT limit]` after the keys of SINTERCARD/ZINTERCARD (0 = no limit).
pub(crate) fn parse_card_limit(ctx: &Ctx, mut i: usize) -> Result<usize, CmdError> {
    let mut limit = 0;
    while i < ctx.args.len() {
        if eq_ic(ctx.args[i], "LIMIT") && i + 1 < ctx.args.len() {
            let l = parse_int(ctx.args[i + 1])?;
            if l < 0 {
                return Err(CmdError::msg("ERR LIMIT can't be negative"));
            }
            limit = l as usize;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(limit)
}

// SSCAN key cursor [MATCH pattern] [COUNT count]
pub fn sscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = parse_scan_cursor(ctx.arg(2))?;
    let args = ctx.args;
    let Some(s) = set_for_read(&mut ctx.ks, args[1])? else {
        ctx.reply.array(2);
        ctx.reply.bulk(b"0");
        ctx.reply.array(0);
        return Ok(());
    };
    let opts = parse_scan_opts(&args[3..])?;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let next = s.scan(cursor, opts.count, |m| {
        if opts.matches(m) {
            out.push(m.to_vec())
        }
    });
    ctx.reply.array(2);
    ctx.reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.reply.array(out.len());
    for m in &out {
        ctx.reply.bulk(m);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: SetLimits = SetLimits { intset_entries: 4, listpack_entries: 3, listpack_value: 5 };

    #[test]
    fn encodings_convert_like_redis() {
        let mut s = Set::create(b"1", 1, &LIM);
        assert_eq!(s.encoding(), "intset");
        for i in [3, 1, 2] {
            s.add(i.to_string().as_bytes(), &LIM);
        }
        assert_eq!(s.members(), vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]);
        // Intset of 3 < 3 entries fails: straight to hashtable.
        s.add(b"abc", &LIM);
        assert_eq!(s.encoding(), "hashtable");
        let mut p = Set::create(b"1", 1, &LIM);
        p.add(b"1", &LIM);
        p.add(b"x", &LIM);
        assert_eq!(p.encoding(), "listpack");
        assert!(p.contains(b"1") && p.contains(b"x") && !p.contains(b"01"));
        p.add(b"toolong", &LIM);
        assert_eq!(p.encoding(), "hashtable");
        assert_eq!(p.len(), 3);
        let mut i = Set::new_intset();
        for n in 0..5 {
            i.add(n.to_string().as_bytes(), &LIM);
        }
        assert_eq!(i.encoding(), "hashtable");
    }

    /// The listpack's bytes (panics for other encodings).
    fn packed(s: &Set) -> &[u8] {
        match &s.repr {
            Repr::Pack(p) => p.0.bytes(),
            _ => panic!("not a listpack"),
        }
    }

    #[test]
    fn set_sits_inside_value() {
        assert!(std::mem::size_of::<Set>() <= 32, "{}", std::mem::size_of::<Set>());
        assert_eq!(std::mem::size_of::<Value>(), 40);
    }

    #[test]
    fn packed_round_trips_order_and_deletes() {
        let lim = SetLimits { intset_entries: 512, listpack_entries: 128, listpack_value: 1000 };
        let lens = [0usize, 1, 127, 128, 300];
        let want: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &n)| vec![b'a' + i as u8; n]).collect();
        let mut s = Set::create(&want[0], want.len(), &lim);
        for m in &want {
            assert!(s.add(m, &lim));
            assert!(!s.add(m, &lim));
        }
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(s.len(), want.len());
        assert_eq!(s.members(), want);
        let size: usize = want.iter().map(|m| crate::types::packed::str_size(m)).sum();
        assert_eq!(packed(&s).len(), size);
        assert!(want.iter().all(|m| s.contains(m)));
        assert!(!s.contains(b"bb") && !s.contains(&[b'c'; 126]));
        assert_eq!(s.clone(), s);
        // From the middle, then the ends; the rest keeps its order.
        assert!(s.remove(&want[2]));
        assert!(!s.remove(&want[2]));
        assert_eq!(s.members(), [&want[..2], &want[3..]].concat());
        assert!(s.remove(&want[0]) && s.remove(&want[4]));
        assert_eq!(s.members(), vec![want[1].clone(), want[3].clone()]);
        assert!(s.add(&want[0], &lim));
        assert_eq!(s.members(), vec![want[1].clone(), want[3].clone(), want[0].clone()]);
        let mut rng = rand::thread_rng();
        for _ in 0..20 {
            assert!(s.contains(&s.random(&mut rng).unwrap()));
        }
        let mut left = s.members();
        while let Some(m) = s.pop_random(&mut rng) {
            let at = left.iter().position(|x| *x == m).unwrap();
            left.remove(at);
            assert_eq!(s.members(), left);
        }
        assert!(s.is_empty() && packed(&s).is_empty());
        assert_eq!(s.random(&mut rng), None);
    }

    #[test]
    fn intset_to_listpack_keeps_members() {
        let lim = SetLimits { intset_entries: 512, listpack_entries: 128, listpack_value: 64 };
        let mut s = Set::create(b"5", 3, &lim);
        for m in ["5", "-3", "12"] {
            s.add(m.as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "intset");
        s.add(b"x", &lim);
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(s.members(), vec![b"-3".to_vec(), b"5".to_vec(), b"12".to_vec(), b"x".to_vec()]);
        assert!(s.contains(b"12") && !s.contains(b"+12"));
    }

    #[test]
    fn pop_many_takes_distinct_members() {
        let lim = SetLimits { intset_entries: 0, listpack_entries: 128, listpack_value: 64 };
        let mut rng = rand::thread_rng();
        for count in [0, 1, 5, 9] {
            let mut s = Set::create(b"m", 10, &lim);
            for i in 0..10 {
                s.add(format!("m{i}").as_bytes(), &lim);
            }
            let before = s.members();
            let popped = s.pop_many(count, &mut rng);
            assert_eq!(popped.len(), count);
            assert_eq!(s.len(), 10 - count);
            let rest = s.members();
            assert_eq!(rest, before.iter().filter(|m| !popped.contains(m)).cloned().collect::<Vec<_>>());
            for m in &popped {
                assert!(before.contains(m) && !s.contains(m));
            }
        }
        let mut ints = Set::new_intset();
        for i in 0..10 {
            ints.add(i.to_string().as_bytes(), &lim);
        }
        assert_eq!(ints.pop_many(4, &mut rng).len(), 4);
        assert_eq!(ints.len(), 6);
    }

    #[test]
    fn scan_returns_everything() {
        let lim = SetLimits { intset_entries: 0, listpack_entries: 0, listpack_value: 0 };
        let mut s = Set::create(b"a", 1000, &lim);
        for n in 0..1000 {
            s.add(format!("m{n}").as_bytes(), &lim);
        }
        let mut seen = std::collections::HashSet::new();
        let mut c = 0;
        loop {
            c = s.scan(c, 10, |m| {
                seen.insert(m.to_vec());
            });
            if c == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
    }
}
