//! A value's RDB type byte and body, as Redis 7.2's `rdbSaveObjectType`/`rdbSaveObject` write
//! them for the encoding the value has (OBJECT ENCODING): a listpack-encoded hash is saved as
//! a listpack blob, a hashtable one as field-value pairs, and so on.

use super::blobs::{intset_blob, LpWriter};
use super::*;
use crate::engine::stream::{Node, Stream, StreamId};
use crate::engine::Value;

/// What saving needs from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct SaveOpts {
    /// `rdbcompression`: LZF for strings over 20 bytes.
    pub compress: bool,
    /// `list-max-listpack-size`: how a quicklist is cut into nodes.
    pub list_fill: i64,
    /// `rdb-key-save-delay` (tests slow saves down with it).
    pub key_delay_us: i64,
}

impl Default for SaveOpts {
    fn default() -> Self {
        SaveOpts { compress: true, list_fill: -2, key_delay_us: 0 }
    }
}

/// The RDB type byte for a value's current encoding.
pub fn type_byte(v: &Value) -> u8 {
    match v {
        Value::List(_) => TYPE_LIST_QUICKLIST_2,
        Value::Hash(h) if h.has_ttls() => TYPE_HASH_2,
        Value::Hash(h) if h.encoding() == "listpack" => TYPE_HASH_LISTPACK,
        Value::Hash(_) => TYPE_HASH,
        Value::Set(s) => match s.encoding() {
            "intset" => TYPE_SET_INTSET,
            "listpack" => TYPE_SET_LISTPACK,
            _ => TYPE_SET,
        },
        Value::ZSet(z) if z.encoding() == "listpack" => TYPE_ZSET_LISTPACK,
        Value::ZSet(_) => TYPE_ZSET_2,
        Value::Stream(_) => TYPE_STREAM_LISTPACKS_3,
        _ => TYPE_STRING,
    }
}

/// Appends the value's body (what follows the type byte and the key).
pub fn value(out: &mut Vec<u8>, v: &Value, o: &SaveOpts) {
    match v {
        Value::Int(i) => put_int_str(out, *i),
        Value::Emb { .. } | Value::Str(_) | Value::Raw(_) => put_str(out, v.text_bytes().unwrap(), o.compress),
        Value::List(l) => {
            let runs = l.quicklist_runs(o.list_fill);
            // A listpack-encoded list is saved as a quicklist of one node, as Redis does.
            let runs = if l.encoding() == "listpack" { vec![(l.len(), 0, false)] } else { runs };
            put_len(out, runs.len() as u64);
            let mut it = l.iter();
            for (n, _, plain) in runs {
                if plain {
                    put_len(out, QL_PLAIN);
                    put_str(out, &it.next().unwrap(), o.compress);
                } else {
                    put_len(out, QL_PACKED);
                    let mut w = LpWriter::new();
                    for e in it.by_ref().take(n) {
                        w.push(&e);
                    }
                    put_str(out, &w.finish(), o.compress);
                }
            }
        }
        Value::Hash(h) if h.has_ttls() => {
            put_len(out, h.len() as u64);
            h.for_each_with_ttl(|f, v, ttl| {
                put_str(out, f, o.compress);
                put_str(out, v, o.compress);
                out.extend_from_slice(&ttl.unwrap_or(-1).to_le_bytes());
            });
        }
        Value::Hash(h) => {
            if h.encoding() == "listpack" {
                let mut w = LpWriter::new();
                h.for_each(|f, v| {
                    w.push(f);
                    w.push(v);
                });
                put_str(out, &w.finish(), o.compress);
            } else {
                put_len(out, h.len() as u64);
                h.for_each(|f, v| {
                    put_str(out, f, o.compress);
                    put_str(out, v, o.compress);
                });
            }
        }
        Value::Set(s) => match (s.ints(), s.encoding()) {
            (Some(ints), _) => put_str(out, &intset_blob(ints.to_vec()), o.compress),
            (None, "listpack") => {
                let mut w = LpWriter::new();
                s.for_each(|m| w.push(m));
                put_str(out, &w.finish(), o.compress);
            }
            _ => {
                put_len(out, s.len() as u64);
                s.for_each(|m| put_str(out, m, o.compress));
            }
        },
        Value::ZSet(z) => {
            if z.encoding() == "listpack" {
                let mut w = LpWriter::new();
                z.for_each(|m, score| {
                    w.push(m);
                    push_score(&mut w, score);
                });
                put_str(out, &w.finish(), o.compress);
            } else {
                // Greatest first, as Redis saves its skiplist (loading then inserts at the
                // head each time).
                put_len(out, z.len() as u64);
                z.for_range(0, z.len() - 1, true, |m, score| {
                    put_str(out, m, o.compress);
                    put_double_bin(out, score);
                });
            }
        }
        Value::Stream(s) => stream(out, s, o),
    }
}

