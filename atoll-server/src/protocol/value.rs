//! Reading a whole reply back into a tree: what a script's `redis.call` gets from the command
//! it ran (the command wrote RESP2 or RESP3 bytes through the reply builder, and Lua needs
//! values). The input is the server's own output, but it is still parsed defensively: a
//! malformed or truncated reply is `None`, never a panic.

use super::parse_i64;

#[derive(Debug, Clone, PartialEq)]
pub enum RespValue<'a> {
    Simple(&'a [u8]),
    Error(&'a [u8]),
    Int(i64),
    Bulk(&'a [u8]),
    /// `$-1`, `*-1` and RESP3's `_`.
    Null,
    Array(Vec<RespValue<'a>>),
    Map(Vec<(RespValue<'a>, RespValue<'a>)>),
    Set(Vec<RespValue<'a>>),
    Double(f64),
    Bool(bool),
    BigNumber(&'a [u8]),
    /// Format (e.g. `txt`) and text.
    Verbatim(&'a [u8], &'a [u8]),
}

/// Parses one reply at the start of `buf`; returns it and the bytes it took.
pub fn parse_reply(buf: &[u8]) -> Option<(RespValue<'_>, usize)> {
    let mut pos = 0;
    let v = parse_at(buf, &mut pos, 0)?;
    Some((v, pos))
}

/// Deeper nesting than any command's reply: a bound on recursion, not a limit in practice.
const MAX_DEPTH: usize = 64;

fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = buf.get(*pos..)?;
    let end = memchr::memchr(b'\r', rest)?;
    if rest.get(end + 1) != Some(&b'\n') {
        return None;
    }
    *pos += end + 2;
    Some(&rest[..end])
}

fn count(l: &[u8]) -> Option<Option<usize>> {
    let n = parse_i64(l)?;
    if n < 0 {
        return Some(None);
    }
    usize::try_from(n).ok().map(Some)
}

fn parse_at<'a>(buf: &'a [u8], pos: &mut usize, depth: usize) -> Option<RespValue<'a>> {
    if depth > MAX_DEPTH {
        return None;
    }
    let kind = *buf.get(*pos)?;
    *pos += 1;
    let l = line(buf, pos)?;
    let many = |buf: &'a [u8], pos: &mut usize, n: usize| -> Option<Vec<RespValue<'a>>> {
        // Every element takes at least 3 bytes: never reserve more than the input can hold.
        let mut v = Vec::with_capacity(n.min(buf.len() / 3));
        for _ in 0..n {
            v.push(parse_at(buf, pos, depth + 1)?);
        }
        Some(v)
    };
    Some(match kind {
        b'+' => RespValue::Simple(l),
        b'-' => RespValue::Error(l),
        b':' => RespValue::Int(parse_i64(l)?),
        b'$' | b'=' => {
            let Some(n) = count(l)? else { return Some(RespValue::Null) };
            let body = buf.get(*pos..pos.checked_add(n)?)?;
            if buf.get(*pos + n..*pos + n + 2)? != b"\r\n" {
                return None;
            }
            *pos += n + 2;
            if kind == b'=' {
                if body.len() < 4 || body[3] != b':' {
                    return None;
                }
                RespValue::Verbatim(&body[..3], &body[4..])
            } else {
                RespValue::Bulk(body)
            }
        }
        b'*' | b'>' | b'~' => {
            let Some(n) = count(l)? else { return Some(RespValue::Null) };
            let items = many(buf, pos, n)?;
            if kind == b'~' {
                RespValue::Set(items)
            } else {
                RespValue::Array(items)
            }
        }
        b'%' => {
            let n = count(l)??;
            let mut flat = many(buf, pos, n.checked_mul(2)?)?.into_iter();
            let mut pairs = Vec::with_capacity(n);
            while let (Some(k), Some(v)) = (flat.next(), flat.next()) {
                pairs.push((k, v));
            }
            RespValue::Map(pairs)
        }
        b'|' => {
            // An attribute precedes the real reply; scripts ignore it, as Redis's do.
            let n = count(l)??;
            many(buf, pos, n.checked_mul(2)?)?;
            return parse_at(buf, pos, depth + 1);
        }
        b'_' => RespValue::Null,
        b',' => {
            let s = std::str::from_utf8(l).ok()?;
            RespValue::Double(match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                "nan" => f64::NAN,
                _ => s.parse().ok()?,
            })
        }
        b'#' => match l {
            b"t" => RespValue::Bool(true),
            b"f" => RespValue::Bool(false),
            _ => return None,
        },
        b'(' => RespValue::BigNumber(l),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back() {
        let (v, n) = parse_reply(b"*3\r\n:1\r\n$-1\r\n%1\r\n+a\r\n,1.5\r\nrest").unwrap();
        assert_eq!(n, 27);
        assert_eq!(
            v,
            RespValue::Array(vec![
                RespValue::Int(1),
                RespValue::Null,
                RespValue::Map(vec![(RespValue::Simple(b"a"), RespValue::Double(1.5))])
            ])
        );
        assert_eq!(parse_reply(b"=7\r\ntxt:abc\r\n").unwrap().0, RespValue::Verbatim(b"txt", b"abc"));
        assert_eq!(parse_reply(b"~1\r\n#t\r\n").unwrap().0, RespValue::Set(vec![RespValue::Bool(true)]));
        assert_eq!(parse_reply(b"|1\r\n+k\r\n+v\r\n:5\r\n").unwrap().0, RespValue::Int(5));
        assert_eq!(parse_reply(b"(123\r\n").unwrap().0, RespValue::BigNumber(b"123"));
    }

    #[test]
    fn malformed_replies_are_refused() {
        for bad in [&b"$5\r\nab\r\n"[..], b"*2\r\n:1\r\n", b"*99999999999\r\n", b"?x\r\n", b":1\n"] {
            assert!(parse_reply(bad).is_none(), "{:?}", bad);
        }
    }
}
