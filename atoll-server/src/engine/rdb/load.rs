//! Reads a value's body for any RDB type Redis 2.6–7.2 wrote, building Atoll's value with the
//! encoding the current thresholds give it (as Redis converts on load: a ziplist becomes a
//! listpack, a small hashtable hash becomes a listpack, an oversized listpack a hashtable).
//! Duplicates, NaN scores and malformed blobs are errors, never a panic; an empty aggregate
//! is reported as `None` (Redis skips such keys).

use super::blobs::{intset, listpack, ziplist, zipmap, Elem};
use super::save::{STREAM_DELETED, STREAM_SAMEFIELDS};
use super::*;
use crate::engine::hash::{Hash, Limits as HashLimits};
use crate::engine::list::List;
use crate::engine::set::{Set, SetLimits};
use crate::engine::stream::{Consumer, Entry, Group, Nack, Node, Stream, StreamId};
use crate::engine::zset::{ZLimits, ZSet};
use crate::engine::Value;
use std::collections::{BTreeSet, HashSet};

/// The encoding thresholds loading converts by.
#[derive(Clone, Copy, Debug)]
pub struct LoadOpts {
    pub list_fill: i64,
    pub hash: HashLimits,
    pub set: SetLimits,
    pub zset: ZLimits,
    /// `rdb-version-check relaxed`: files and DUMP payloads of a newer RDB version are read
    /// as far as they are understood.
    pub any_version: bool,
    /// Deep integrity checks (`sanitize-dump-payload`, Redis's `deep_integrity_validation`):
    /// a packed encoding (listpack, ziplist, intset) holding a member or field twice is
    /// refused. Without them it loads with each member once — the first, which is what
    /// Redis's lookups find in such a listpack — and [`take_repairs`] reports it.
    pub deep: bool,
    /// The names of keys skipped because their time had passed are kept (`LoadInfo::expired`),
    /// up to about this many bytes (0: none): a master restarting with its replication
    /// history feeds their DELs to its replicas — unless they outgrow its backlog, when the
    /// replicas need a full sync anyway.
    pub keep_expired: usize,
}

impl Default for LoadOpts {
    fn default() -> Self {
        LoadOpts {
            list_fill: -2,
            hash: HashLimits { max_entries: 128, max_value: 64 },
            set: SetLimits { intset_entries: 512, listpack_entries: 128, listpack_value: 64 },
            zset: ZLimits { entries: 128, value: 64 },
            any_version: false,
            deep: true,
            keep_expired: 0,
        }
    }
}

