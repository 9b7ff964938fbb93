//! Streams (Redis's `t_stream.c`): the commands, in submodules (`cmds`: XADD, XRANGE, XREAD …;
//! `group`: consumer groups; `info`: XINFO), and what they share: ID parsing, replies. The
//! stream value itself is `engine::stream`.

pub mod cmds;
pub mod group;
pub mod info;

pub use cmds::*;
pub use group::*;
pub use info::*;

pub use crate::engine::stream::*;
use crate::exec::{CmdError, KsView};
use crate::protocol::Reply;

pub const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Redis's `string2ull`: a canonical non-negative integer, or whatever C's `strtoull` accepts
/// over the whole string (leading blanks, a sign; a `-` wraps around).
fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::protocol::parse_i64(s) {
        return (v >= 0).then_some(v as u64);
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    if i == s.len() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in &s[i..] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// How an ID argument is parsed (Redis's `streamGenericParseIDOrReply`).
#[derive(Clone, Copy)]
pub struct IdParse {
    /// The sequence used when only `<ms>` is given (0 for a start, MAX for an end).
    pub missing_seq: u64,
    /// Strict: `-` and `+` are not accepted.
    pub strict: bool,
    /// XADD: `<ms>-*` is accepted.
    pub seq_star: bool,
}

/// A parsed ID and whether its sequence was given (false for XADD's `<ms>-*`).
pub fn parse_id_full(arg: &[u8], how: IdParse) -> Result<(StreamId, bool), CmdError> {
    let invalid = || CmdError::msg(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid());
    }
    // Redis works on a C string: anything after a NUL byte is ignored.
    let arg = match arg.iter().position(|&b| b == 0) {
        Some(p) => &arg[..p],
        None => arg,
    };
    if arg == b"-" || arg == b"+" {
        if how.strict {
            return Err(invalid());
        }
        return Ok((if arg == b"-" { StreamId::MIN } else { StreamId::MAX }, true));
    }
    match arg.iter().position(|&b| b == b'-') {
        None => Ok((StreamId::new(parse_u64(arg).ok_or_else(invalid)?, how.missing_seq), true)),
        Some(d) => {
            let ms = parse_u64(&arg[..d]).ok_or_else(invalid)?;
            let rest = &arg[d + 1..];
            if how.seq_star && rest == b"*" {
                return Ok((StreamId::new(ms, 0), false));
            }
            Ok((StreamId::new(ms, parse_u64(rest).ok_or_else(invalid)?), true))
        }
    }
}

/// A non-strict ID (`-` and `+` allowed).
pub fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id_full(arg, IdParse { missing_seq, strict: false, seq_star: false }).map(|x| x.0)
}

/// A strict ID (no `-`/`+`).
pub fn parse_strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_full(arg, IdParse { missing_seq: 0, strict: true, seq_star: false }).map(|x| x.0)
}

/// A range bound that may be exclusive (`(id`), Redis's `streamParseIntervalIDOrReply`.
/// Returns the ID and whether it was exclusive.
pub fn parse_interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let how = IdParse { missing_seq, strict: true, seq_star: false };
        Ok((parse_id_full(&arg[1..], how)?.0, true))
    } else {
        Ok((parse_id(arg, missing_seq)?, false))
    }
}

/// The start of a range: `(id` moves to the next ID.
pub fn parse_range_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = parse_interval_id(arg, 0)?;
    if ex {
        id.incr().ok_or_else(|| CmdError::msg("ERR invalid start ID for the interval"))
    } else {
        Ok(id)
    }
}

/// The end of a range: `(id` moves to the previous ID.
pub fn parse_range_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = parse_interval_id(arg, u64::MAX)?;
    if ex {
        id.decr().ok_or_else(|| CmdError::msg("ERR invalid end ID for the interval"))
    } else {
        Ok(id)
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the command modules
// ---------------------------------------------------------------------------------------------

pub(crate) fn reply_id(reply: &mut Reply, id: StreamId) {
    reply.bulk(&id.to_bytes());
}

/// One entry as `[id, [field, value, ...]]`.
pub(crate) fn reply_entry(reply: &mut Reply, e: &Entry) {
    reply.array(2);
    reply_id(reply, e.id);
    reply.array(e.fields.len());
    for f in &e.fields {
        reply.bulk(f);
    }
}

pub(crate) fn reply_entries(reply: &mut Reply, entries: &[&Entry]) {
    reply.array(entries.len());
    for e in entries {
        reply_entry(reply, e);
    }
}

pub(crate) fn i64_bytes(v: i64) -> Vec<u8> {
    itoa::Buffer::new().format(v).as_bytes().to_vec()
}

/// The XCLAIM a delivery or claim is propagated as, so replicas and the AOF reproduce the PEL
/// exactly (Redis's `streamPropagateXCLAIM`).
pub(crate) fn propagate_xclaim(ks: &mut KsView, key: &[u8], group_name: &[u8], g: &Group, id: StreamId, nack: &Nack) {
    ks.effect(vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group_name.to_vec(),
        nack.consumer.clone(),
        b"0".to_vec(),
        id.to_bytes(),
        b"TIME".to_vec(),
        i64_bytes(nack.delivery_time),
        b"RETRYCOUNT".to_vec(),
        i64_bytes(nack.delivery_count as i64),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        g.last_id.to_bytes(),
    ]);
}

/// `XGROUP SETID key group last-id ENTRIESREAD n`, propagating a group's position.
pub(crate) fn propagate_group_id(ks: &mut KsView, key: &[u8], group_name: &[u8], g: &Group) {
    ks.effect(vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group_name.to_vec(),
        g.last_id.to_bytes(),
        b"ENTRIESREAD".to_vec(),
        i64_bytes(g.entries_read),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    #[test]
    fn parses_ids_like_redis() {
        assert_eq!(parse_id(b"5", 0).unwrap(), id(5, 0));
        assert_eq!(parse_id(b"5", u64::MAX).unwrap(), id(5, u64::MAX));
        assert_eq!(parse_id(b"5-3", 0).unwrap(), id(5, 3));
        assert_eq!(parse_id(b"-", 0).unwrap(), StreamId::MIN);
        assert_eq!(parse_id(b"+", 0).unwrap(), StreamId::MAX);
        assert!(parse_strict_id(b"-").is_err());
        assert!(parse_strict_id(b"+").is_err());
        assert!(parse_id(b"-5", 0).is_err());
        assert!(parse_id(b"5-", 0).is_err());
        assert!(parse_id(b"a-1", 0).is_err());
        assert!(parse_id(b"1-2-3", 0).is_err());
        assert_eq!(parse_id(b"18446744073709551615-18446744073709551615", 0).unwrap(), StreamId::MAX);
        assert!(parse_id(b"18446744073709551616", 0).is_err());
        assert_eq!(parse_id(b"+7", 0).unwrap(), id(7, 0));
        let how = IdParse { missing_seq: 0, strict: true, seq_star: true };
        assert_eq!(parse_id_full(b"7-*", how).unwrap(), (id(7, 0), false));
        assert!(parse_id(b"7-*", 0).is_err());
        assert_eq!(parse_range_start(b"(5-1").unwrap(), id(5, 2));
        assert_eq!(parse_range_end(b"(5-0").unwrap(), id(4, u64::MAX));
        assert!(parse_range_end(b"(0-0").is_err());
        assert!(parse_range_start(b"(+").is_err());
    }
}