/// A score inside a zset listpack: an integral score as an integer, else the shortest text
/// that reads back as the same double (Redis's `zzlInsertAt` uses `d2string`, %.17g).
fn push_score(w: &mut LpWriter, score: f64) {
    let mut buf = Vec::new();
    crate::protocol::reply::fmt_double(score, &mut buf);
    w.push(&buf);
}

fn stream(out: &mut Vec<u8>, s: &Stream, o: &SaveOpts) {
    put_len(out, s.nodes.len() as u64);
    for (master, node) in &s.nodes {
        put_str(out, &master.key_bytes(), o.compress);
        put_str(out, &node_listpack(*master, node), o.compress);
    }
    put_len(out, s.length);
    for id in [s.last_id, s.first_id, s.max_deleted_id] {
        put_len(out, id.ms);
        put_len(out, id.seq);
    }
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_str(out, name, o.compress);
        put_len(out, g.last_id.ms);
        put_len(out, g.last_id.seq);
        put_len(out, g.entries_read as u64);
        put_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&id.key_bytes());
            put_ms(out, nack.delivery_time);
            put_len(out, nack.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_str(out, cname, o.compress);
            put_ms(out, c.seen_time);
            put_ms(out, c.active_time);
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&id.key_bytes());
            }
        }
    }
}

/// Entry flags inside a stream listpack.
pub const STREAM_DELETED: i64 = 1;
pub const STREAM_SAMEFIELDS: i64 = 2;

/// A stream node as Redis's listpack: the master entry (live count, deleted count, the
/// master fields, a 0 terminator), then each entry — flags, ID as a difference from the
/// master ID, its fields unless they are the master's, its values, and the entry's element
/// count so it can be walked backwards.
fn node_listpack(master: StreamId, n: &Node) -> Vec<u8> {
    let mut w = LpWriter::new();
    w.push_int(n.live as i64);
    w.push_int((n.entries.len() - n.live) as i64);
    w.push_int(n.master_fields.len() as i64);
    for f in &n.master_fields {
        w.push(f);
    }
    w.push_int(0);
    for e in &n.entries {
        let same = e.fields.len() == n.master_fields.len() * 2
            && e.fields.iter().step_by(2).zip(&n.master_fields).all(|(a, b)| a == b);
        let mut flags = 0;
        if e.deleted {
            flags |= STREAM_DELETED;
        }
        if same {
            flags |= STREAM_SAMEFIELDS;
        }
        w.push_int(flags);
        w.push_int(e.id.ms.wrapping_sub(master.ms) as i64);
        w.push_int(e.id.seq.wrapping_sub(master.seq) as i64);
        let nf = e.fields.len() / 2;
        if same {
            for v in e.fields.iter().skip(1).step_by(2) {
                w.push(v);
            }
            w.push_int(nf as i64 + 3);
        } else {
            w.push_int(nf as i64);
            for f in &e.fields {
                w.push(f);
            }
            w.push_int(2 * nf as i64 + 4);
        }
    }
    w.finish()
}
