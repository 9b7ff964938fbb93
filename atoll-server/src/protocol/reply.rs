//! Reply builder: commands describe replies, this module turns them into RESP2 or RESP3 bytes.
//!
//! Commands never write protocol bytes themselves. They call these methods, and the builder
//! picks the encoding for the client's protocol version: a map is `%n` in RESP3 and a flat
//! `*2n` array in RESP2, a null is `_` or `$-1`, a double is `,` or a bulk string, and so on.

use std::io::Write;

/// The protocol version a client negotiated with HELLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Resp2,
    Resp3,
}

/// A position in the output where an aggregate length will be filled in later.
#[derive(Debug, Clone, Copy)]
pub struct Deferred {
    pos: usize,
    kind: u8,
}

pub struct Reply {
    pub buf: Vec<u8>,
    pub proto: Proto,
}

/// Formats a double the way Redis 7.2 does in replies: the shortest text that reads back as
/// the same double, `inf`/`-inf`/`nan` for the special values, and `%.17g`-style exponent
/// notation for very large or small magnitudes.
pub fn fmt_double(d: f64, out: &mut Vec<u8>) {
    if d.is_nan() {
        out.extend_from_slice(b"nan");
    } else if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" });
    } else if d == 0.0 {
        out.extend_from_slice(if d.is_sign_negative() { b"-0" } else { b"0" });
    } else {
        // Shortest round-trip digits from Rust's formatter in scientific form, then laid out
        // as %g would: plain notation when the decimal exponent is in [-5, 17).
        let sci = format!("{:e}", d);
        let (mant, exp) = sci.split_once('e').unwrap();
        let exp: i32 = exp.parse().unwrap();
        if (-5..17).contains(&exp) {
            let _ = write!(out, "{}", d);
        } else {
            let _ = write!(out, "{}e{}{:02}", mant, if exp < 0 { '-' } else { '+' }, exp.abs());
        }
    }
}

impl Reply {
    pub fn new(proto: Proto) -> Self {
        Reply { buf: Vec::new(), proto }
    }

    fn header(&mut self, prefix: u8, n: usize) {
        self.buf.push(prefix);
        let mut b = itoa::Buffer::new();
        self.buf.extend_from_slice(b.format(n).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A simple string; must not contain CR or LF.
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error reply. `msg` is the full text after the `-` (e.g. `ERR syntax error`); CR and LF
    /// inside it are replaced by spaces, as Redis does, so the reply stays one line.
    pub fn error(&mut self, msg: &str) {
        self.buf.push(b'-');
        for &c in msg.as_bytes() {
            self.buf.push(if c == b'\r' || c == b'\n' { b' ' } else { c });
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn int(&mut self, v: i64) {
        self.buf.push(b':');
        let mut b = itoa::Buffer::new();
        self.buf.extend_from_slice(b.format(v).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn bulk(&mut self, s: &[u8]) {
        self.header(b'$', s.len());
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn bulk_i64(&mut self, v: i64) {
        let mut b = itoa::Buffer::new();
        let s = b.format(v);
        self.bulk(s.as_bytes());
    }

    /// The null bulk string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        match self.proto {
            Proto::Resp2 => self.buf.extend_from_slice(b"$-1\r\n"),
            Proto::Resp3 => self.buf.extend_from_slice(b"_\r\n"),
        }
    }

    /// The null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        match self.proto {
            Proto::Resp2 => self.buf.extend_from_slice(b"*-1\r\n"),
            Proto::Resp3 => self.buf.extend_from_slice(b"_\r\n"),
        }
    }

    pub fn array(&mut self, n: usize) {
        self.header(b'*', n);
    }

    /// A map of `n` pairs: `%n` in RESP3, a flat array of 2n in RESP2.
    pub fn map(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', n * 2),
            Proto::Resp3 => self.header(b'%', n),
        }
    }

    /// A set: `~n` in RESP3, an array in RESP2.
    pub fn set(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', n),
            Proto::Resp3 => self.header(b'~', n),
        }
    }

    /// A push message: `>n` in RESP3, an array in RESP2.
    pub fn push(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', n),
            Proto::Resp3 => self.header(b'>', n),
        }
    }

