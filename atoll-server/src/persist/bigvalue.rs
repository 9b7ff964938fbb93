//! Big values in a snapshot, written piece by piece.
//!
//! A snapshot serializes a shard under its lock (`engine::Snapshots`); a value of millions of
//! elements would hold that lock — and every command on the shard's other keys — for as long
//! as it takes to write. So a big value is only *started* there: its record's head goes into
//! a state kept with the shard (`engine::Deferred`), and the snapshot's walk then writes it a
//! piece at a time, taking the shard's lock for one piece and letting go in between. Nothing
//! changes the value meanwhile: a command about to use that key first writes the rest of it
//! (`Snapshots::finish`), as a command about to change a shard serializes it first. The
//! record is queued whole once its last piece is written, so the file never interleaves it
//! with other records; the extra memory is that record, not a copy of the value.
//!
//! Pieces resume where the last one stopped, which is well defined because the value does not
//! change: a string by byte offset, a hashtable by SCAN cursor (exactly once per element when
//! the table does not change: a dict rehashes only when written), a skiplist by rank, a
//! quicklist by node.

use crate::engine::rdb::{self, blobs::LpWriter, save::SaveOpts};
use crate::engine::Value;

/// A value is big above this many elements (hashtable, skiplist or quicklist encodings; the
/// compact encodings are small by their thresholds) or bytes (strings).
pub const BIG_ELEMS: usize = 16 * 1024;
pub const BIG_BYTES: usize = 1 << 20;
/// What one piece covers, at most (about): elements, or bytes of a string.
const PIECE_ELEMS: usize = 1024;
const PIECE_BYTES: usize = 256 << 10;

pub fn is_big(v: &Value) -> bool {
    match v {
        Value::List(l) => l.len() > BIG_ELEMS,
        Value::Hash(h) => h.encoding() == "hashtable" && h.len() > BIG_ELEMS,
        Value::Set(s) => s.encoding() == "hashtable" && s.len() > BIG_ELEMS,
        Value::ZSet(z) => z.encoding() == "skiplist" && z.len() > BIG_ELEMS,
        Value::Str(_) | Value::Raw(_) => v.text_bytes().is_some_and(|b| b.len() > BIG_BYTES),
        _ => false,
    }
}

/// The form records are written in: RDB records, or commands (an AOF base without an RDB
/// preamble).
#[derive(Clone, Copy)]
pub enum Form {
    Rdb,
    Commands,
}

/// A big value being written: the record so far and where the next piece starts.
pub struct BigValue {
    /// The piece being written.
    out: Vec<u8>,
    /// Pieces written before it. Kept apart, not appended to one buffer: growing a buffer of
    /// tens of megabytes copies it, under the shard's lock.
    pieces: Vec<Vec<u8>>,
    form: Form,
    expire: Option<i64>,
    at: At,
}

enum At {
    /// A string: the next byte.
    Bytes(usize),
    /// A hashtable: the SCAN cursor (`started` once the first step ran; 0 then means done).
    Cursor { cursor: u64, started: bool },
    /// A skiplist: elements written, greatest first.
    Rank(usize),
    /// A quicklist: its nodes (elements, plain) as the saver cuts them, the next node, and
    /// the elements before it.
    Nodes { runs: Vec<(usize, bool)>, next: usize, elem: usize },
}