thread_local! {
    /// What loading without deep checks let through on this thread, for the caller to log.
    static REPAIRS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What the values decoded on this thread since the last call let through without deep
/// checks ("Hash listpack with dup elements" …): the caller logs it with the key's name.
pub fn take_repairs() -> Vec<String> {
    REPAIRS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

fn note_repair(what: &str) {
    note(format!("{what} with dup elements: each kept once, the first"));
}

fn note(repair: String) {
    REPAIRS.with(|r| r.borrow_mut().push(repair));
}

/// What a packed encoding's repeated member does: refused with deep checks, else kept once
/// (`what` names the encoding in the report).
fn dups(o: &LoadOpts, what: &'static str) -> Option<&'static str> {
    (!o.deep).then_some(what)
}

/// True for the type bytes of values (as opposed to opcodes).
pub fn is_value_type(t: u8) -> bool {
    matches!(t, 0..=7 | 9..=22)
}

/// Reads past the body of a value of type `t` without building it, checking only its
/// framing, so that what was read (captured by the `Input`) can be decoded by `value` on
/// another thread. False for the types not read this way (streams: rare and intricate; they
/// are decoded where they are read).
pub fn skip<R: Read>(t: u8, inp: &mut Input<R>) -> Result<bool> {
    match t {
        TYPE_STRING | TYPE_HASH_ZIPMAP | TYPE_LIST_ZIPLIST | TYPE_SET_INTSET | TYPE_SET_LISTPACK
        | TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK | TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => inp.skip_string()?,
        TYPE_LIST | TYPE_SET | TYPE_LIST_QUICKLIST => {
            for _ in 0..inp.count()? {
                inp.skip_string()?;
            }
        }
        TYPE_ZSET => {
            for _ in 0..inp.count()? {
                inp.skip_string()?;
                inp.skip_double_text()?;
            }
        }
        TYPE_ZSET_2 => {
            for _ in 0..inp.count()? {
                inp.skip_string()?;
                inp.array::<8>()?;
            }
        }
        TYPE_HASH => {
            for _ in 0..inp.count()? {
                inp.skip_string()?;
                inp.skip_string()?;
            }
        }
        TYPE_HASH_2 => {
            for _ in 0..inp.count()? {
                inp.skip_string()?;
                inp.skip_string()?;
                inp.array::<8>()?;
            }
        }
        TYPE_LIST_QUICKLIST_2 => {
            for _ in 0..inp.count()? {
                inp.length()?;
                inp.skip_string()?;
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Reads the body of a value of type `t`. `Ok(None)`: a valid but empty aggregate.
pub fn value<R: Read>(t: u8, inp: &mut Input<R>, o: &LoadOpts) -> Result<Option<Value>> {
    let v = match t {
        TYPE_STRING => match inp.int_or_string()? {
            IntOrStr::Int(i) => Value::Int(i),
            IntOrStr::Str(s) => Value::from_bytes(&s),
        },
        TYPE_LIST => {
            let n = inp.count()?;
            let mut items = Vec::new();
            for _ in 0..n {
                items.push(inp.string()?.into_boxed_slice());
            }
            list(items, o)
        }
        TYPE_SET => {
            let n = inp.count()?;
            let mut members = Vec::new();
            for _ in 0..n {
                members.push(inp.string()?);
            }
            set(members, o, None)?
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = inp.count()?;
            let mut items = Vec::new();
            for _ in 0..n {
                let m = inp.string()?;
                let s = if t == TYPE_ZSET { inp.double_text()? } else { inp.double_bin()? };
                items.push((s, m));
            }
            zset(items, o, None)?
        }
        TYPE_HASH => {
            let n = inp.count()?;
            let mut pairs = Vec::new();
            for _ in 0..n {
                let f = inp.string()?;
                pairs.push((f, inp.string()?));
            }
            hash(pairs, o, None)?
        }
        TYPE_HASH_2 => {
            let n = inp.count()?;
            let mut h = Hash::new();
            for _ in 0..n {
                let f = inp.string()?;
                let v = inp.string()?;
                let at = inp.ms()?;
                if !h.set(&f, &v, o.hash) {
                    return err("Duplicate hash fields detected");
                }
                // Any negative deadline means none (Valkey writes -1).
                if at >= 0 {
                    h.set_ttl(&f, at);
                }
            }
            Value::Hash(h)
        }
        TYPE_HASH_ZIPMAP => hash(zipmap(&inp.string()?)?, o, None)?,
        // Redis 7.2 keeps an old ziplist list a quicklist, whatever its size.
        TYPE_LIST_ZIPLIST => {
            let blob = inp.string()?;
            let elems = packed("List ziplist", ziplist(&blob))?;
            Value::List(Box::new(List::quicklist_of(
                elems.into_iter().map(|e| e.into_bytes().into_boxed_slice()),
                o.list_fill,
            )))
        }
        TYPE_SET_INTSET => {
            let blob = inp.string()?;
            let ints = intset(&blob, o.deep)?;
            if ints.windows(2).any(|w| w[0] > w[1]) {
                note("Intset out of order: its members sorted".into());
            }
            set(
                ints.iter().map(|i| itoa::Buffer::new().format(*i).as_bytes().to_vec()).collect(),
                o,
                dups(o, "Intset"),
            )?
        }
        TYPE_SET_LISTPACK => {
            let blob = inp.string()?;
            let members = |e: Vec<Elem>| set(e.into_iter().map(Elem::into_bytes).collect(), o, dups(o, "Set listpack"));
            packed("Set listpack", listpack(&blob).and_then(members))?
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let blob = inp.string()?;
            let what = if t == TYPE_ZSET_ZIPLIST { "Zset ziplist" } else { "Zset listpack" };
            packed(what, packed_zset(t, &blob, o))?
        }
        TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let blob = inp.string()?;
            let what = if t == TYPE_HASH_ZIPLIST { "Hash ziplist" } else { "Hash listpack" };
            packed(what, packed_hash(t, &blob, o))?
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let nodes = inp.count()?;
            let mut items: Vec<Box<[u8]>> = Vec::new();
            let mut kept_nodes = 0;
            for _ in 0..nodes {
                let container = if t == TYPE_LIST_QUICKLIST_2 { inp.length()? } else { QL_PACKED };
                let blob = inp.string()?;
                if blob.is_empty() {
                    return err("Quicklist integrity check failed: empty node");
                }
                match container {
                    QL_PLAIN => {
                        items.push(blob.into_boxed_slice());
                        kept_nodes += 1;
                    }
                    QL_PACKED => {
                        let elems = if t == TYPE_LIST_QUICKLIST { ziplist(&blob)? } else { listpack(&blob)? };
                        // Redis skips empty nodes (files written by buggy versions hold some).
                        kept_nodes += usize::from(!elems.is_empty());
                        items.extend(elems.into_iter().map(|e| e.into_bytes().into_boxed_slice()));
                    }
                    c => return err(format!("Quicklist integrity check failed: unknown container {c}")),
                }
            }
            // Redis 7.2 turns a quicklist back into a listpack on load only when it has a
            // single node that fits (`listTypeTryConversion`); several nodes stay a quicklist.
            if kept_nodes == 1 {
                list(items, o)
            } else {
                Value::List(Box::new(List::quicklist_of(items, o.list_fill)))
            }
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
            return stream(t, inp).map(|s| Some(Value::Stream(Box::new(s))));
        }
        TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => return err("Module values are not supported (Atoll loads no modules)"),
        _ => return err(format!("Unknown RDB encoding type {t}")),
    };
    let empty = match &v {
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Hash(h) => h.is_empty(),
        _ => false,
    };
    Ok((!empty).then_some(v))
}

/// A packed encoding that failed to decode, or held what its type forbids (duplicates, an odd
/// count, a bad score), reported as Redis reports it — "Hash listpack integrity check
/// failed." — with what was wrong after it. Operators and Redis's tests look for those words.
fn packed<T>(what: &str, r: Result<T>) -> Result<T> {
    r.map_err(|RdbError(why)| RdbError(format!("{what} integrity check failed. ({why})")))
}

/// The elements of a ziplist or a listpack, two by two.
fn packed_pairs(is_ziplist: bool, blob: &[u8]) -> Result<Vec<(Elem, Elem)>> {
    let elems = if is_ziplist { ziplist(blob)? } else { listpack(blob)? };
    if elems.len() % 2 != 0 {
        return err("an odd number of elements");
    }
    let mut pairs = Vec::with_capacity(elems.len() / 2);
    let mut it = elems.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        pairs.push((a, b));
    }
    Ok(pairs)
}

/// A sorted set's ziplist or listpack: member, score, member, score …
fn packed_zset(t: u8, blob: &[u8], o: &LoadOpts) -> Result<Value> {
    let pairs = packed_pairs(t == TYPE_ZSET_ZIPLIST, blob)?;
    let mut items = Vec::with_capacity(pairs.len());
    for (m, s) in pairs {
        let score = match s {
            Elem::Int(i) => i as f64,
            Elem::Str(b) => crate::engine::zset::parse_score(&b)
                .or_else(|| matches!(&b[..], b"inf" | b"+inf").then_some(f64::INFINITY))
                .or_else(|| (b == b"-inf").then_some(f64::NEG_INFINITY))
                .ok_or_else(|| RdbError("an invalid score".into()))?,
        };
        items.push((score, m.into_bytes()));
    }
    // A ziplist is refused for a repeated member whatever the setting: Redis checks it in
    // full as it turns it into a listpack.
    zset(items, o, if t == TYPE_ZSET_ZIPLIST { None } else { dups(o, "Zset listpack") })
}

/// A hash's ziplist or listpack: field, value, field, value …
fn packed_hash(t: u8, blob: &[u8], o: &LoadOpts) -> Result<Value> {
    let pairs = packed_pairs(t == TYPE_HASH_ZIPLIST, blob)?
        .into_iter()
        .map(|(f, v)| (f.into_bytes(), v.into_bytes()))
        .collect();
    // Redis's words for it, when a listpack turning into a table meets a field twice.
    // As for a sorted set's ziplist, a hash's is refused for a repeated field.
    hash(pairs, o, if t == TYPE_HASH_ZIPLIST { None } else { dups(o, "Hash listpack") })
        .map_err(|_| RdbError("listpack with dup elements".into()))
}

fn list(items: Vec<Box<[u8]>>, o: &LoadOpts) -> Value {
    Value::List(Box::new(List::from_elements(items, o.list_fill)))
}

/// A set of `members`; one met twice is refused, or with `collapse` (a packed encoding
/// loaded without deep checks) kept once and reported.
fn set(members: Vec<Vec<u8>>, o: &LoadOpts, collapse: Option<&'static str>) -> Result<Value> {
    let Some(first) = members.first() else { return Ok(Value::Set(Set::new_intset())) };
    let mut s = Set::create(first, members.len(), &o.set);
    let mut repeated = false;
    for m in &members {
        if !s.add(m, &o.set) {
            if collapse.is_none() {
                return err("Duplicate set members detected");
            }
            repeated = true;
        }
    }
    if let (true, Some(what)) = (repeated, collapse) {
        note_repair(what);
        // Sized by the members it holds, not by the entries the payload had: the encoding a
        // set of that many members has.
        if s.len() != members.len() {
            let mut sized = Set::create(first, s.len(), &o.set);
            for m in &members {
                sized.add(m, &o.set);
            }
            s = sized;
        }
    }
    Ok(Value::Set(s))
}

/// A sorted set (as `set` treats a repeated member; the first score is kept).
fn zset(items: Vec<(f64, Vec<u8>)>, o: &LoadOpts, collapse: Option<&'static str>) -> Result<Value> {
    let mut seen = HashSet::with_capacity(items.len());
    let mut out = Vec::with_capacity(items.len());
    let mut repeated = false;
    for (s, m) in items {
        if s.is_nan() {
            return err("Zset with NAN score detected");
        }
        if !seen.insert(m.clone()) {
            if collapse.is_none() {
                return err("Duplicate zset fields detected");
            }
            repeated = true;
            continue;
        }
        out.push((s, m.into_boxed_slice()));
    }
    if let (true, Some(what)) = (repeated, collapse) {
        note_repair(what);
    }
    Ok(Value::ZSet(ZSet::build(out, &o.zset)))
}

/// A hash (as `set` treats a repeated field; the first value is kept).
fn hash(pairs: Vec<(Vec<u8>, Vec<u8>)>, o: &LoadOpts, collapse: Option<&'static str>) -> Result<Value> {
    let mut h = Hash::new();
    let mut repeated = false;
    for (f, v) in &pairs {
        if collapse.is_some() && h.contains(f) {
            repeated = true;
            continue;
        }
        if !h.set(f, v, o.hash) {
            return err("Duplicate hash fields detected");
        }
    }
    if let (true, Some(what)) = (repeated, collapse) {
        note_repair(what);
    }
    Ok(Value::Hash(h))
}

fn id_from(b: &[u8]) -> Result<StreamId> {
    if b.len() != 16 {
        return err("Stream node key entry is not the size of a stream ID");
    }
    Ok(StreamId::new(u64::from_be_bytes(b[..8].try_into().unwrap()), u64::from_be_bytes(b[8..].try_into().unwrap())))
}

fn stream<R: Read>(t: u8, inp: &mut Input<R>) -> Result<Stream> {
    let mut s = Stream::default();
    let nodes = inp.count()?;
    for _ in 0..nodes {
        let master = id_from(&inp.string()?)?;
        let lp = inp.string()?;
        let bytes = lp.len();
        let elems = listpack(&lp).map_err(|RdbError(why)| match why.strip_prefix("Listpack") {
            Some(rest) => RdbError(format!("Stream listpack{rest}")),
            None => RdbError(format!("Stream listpack: {why}")),
        })?;
        let node = stream_node(master, elems, bytes)?;
        if node.entries.is_empty() {
            return err("Empty listpack inside stream");
        }
        if s.nodes.last_key_value().is_some_and(|(k, n)| *k >= master || n.entries.last().unwrap().id >= master) {
            return err("Stream nodes out of order");
        }
        s.nodes.insert(master, node);
    }
    s.length = inp.length()?;
    s.last_id = StreamId::new(inp.length()?, inp.length()?);
    let live: u64 = s.nodes.values().map(|n| n.live as u64).sum();
    if live != s.length {
        return err("Stream length does not match its entries");
    }
    if t >= TYPE_STREAM_LISTPACKS_2 {
        s.first_id = StreamId::new(inp.length()?, inp.length()?);
        s.max_deleted_id = StreamId::new(inp.length()?, inp.length()?);
        s.entries_added = inp.length()?;
    } else {
        // Version 1 kept none of these: derive them as Redis does.
        s.first_id = s.range(StreamId::MIN, StreamId::MAX, false, 1).first().map(|e| e.id).unwrap_or_default();
        s.entries_added = s.length;
    }
    let groups = inp.count()?;
    for _ in 0..groups {
        let name = inp.string()?;
        let last_id = StreamId::new(inp.length()?, inp.length()?);
        // Version 1 did not keep the counter: estimated from the group's last ID, as Redis does.
        let entries_read =
            if t >= TYPE_STREAM_LISTPACKS_2 { inp.length()? as i64 } else { s.estimate_distance(last_id) };
        let mut g = Group::new(last_id, entries_read);
        let pel = inp.count()?;
        for _ in 0..pel {
            let id = id_from(&inp.array::<16>()?)?;
            let delivery_time = inp.ms()?;
            let delivery_count = inp.length()?;
            if g.pel.insert(id, Nack { consumer: Vec::new(), delivery_time, delivery_count }).is_some() {
                return err("Duplicated global PEL entry loading stream consumer group");
            }
        }
        let consumers = inp.count()?;
        for _ in 0..consumers {
            let cname = inp.string()?;
            let seen_time = inp.ms()?;
            let active_time = if t >= TYPE_STREAM_LISTPACKS_3 { inp.ms()? } else { seen_time };
            let mut c = Consumer { seen_time, active_time, pel: BTreeSet::new() };
            let n = inp.count()?;
            for _ in 0..n {
                let id = id_from(&inp.array::<16>()?)?;
                let Some(nack) = g.pel.get_mut(&id) else {
                    return err("Consumer entry not found in group global PEL");
                };
                if !nack.consumer.is_empty() || !c.pel.insert(id) {
                    return err("Duplicated consumer PEL entry loading a stream consumer group");
                }
                nack.consumer = cname.clone();
            }
            if g.consumers.insert(cname, c).is_some() {
                return err("Duplicate stream consumer detected.");
            }
        }
        if g.pel.values().any(|n| n.consumer.is_empty()) {
            return err("Stream PEL entry without a consumer");
        }
        if s.groups.insert(name, g).is_some() {
            return err("Duplicated consumer group name");
        }
    }
    Ok(s)
}

/// Decodes one stream listpack (see `save::node_listpack` for the layout), checking every
/// count it carries against what is there.
fn stream_node(master: StreamId, elems: Vec<Elem>, bytes: usize) -> Result<Node> {
    fn bad<T>(what: &str) -> Result<T> {
        err(format!("Stream listpack integrity check failed: {what}"))
    }
    let mut it = elems.into_iter();
    let int = |it: &mut std::vec::IntoIter<Elem>| -> Result<i64> {
        match it.next().and_then(|e| e.as_int()) {
            Some(v) => Ok(v),
            None => bad("expected an integer"),
        }
    };
    let live = int(&mut it)?;
    let deleted = int(&mut it)?;
    let nmaster = int(&mut it)?;
    if live < 0 || deleted < 0 || nmaster < 0 || nmaster as usize > it.len() {
        return bad("master entry");
    }
    let master_fields: Vec<Vec<u8>> = it.by_ref().take(nmaster as usize).map(Elem::into_bytes).collect();
    if int(&mut it)? != 0 {
        return bad("master entry terminator");
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut n_live = 0usize;
    while it.len() > 0 {
        let flags = int(&mut it)?;
        let ms = master.ms.wrapping_add(int(&mut it)? as u64);
        let seq = master.seq.wrapping_add(int(&mut it)? as u64);
        let id = StreamId::new(ms, seq);
        if entries.last().is_some_and(|e| e.id >= id) || id < master {
            return bad("entry IDs out of order");
        }
        let mut fields = Vec::new();
        let lp_count = if flags & STREAM_SAMEFIELDS != 0 {
            if it.len() < master_fields.len() {
                return bad("entry values");
            }
            for f in &master_fields {
                fields.push(f.clone());
                fields.push(it.next().unwrap().into_bytes());
            }
            master_fields.len() as i64 + 3
        } else {
            let nf = int(&mut it)?;
            if nf < 0 || (nf as usize).saturating_mul(2) > it.len() {
                return bad("entry fields");
            }
            for _ in 0..nf * 2 {
                fields.push(it.next().unwrap().into_bytes());
            }
            2 * nf + 4
        };
        if int(&mut it)? != lp_count {
            return bad("entry element count");
        }
        let del = flags & STREAM_DELETED != 0;
        if !del {
            n_live += 1;
        }
        entries.push(Entry { id, fields, deleted: del });
    }
    if n_live as i64 != live || (entries.len() - n_live) as i64 != deleted {
        return bad("master entry counts");
    }
    if n_live == 0 {
        return bad("node without live entries");
    }
    Ok(Node { entries, live: n_live, bytes, master_fields })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intset_value(blob: &[u8], deep: bool) -> Result<Option<Value>> {
        let mut body = Vec::new();
        put_str(&mut body, blob, false);
        value(TYPE_SET_INTSET, &mut Input::new(&body[..], false), &LoadOpts { deep, ..LoadOpts::default() })
    }

    #[test]
    fn without_deep_checks_an_intset_is_taken_as_its_members() {
        // Width 2, three members: 5, 1, 5 — out of order and repeated.
        let blob = [2, 0, 0, 0, 3, 0, 0, 0, 5, 0, 1, 0, 5, 0];
        assert!(intset_value(&blob, true).is_err());
        assert!(take_repairs().is_empty());
        let Some(Value::Set(s)) = intset_value(&blob, false).unwrap() else { panic!("a set") };
        let mut m = s.members();
        m.sort();
        assert_eq!(m, vec![b"1".to_vec(), b"5".to_vec()]);
        let repairs = take_repairs();
        assert_eq!(repairs.len(), 2, "{repairs:?}");
        assert!(repairs[0].starts_with("Intset out of order") && repairs[1].starts_with("Intset with dup elements"));
        assert!(take_repairs().is_empty(), "taken once");
    }
}