    /// A double: `,d` in RESP3, a bulk string in RESP2.
    pub fn double(&mut self, d: f64) {
        let mut tmp = Vec::with_capacity(24);
        fmt_double(d, &mut tmp);
        match self.proto {
            Proto::Resp2 => self.bulk(&tmp),
            Proto::Resp3 => {
                self.buf.push(b',');
                self.buf.extend_from_slice(&tmp);
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn bool(&mut self, b: bool) {
        match self.proto {
            Proto::Resp2 => self.int(b as i64),
            Proto::Resp3 => self.buf.extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" }),
        }
    }

    /// Verbatim text (`=len\r\ntxt:...`) in RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        match self.proto {
            Proto::Resp2 => self.bulk(text),
            Proto::Resp3 => {
                self.header(b'=', text.len() + 4);
                self.buf.extend_from_slice(format.as_bytes());
                self.buf.push(b':');
                self.buf.extend_from_slice(text);
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }

    /// Starts an aggregate whose length is not known yet (`kind` is `*`, `%` or `~`).
    pub fn defer(&mut self, kind: u8) -> Deferred {
        Deferred { pos: self.buf.len(), kind }
    }

    /// Fills in a deferred aggregate with `n` elements (pairs for a map).
    pub fn set_deferred(&mut self, d: Deferred, n: usize) {
        let (prefix, count) = match (d.kind, self.proto) {
            (b'%', Proto::Resp2) => (b'*', n * 2),
            (b'~', Proto::Resp2) => (b'*', n),
            (k, _) => (k, n),
        };
        let mut h = Vec::with_capacity(16);
        h.push(prefix);
        let mut b = itoa::Buffer::new();
        h.extend_from_slice(b.format(count).as_bytes());
        h.extend_from_slice(b"\r\n");
        self.buf.splice(d.pos..d.pos, h);
    }

    /// Appends already-encoded RESP bytes.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(f: impl Fn(&mut Reply)) -> (String, String) {
        let mut a = Reply::new(Proto::Resp2);
        f(&mut a);
        let mut b = Reply::new(Proto::Resp3);
        f(&mut b);
        (String::from_utf8(a.buf).unwrap(), String::from_utf8(b.buf).unwrap())
    }

    #[test]
    fn golden_reply_kinds() {
        assert_eq!(both(|r| r.null()), ("$-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(|r| r.null_array()), ("*-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(|r| r.map(2)), ("*4\r\n".into(), "%2\r\n".into()));
        assert_eq!(both(|r| r.set(3)), ("*3\r\n".into(), "~3\r\n".into()));
        assert_eq!(both(|r| r.push(3)), ("*3\r\n".into(), ">3\r\n".into()));
        assert_eq!(both(|r| r.bool(true)), (":1\r\n".into(), "#t\r\n".into()));
        assert_eq!(both(|r| r.double(1.5)), ("$3\r\n1.5\r\n".into(), ",1.5\r\n".into()));
        assert_eq!(both(|r| r.double(f64::INFINITY)), ("$3\r\ninf\r\n".into(), ",inf\r\n".into()));
        assert_eq!(both(|r| r.verbatim("txt", b"hi")), ("$2\r\nhi\r\n".into(), "=6\r\ntxt:hi\r\n".into()));
        assert_eq!(both(|r| r.error("ERR a\r\nb")), ("-ERR a  b\r\n".into(), "-ERR a  b\r\n".into()));
        assert_eq!(both(|r| r.int(-3)), (":-3\r\n".into(), ":-3\r\n".into()));
        assert_eq!(both(|r| r.bulk(b"")), ("$0\r\n\r\n".into(), "$0\r\n\r\n".into()));
    }

    #[test]
    fn deferred_lengths() {
        let (a, b) = both(|r| {
            let d = r.defer(b'%');
            r.bulk(b"k");
            r.int(1);
            r.set_deferred(d, 1);
        });
        assert_eq!(a, "*2\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(b, "%1\r\n$1\r\nk\r\n:1\r\n");
    }

    #[test]
    fn doubles_shortest_roundtrip() {
        let f = |d: f64| {
            let mut v = Vec::new();
            fmt_double(d, &mut v);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(3.0), "3");
        assert_eq!(f(-2.5), "-2.5");
        assert_eq!(f(1e20), "1e+20");
        assert_eq!(f(1.5e-7), "1.5e-07");
    }
}