impl BigValue {
    /// Starts the record of `key` (in `db`, with `expire`) holding the big value `v`.
    pub fn start(form: Form, db: usize, key: &[u8], v: &Value, expire: Option<i64>, o: &SaveOpts) -> BigValue {
        let mut out = Vec::new();
        let at = match v {
            Value::List(l) => {
                let runs = l.quicklist_runs(o.list_fill).into_iter().map(|(n, _, plain)| (n, plain)).collect();
                At::Nodes { runs, next: 0, elem: 0 }
            }
            Value::Hash(_) | Value::Set(_) => At::Cursor { cursor: 0, started: false },
            Value::ZSet(_) => At::Rank(0),
            _ => At::Bytes(0),
        };
        match form {
            Form::Rdb => {
                out.push(rdb::OP_SELECTDB);
                rdb::put_len(&mut out, db as u64);
                if let Some(t) = expire {
                    out.push(rdb::OP_EXPIRETIME_MS);
                    rdb::put_ms(&mut out, t);
                }
                out.push(rdb::save::type_byte(v));
                rdb::put_str(&mut out, key, o.compress);
                match (&at, v) {
                    // Written plain: LZF needs the whole string first.
                    (At::Bytes(_), _) => rdb::put_len(&mut out, v.text_bytes().map_or(0, |b| b.len()) as u64),
                    (At::Nodes { runs, .. }, _) => rdb::put_len(&mut out, runs.len() as u64),
                    (_, Value::Hash(h)) => rdb::put_len(&mut out, h.len() as u64),
                    (_, Value::Set(s)) => rdb::put_len(&mut out, s.len() as u64),
                    (_, Value::ZSet(z)) => rdb::put_len(&mut out, z.len() as u64),
                    _ => {}
                }
            }
            Form::Commands => {
                super::aof::encode(&mut out, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
                if let At::Bytes(_) = at {
                    // `SET key <value>`, the value's bulk header now, its bytes piece by piece.
                    let len = v.text_bytes().map_or(0, |b| b.len());
                    let k = key.len().to_string();
                    out.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n${k}\r\n").as_bytes());
                    out.extend_from_slice(key);
                    out.extend_from_slice(format!("\r\n${len}\r\n").as_bytes());
                }
            }
        }
        BigValue { out, pieces: Vec::new(), form, expire, at }
    }

    /// The record's bytes, in order (once `piece` returned true).
    pub fn into_pieces(mut self) -> Vec<Vec<u8>> {
        self.pieces.push(self.out);
        self.pieces
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum::<usize>() + self.out.len()
    }

    /// Writes the next piece of `key`'s value `v` (unchanged since `start`); true once the
    /// record is complete.
    pub fn piece(&mut self, key: &[u8], v: &Value, o: &SaveOpts) -> bool {
        let done = match (&mut self.at, v) {
            (At::Bytes(pos), _) => {
                let b = v.text_bytes().unwrap_or_default();
                let end = (*pos + PIECE_BYTES).min(b.len());
                self.out.extend_from_slice(&b[*pos..end]);
                *pos = end;
                end == b.len()
            }
            (At::Cursor { cursor, started }, Value::Hash(h)) => {
                let mut items: Vec<Vec<Vec<u8>>> = Vec::new();
                while !(*started && *cursor == 0) && items.len() < PIECE_ELEMS {
                    *started = true;
                    *cursor = h.scan(*cursor, |f, val| items.push(vec![f.to_vec(), val.to_vec()]));
                }
                put_items(&mut self.out, self.form, b"HMSET", key, items, o);
                *cursor == 0
            }
            (At::Cursor { cursor, started }, Value::Set(s)) => {
                let mut items: Vec<Vec<Vec<u8>>> = Vec::new();
                while !(*started && *cursor == 0) && items.len() < PIECE_ELEMS {
                    *started = true;
                    *cursor = s.scan(*cursor, PIECE_ELEMS, |m| items.push(vec![m.to_vec()]));
                }
                put_items(&mut self.out, self.form, b"SADD", key, items, o);
                *cursor == 0
            }
            (At::Rank(done), Value::ZSet(z)) => {
                // Greatest first (as `save::value`): ranks len-1-done down to …
                let len = z.len();
                let hi = len - 1 - *done;
                let lo = hi.saturating_sub(PIECE_ELEMS - 1);
                let mut items: Vec<Vec<Vec<u8>>> = Vec::with_capacity(hi - lo + 1);
                z.for_range(lo, hi, true, |m, score| {
                    let mut s = Vec::new();
                    match self.form {
                        Form::Rdb => rdb::put_double_bin(&mut s, score),
                        Form::Commands => crate::protocol::reply::fmt_double(score, &mut s),
                    }
                    items.push(vec![m.to_vec(), s]);
                });
                *done += hi - lo + 1;
                put_items(&mut self.out, self.form, b"ZADD", key, items, o);
                *done == len
            }
            (At::Nodes { runs, next, elem }, Value::List(l)) => {
                let mut it = l.iter().skip(*elem);
                let mut items: Vec<Vec<Vec<u8>>> = Vec::new();
                let mut count = 0;
                while *next < runs.len() && count < PIECE_ELEMS {
                    let (n, plain) = runs[*next];
                    count += n;
                    match self.form {
                        Form::Rdb if plain => {
                            rdb::put_len(&mut self.out, rdb::QL_PLAIN);
                            rdb::put_str(&mut self.out, &it.next().unwrap_or_default(), o.compress);
                        }
                        Form::Rdb => {
                            rdb::put_len(&mut self.out, rdb::QL_PACKED);
                            let mut w = LpWriter::new();
                            for e in it.by_ref().take(n) {
                                w.push(&e);
                            }
                            rdb::put_str(&mut self.out, &w.finish(), o.compress);
                        }
                        Form::Commands => items.extend(it.by_ref().take(n).map(|e| vec![e.to_vec()])),
                    }
                    *next += 1;
                    *elem += n;
                }
                if let Form::Commands = self.form {
                    super::aof::batched(&mut self.out, b"RPUSH", key, items.into_iter());
                }
                *next == runs.len()
            }
            // The value changed type under the snapshot: cannot happen (whoever changes it
            // finishes it first); end the record rather than loop.
            _ => true,
        };
        if done {
            self.end(key);
        } else if self.out.len() >= PIECE_BYTES / 4 {
            self.pieces.push(std::mem::take(&mut self.out));
        }
        done
    }

    fn end(&mut self, key: &[u8]) {
        if let Form::Commands = self.form {
            if let At::Bytes(_) = self.at {
                self.out.extend_from_slice(b"\r\n");
            }
            if let Some(t) = self.expire {
                super::aof::encode(&mut self.out, &[b"PEXPIREAT".to_vec(), key.to_vec(), t.to_string().into_bytes()]);
            }
        }
    }
}

/// Appends a piece of a collection's elements (each one or two words).
fn put_items(out: &mut Vec<u8>, form: Form, cmd: &[u8], key: &[u8], items: Vec<Vec<Vec<u8>>>, o: &SaveOpts) {
    match form {
        Form::Rdb => {
            for it in items {
                match cmd {
                    // A member, then its binary score.
                    b"ZADD" => {
                        rdb::put_str(out, &it[0], o.compress);
                        out.extend_from_slice(&it[1]);
                    }
                    _ => {
                        for w in &it {
                            rdb::put_str(out, w, o.compress);
                        }
                    }
                }
            }
        }
        Form::Commands => {
            // ZADD takes the score first.
            let items = items.into_iter().map(|mut it| {
                if cmd == b"ZADD" {
                    it.swap(0, 1);
                }
                it
            });
            super::aof::batched(out, cmd, key, items);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rdb::load::{value, LoadOpts};
    use crate::engine::rdb::{Input, TYPE_HASH, TYPE_LIST, TYPE_SET, TYPE_STRING, TYPE_ZSET_2};

    /// A value of RDB type `t` built by the loader from `n` generated elements.
    fn build(t: u8, n: usize) -> Value {
        let mut body = Vec::new();
        if t == TYPE_STRING {
            let s: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            rdb::put_str(&mut body, &s, false);
        } else {
            rdb::put_len(&mut body, n as u64);
            for i in 0..n {
                rdb::put_str(&mut body, format!("member:{i}").as_bytes(), false);
                match t {
                    TYPE_HASH => rdb::put_str(&mut body, format!("value:{}", i * 7).as_bytes(), false),
                    TYPE_ZSET_2 => rdb::put_double_bin(&mut body, (i % 1000) as f64 / 3.0),
                    _ => {}
                }
            }
        }
        value(t, &mut Input::new(&body[..], false), &LoadOpts::default()).unwrap().unwrap()
    }

    /// What a value holds, in an order that does not depend on its layout.
    fn content(v: &Value) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        match v {
            Value::List(l) => return l.iter().map(|e| e.to_vec()).collect(),
            Value::Hash(h) => h.for_each(|f, x| out.push([f, b"=", x].concat())),
            Value::Set(s) => s.for_each(|m| out.push(m.to_vec())),
            Value::ZSet(z) => z.for_each(|m, s| out.push([m, format!("={s}").as_bytes()].concat())),
            _ => return vec![v.text_bytes().unwrap().to_vec()],
        }
        out.sort();
        out
    }

    /// Written piece by piece, a big value of every kind reads back as the same value, with
    /// its expiry, in a record a loader takes whole.
    #[test]
    fn big_values_written_in_pieces_read_back_whole() {
        let o = SaveOpts::default();
        for (t, n) in [
            (TYPE_HASH, 40_000),
            (TYPE_SET, 40_000),
            (TYPE_ZSET_2, 40_000),
            (TYPE_LIST, 50_000),
            (TYPE_STRING, 3 << 20),
        ] {
            let v = build(t, n);
            assert!(is_big(&v), "type {t}");
            let mut bv = BigValue::start(Form::Rdb, 3, b"big", &v, Some(1234), &o);
            let mut pieces = 1;
            while !bv.piece(b"big", &v, &o) {
                pieces += 1;
            }
            assert!(pieces > 2, "type {t}: {pieces} pieces");
            let len = bv.bytes();
            let record = bv.into_pieces().concat();
            assert_eq!(record.len(), len);
            let mut inp = Input::new(&record[..], false);
            assert_eq!(inp.u8().unwrap(), rdb::OP_SELECTDB);
            assert_eq!(inp.length().unwrap(), 3);
            assert_eq!(inp.u8().unwrap(), rdb::OP_EXPIRETIME_MS);
            assert_eq!(inp.ms().unwrap(), 1234);
            let ty = inp.u8().unwrap();
            assert_eq!(inp.string().unwrap(), b"big");
            let back = value(ty, &mut inp, &LoadOpts::default()).unwrap().unwrap();
            assert_eq!(inp.pos as usize, record.len(), "type {t}: the record ends where the value does");
            assert_eq!(content(&back), content(&v), "type {t}");
            assert_eq!(back.encoding(), v.encoding(), "type {t}");
        }
    }
}
