//! Incremental RESP request parser.
//!
//! A client sends either multibulk requests (`*N\r\n$len\r\narg\r\n...`) or inline commands
//! (`SET k v\r\n`, with redis-cli's quoting rules). The parser is incremental: when a request is
//! incomplete it remembers how far it got (argument count, arguments already delimited) and the
//! next call resumes there, so a large request arriving in many reads is never re-scanned from
//! its start. It never allocates from a length the client declared: argument ranges grow as the
//! argument bytes actually arrive.
//!
//! Multibulk arguments are returned as ranges into the caller's buffer (zero-copy); inline
//! arguments, which need unescaping, are copied into the parser's own storage.

/// Redis's limits (DESIGN §5), configurable by the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: i64,
    /// Largest multibulk count accepted from an authenticated client (Redis: INT_MAX).
    pub max_multibulk_len: i64,
    /// Inline requests and `*`/`$` header lines may not exceed this without a newline.
    pub max_inline: usize,
    /// Set while the client must still authenticate: at most 10 arguments of 16 KB each.
    pub unauthenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as i64,
            max_inline: 64 * 1024,
            unauthenticated: false,
        }
    }
}

impl Limits {
    /// A multibulk count the fast paths may take as is (1 ≤ n, within the caps); anything else
    /// goes through the general path and its exact errors.
    #[inline]
    fn count_ok(&self, n: usize) -> bool {
        n > 0 && (n <= 10 || !self.unauthenticated) && n as i64 <= self.max_multibulk_len
    }

    /// A bulk length the fast paths may take as is.
    #[inline]
    fn bulk_ok(&self, len: usize) -> bool {
        len as i64 <= self.max_bulk_len && (len <= 16384 || !self.unauthenticated)
    }
}

/// What one call to [`Parser::parse`] found at the start of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A complete request of `consumed` bytes; its arguments are in the parser.
    Command { consumed: usize },
    /// Bytes that form no command (an empty inline line, `*0`, `*-1`): skip them.
    Skip { consumed: usize },
    /// Need more bytes; keep the buffer from the request's first byte.
    Incomplete,
    /// A framing error: reply `-ERR Protocol error: ...` and close the connection.
    Error(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not inside a request.
    Idle,
    /// Inside a multibulk request: `remaining` arguments to go, scanning from `pos`.
    Multibulk { remaining: i64, pos: usize },
}

/// Where the current command's arguments live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgSource {
    /// `ranges` index the caller's buffer (relative to the request's first byte).
    Buffer,
    /// `inline_args` hold owned, unescaped arguments.
    Inline,
}

#[derive(Debug)]
pub struct Parser {
    state: State,
    pub source: ArgSource,
    /// Argument ranges `(start, end)` relative to the start of the request.
    pub ranges: Vec<(usize, usize)>,
    pub inline_args: Vec<Vec<u8>>,
    /// While the request waits for the rest of a big argument (≥ `BIG_ARG`): the bytes, from
    /// the request's first, it will take with that argument; else 0.
    big_need: usize,
    /// Where that big argument's bytes begin, from the request's first byte.
    big_start: usize,
}

/// Redis's PROTO_MBULK_BIG_ARG: the buffer of an argument this large stops growing at its
/// end (`Parser::big_need`) instead of doubling past it.
pub const BIG_ARG: usize = 32 * 1024;

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    // memchr-like scan for '\r' followed by '\n'.
    let mut i = from;
    while i + 1 < buf.len() {
        match buf[i..].iter().position(|&b| b == b'\r') {
            None => return None,
            Some(off) => {
                let p = i + off;
                if p + 1 < buf.len() {
                    if buf[p + 1] == b'\n' {
                        return Some(p);
                    }
                    i = p + 1;
                } else {
                    return None;
                }
            }
        }
    }
    None
}

/// The common header line, read in one pass: up to 9 decimal digits (no sign, no leading
/// zero) then CRLF, starting at `from`. Returns the value and the index of the `\r`; None for
/// anything else (a longer number, a sign, a missing CRLF), which the general path then
/// handles with its exact errors. It accepts exactly what `find_crlf` + `parse_i64` would,
/// with the same result, for the lines it accepts.
#[inline]
fn short_count(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let d = buf.get(from..)?;
    let (mut v, mut i) = (0usize, 0usize);
    while i < 9 && i < d.len() {
        let c = d[i].wrapping_sub(b'0');
        if c > 9 {
            break;
        }
        v = v * 10 + c as usize;
        i += 1;
    }
    let crlf = d.get(i..i + 2) == Some(b"\r\n");
    (crlf && i > 0 && (d[0] != b'0' || i == 1)).then_some((v, from + i))
}

/// The pipeline look-ahead's parser: one complete request of the common form starting at
/// `from` — `*<n>` with 1 ≤ n ≤ `max_args`, then n bulk strings, every count in
/// `short_count`'s form and within `limits`. Appends the arguments' spans in `buf` to `out` and
/// returns the request's length; None, with `out` unchanged, for anything else (incomplete,
/// inline, empty, an error). It accepts nothing [`Parser::parse`] would not from its idle state
/// (the caller must not use it while the parser holds a partly parsed request), and gives the
/// same arguments (tested below), so the main loop can take its result as parsed; whatever
/// it declines, the main loop parses with the general path. Unlike `Parser` it keeps no
/// state between calls, which is what lets it write the spans straight to the look-ahead's
/// storage with no per-request copy.
#[inline]
pub fn scan_request<A: smallvec::Array<Item = (usize, usize)>>(
    buf: &[u8],
    from: usize,
    max_args: usize,
    limits: &Limits,
    out: &mut smallvec::SmallVec<A>,
) -> Option<usize> {
    if buf.get(from) != Some(&b'*') {
        return None;
    }
    let (n, nl) = short_count(buf, from + 1)?;
    if n > max_args || !limits.count_ok(n) {
        return None;
    }
    let first = out.len();
    let mut pos = nl + 2;
    for _ in 0..n {
        let bulk = match buf.get(pos) {
            Some(b'$') => short_count(buf, pos + 1),
            _ => None,
        };
        match bulk {
            Some((len, nl)) if limits.bulk_ok(len) && nl + 4 + len <= buf.len() => {
                out.push((nl + 2, nl + 2 + len));
                pos = nl + 4 + len;
            }
            _ => {
                out.truncate(first);
                return None;
            }
        }
    }
    Some(pos - from)
}

/// Parses a signed decimal integer exactly as Redis's `string2ll` does (no spaces, no '+').
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    if digits == b"0" && neg {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

impl Parser {
    pub fn new() -> Self {
        Parser {
            state: State::Idle,
            source: ArgSource::Buffer,
            ranges: Vec::new(),
            inline_args: Vec::new(),
            big_need: 0,
            big_start: 0,
        }
    }

    /// The buffer length, from the unfinished request's first byte, that completes the big
    /// argument it waits for (0 if it waits for no big argument): the session's buffer grows
    /// no further than that.
    pub fn big_need(&self) -> usize {
        if self.in_progress() {
            self.big_need
        } else {
            0
        }
    }

    /// While the unfinished request waits for a big argument: where that argument's bytes
    /// begin, from the request's first byte (0 otherwise). What comes before it is parsed
    /// already; Redis drops it from the query buffer at this point, so its `qbuf` counts the
    /// big argument's bytes only.
    pub fn big_start(&self) -> usize {
        if self.big_need() > 0 {
            self.big_start
        } else {
            0
        }
    }

    /// True when a request has been started but not finished.
    pub fn in_progress(&self) -> bool {
        self.state != State::Idle
    }

    /// Number of arguments of the last complete command.
    pub fn argc(&self) -> usize {
        match self.source {
            ArgSource::Buffer => self.ranges.len(),
            ArgSource::Inline => self.inline_args.len(),
        }
    }

    /// Releases memory held for large requests (called when the connection goes idle).
    pub fn shrink(&mut self) {
        if self.ranges.capacity() > 64 {
            self.ranges = Vec::new();
        }
        if self.inline_args.capacity() > 16 {
            self.inline_args = Vec::new();
        }
    }

    /// Parses one request from the start of `buf`.
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Parsed {
        if buf.is_empty() {
            return Parsed::Incomplete;
        }
        match self.state {
            State::Idle => {
                if buf[0] == b'*' {
                    self.parse_multibulk_header(buf, limits)
                } else {
                    self.parse_inline(buf, limits)
                }
            }
            State::Multibulk { .. } => self.parse_bulks(buf, limits),
        }
    }

    fn parse_multibulk_header(&mut self, buf: &[u8], limits: &Limits) -> Parsed {
        if let Some((n, nl)) = short_count(buf, 1) {
            if limits.count_ok(n) {
                self.ranges.clear();
                self.source = ArgSource::Buffer;
                self.state = State::Multibulk { remaining: n as i64, pos: nl + 2 };
                return self.parse_bulks(buf, limits);
            }
        }
        let nl = match find_crlf(buf, 1) {
            Some(p) => p,
            None => {
                if buf.len() > limits.max_inline {
                    return Parsed::Error("Protocol error: too big mbulk count string");
                }
                return Parsed::Incomplete;
            }
        };
        if nl > limits.max_inline {
            return Parsed::Error("Protocol error: too big mbulk count string");
        }
        let n = match parse_i64(&buf[1..nl]) {
            Some(n) if n <= limits.max_multibulk_len => n,
            _ => return Parsed::Error("Protocol error: invalid multibulk length"),
        };
        if n > 10 && limits.unauthenticated {
            return Parsed::Error("Protocol error: unauthenticated multibulk length");
        }
        if n <= 0 {
            return Parsed::Skip { consumed: nl + 2 };
        }
        self.ranges.clear();
        self.source = ArgSource::Buffer;
        self.state = State::Multibulk { remaining: n, pos: nl + 2 };
        self.parse_bulks(buf, limits)
    }

    fn parse_bulks(&mut self, buf: &[u8], limits: &Limits) -> Parsed {
        let State::Multibulk { mut remaining, mut pos } = self.state else { unreachable!() };
        while remaining > 0 {
            if pos >= buf.len() {
                break;
            }
            if buf[pos] != b'$' {
                self.state = State::Idle;
                return Parsed::Error(expected_dollar(buf[pos]));
            }
            let (len, nl) = match short_count(buf, pos + 1) {
                Some((len, nl)) if limits.bulk_ok(len) => (len, nl),
                // The general path, with its exact errors.
                _ => {
                    let nl = match find_crlf(buf, pos + 1) {
                        Some(p) => p,
                        None => {
                            if buf.len() - pos > limits.max_inline {
                                self.state = State::Idle;
                                return Parsed::Error("Protocol error: too big bulk count string");
                            }
                            break;
                        }
                    };
                    let len = match parse_i64(&buf[pos + 1..nl]) {
                        Some(l) if l >= 0 && l <= limits.max_bulk_len => l as usize,
                        _ => {
                            self.state = State::Idle;
                            return Parsed::Error("Protocol error: invalid bulk length");
                        }
                    };
                    if len > 16384 && limits.unauthenticated {
                        self.state = State::Idle;
                        return Parsed::Error("Protocol error: unauthenticated bulk length");
                    }
                    (len, nl)
                }
            };
            let start = nl + 2;
            // Wait until the whole argument and its CRLF are here.
            if buf.len() < start + len + 2 {
                self.big_need = if len >= BIG_ARG { start + len + 2 } else { 0 };
                self.big_start = start;
                break;
            }
            self.ranges.push((start, start + len));
            pos = start + len + 2;
            remaining -= 1;
        }
        if remaining == 0 {
            self.state = State::Idle;
            Parsed::Command { consumed: pos }
        } else {
            self.state = State::Multibulk { remaining, pos };
            Parsed::Incomplete
        }
    }

    fn parse_inline(&mut self, buf: &[u8], limits: &Limits) -> Parsed {
        let nl = match buf.iter().position(|&b| b == b'\n') {
            Some(p) => p,
            None => {
                if buf.len() > limits.max_inline {
                    return Parsed::Error("Protocol error: too big inline request");
                }
                return Parsed::Incomplete;
            }
        };
        if nl > limits.max_inline {
            return Parsed::Error("Protocol error: too big inline request");
        }
        let mut line = &buf[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        self.inline_args.clear();
        if !split_args(line, &mut self.inline_args) {
            return Parsed::Error("Protocol error: unbalanced quotes in request");
        }
        self.source = ArgSource::Inline;
        if self.inline_args.is_empty() {
            return Parsed::Skip { consumed: nl + 1 };
        }
        Parsed::Command { consumed: nl + 1 }
    }
}

fn expected_dollar(got: u8) -> &'static str {
    // Redis formats the unexpected byte into the message; keep a static table for the
    // printable ASCII range and a generic text otherwise.
    const MSGS: [&str; 95] = {
        // Generated at compile time would need const fn string formatting; list explicitly.
        [
            "Protocol error: expected '$', got ' '",
            "Protocol error: expected '$', got '!'",
            "Protocol error: expected '$', got '\"'",
            "Protocol error: expected '$', got '#'",
            "Protocol error: expected '$', got '$'",
            "Protocol error: expected '$', got '%'",
            "Protocol error: expected '$', got '&'",
            "Protocol error: expected '$', got '''",
            "Protocol error: expected '$', got '('",
            "Protocol error: expected '$', got ')'",
            "Protocol error: expected '$', got '*'",
            "Protocol error: expected '$', got '+'",
            "Protocol error: expected '$', got ','",
            "Protocol error: expected '$', got '-'",
            "Protocol error: expected '$', got '.'",
            "Protocol error: expected '$', got '/'",
            "Protocol error: expected '$', got '0'",
            "Protocol error: expected '$', got '1'",
            "Protocol error: expected '$', got '2'",
            "Protocol error: expected '$', got '3'",
            "Protocol error: expected '$', got '4'",
            "Protocol error: expected '$', got '5'",
            "Protocol error: expected '$', got '6'",
            "Protocol error: expected '$', got '7'",
            "Protocol error: expected '$', got '8'",
            "Protocol error: expected '$', got '9'",
            "Protocol error: expected '$', got ':'",
            "Protocol error: expected '$', got ';'",
            "Protocol error: expected '$', got '<'",
            "Protocol error: expected '$', got '='",
            "Protocol error: expected '$', got '>'",
            "Protocol error: expected '$', got '?'",
            "Protocol error: expected '$', got '@'",
            "Protocol error: expected '$', got 'A'",
            "Protocol error: expected '$', got 'B'",
            "Protocol error: expected '$', got 'C'",
            "Protocol error: expected '$', got 'D'",
            "Protocol error: expected '$', got 'E'",
            "Protocol error: expected '$', got 'F'",
            "Protocol error: expected '$', got 'G'",
            "Protocol error: expected '$', got 'H'",
            "Protocol error: expected '$', got 'I'",
            "Protocol error: expected '$', got 'J'",
            "Protocol error: expected '$', got 'K'",
            "Protocol error: expected '$', got 'L'",
            "Protocol error: expected '$', got 'M'",
            "Protocol error: expected '$', got 'N'",
            "Protocol error: expected '$', got 'O'",
            "Protocol error: expected '$', got 'P'",
            "Protocol error: expected '$', got 'Q'",
            "Protocol error: expected '$', got 'R'",
            "Protocol error: expected '$', got 'S'",
            "Protocol error: expected '$', got 'T'",
            "Protocol error: expected '$', got 'U'",
            "Protocol error: expected '$', got 'V'",
            "Protocol error: expected '$', got 'W'",
            "Protocol error: expected '$', got 'X'",
            "Protocol error: expected '$', got 'Y'",
            "Protocol error: expected '$', got 'Z'",
            "Protocol error: expected '$', got '['",
            "Protocol error: expected '$', got '\\'",
            "Protocol error: expected '$', got ']'",
            "Protocol error: expected '$', got '^'",
            "Protocol error: expected '$', got '_'",
            "Protocol error: expected '$', got '`'",
            "Protocol error: expected '$', got 'a'",
            "Protocol error: expected '$', got 'b'",
            "Protocol error: expected '$', got 'c'",
            "Protocol error: expected '$', got 'd'",
            "Protocol error: expected '$', got 'e'",
            "Protocol error: expected '$', got 'f'",
            "Protocol error: expected '$', got 'g'",
            "Protocol error: expected '$', got 'h'",
            "Protocol error: expected '$', got 'i'",
            "Protocol error: expected '$', got 'j'",
            "Protocol error: expected '$', got 'k'",
            "Protocol error: expected '$', got 'l'",
            "Protocol error: expected '$', got 'm'",
            "Protocol error: expected '$', got 'n'",
            "Protocol error: expected '$', got 'o'",
            "Protocol error: expected '$', got 'p'",
            "Protocol error: expected '$', got 'q'",
            "Protocol error: expected '$', got 'r'",
            "Protocol error: expected '$', got 's'",
            "Protocol error: expected '$', got 't'",
            "Protocol error: expected '$', got 'u'",
            "Protocol error: expected '$', got 'v'",
            "Protocol error: expected '$', got 'w'",
            "Protocol error: expected '$', got 'x'",
            "Protocol error: expected '$', got 'y'",
            "Protocol error: expected '$', got 'z'",
            "Protocol error: expected '$', got '{'",
            "Protocol error: expected '$', got '|'",
            "Protocol error: expected '$', got '}'",
            "Protocol error: expected '$', got '~'",
        ]
    };
    if (0x20..0x7f).contains(&got) {
        MSGS[(got - 0x20) as usize]
    } else {
        "Protocol error: expected '$', got something else"
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline request into arguments with the quoting rules of Redis's `sdssplitargs`
/// (the rules redis-cli uses): double quotes with `\n \r \t \b \a \xHH` escapes, single quotes
/// with only `\'`, and a closing quote must be followed by a space or the end. Returns false on
/// unbalanced quotes.
pub fn split_args(line: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return true;
        }
        let mut cur = Vec::new();
        let mut inq = false;
        let mut insq = false;
        loop {
            if inq {
                if i >= n {
                    return false;
                }
                if line[i] == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && hex_val(line[i + 2]).is_some()
                    && hex_val(line[i + 3]).is_some()
                {
                    cur.push(hex_val(line[i + 2]).unwrap() * 16 + hex_val(line[i + 3]).unwrap());
                    i += 3;
                } else if line[i] == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        c => c,
                    });
                } else if line[i] == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return false;
                    }
                    inq = false;
                    i += 1;
                    break;
                } else {
                    cur.push(line[i]);
                }
            } else if insq {
                if i >= n {
                    return false;
                }
                if line[i] == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if line[i] == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return false;
                    }
                    insq = false;
                    i += 1;
                    break;
                } else {
                    cur.push(line[i]);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        let _ = (inq, insq);
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(p: &Parser, buf: &[u8]) -> Vec<Vec<u8>> {
        match p.source {
            ArgSource::Buffer => p.ranges.iter().map(|&(s, e)| buf[s..e].to_vec()).collect(),
            ArgSource::Inline => p.inline_args.clone(),
        }
    }

    #[test]
    fn a_big_argument_announces_the_bytes_it_needs() {
        let l = Limits::default();
        let head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40000\r\n";
        let mut buf = head.to_vec();
        buf.extend_from_slice(&[b'x'; 1000]);
        let mut p = Parser::new();
        assert_eq!(p.parse(&buf, &l), Parsed::Incomplete);
        assert_eq!(p.big_need(), head.len() + 40000 + 2);
        assert_eq!(p.big_start(), head.len());
        buf.extend_from_slice(&[b'x'; 39000]);
        buf.extend_from_slice(b"\r\n");
        assert_eq!(p.parse(&buf, &l), Parsed::Command { consumed: buf.len() });
        assert_eq!(p.big_need(), 0);
        assert_eq!(p.big_start(), 0);
        // Small arguments announce nothing: the buffer grows as usual.
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*2\r\n$3\r\nGET\r\n$100\r\nab", &l), Parsed::Incomplete);
        assert_eq!(p.big_need(), 0);
    }

    #[test]
    fn multibulk_whole_and_split() {
        let req = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        let l = Limits::default();
        let mut p = Parser::new();
        assert_eq!(p.parse(req, &l), Parsed::Command { consumed: req.len() });
        assert_eq!(args(&p, req), vec![b"GET".to_vec(), b"key".to_vec()]);
        // Byte by byte: incomplete until the last byte, then complete.
        let mut p = Parser::new();
        for i in 1..req.len() {
            assert_eq!(p.parse(&req[..i], &l), Parsed::Incomplete, "prefix {i}");
        }
        assert_eq!(p.parse(req, &l), Parsed::Command { consumed: req.len() });
        assert_eq!(args(&p, req), vec![b"GET".to_vec(), b"key".to_vec()]);
    }

    #[test]
    fn protocol_errors() {
        let l = Limits::default();
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*x\r\n", &l), Parsed::Error("Protocol error: invalid multibulk length"));
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*1\r\n$-2\r\n", &l), Parsed::Error("Protocol error: invalid bulk length"));
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*1\r\n+foo\r\n", &l), Parsed::Error("Protocol error: expected '$', got '+'"));
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*0\r\n", &l), Parsed::Skip { consumed: 4 });
        let mut p = Parser::new();
        let huge = format!("*1\r\n${}\r\n", 600 * 1024 * 1024);
        assert_eq!(p.parse(huge.as_bytes(), &l), Parsed::Error("Protocol error: invalid bulk length"));
        let ul = Limits { unauthenticated: true, ..l };
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*11\r\n", &ul), Parsed::Error("Protocol error: unauthenticated multibulk length"));
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*1\r\n$16385\r\n", &ul), Parsed::Error("Protocol error: unauthenticated bulk length"));
        let mut p = Parser::new();
        let long = vec![b'a'; 70 * 1024];
        assert_eq!(p.parse(&long, &l), Parsed::Error("Protocol error: too big inline request"));
    }

    #[test]
    fn declared_length_is_not_allocated() {
        let l = Limits::default();
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*2000000000\r\n$3\r\nGET\r\n", &l), Parsed::Incomplete);
        assert!(p.ranges.capacity() < 1000);
    }

    #[test]
    fn inline_quoting() {
        let l = Limits::default();
        let mut p = Parser::new();
        let req = b"set \"a b\" 'c\\'d' \"\\x41\\n\"\r\n";
        assert_eq!(p.parse(req, &l), Parsed::Command { consumed: req.len() });
        assert_eq!(args(&p, req), vec![b"set".to_vec(), b"a b".to_vec(), b"c'd".to_vec(), b"A\n".to_vec()]);
        let mut p = Parser::new();
        assert_eq!(p.parse(b"get \"abc\r\n", &l), Parsed::Error("Protocol error: unbalanced quotes in request"));
        let mut p = Parser::new();
        assert_eq!(p.parse(b"\r\n", &l), Parsed::Skip { consumed: 2 });
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
    }

    /// `scan_request` against `Parser::parse` on well-formed, truncated and mutated requests:
    /// whatever it accepts, the parser accepts with the same length and arguments.
    #[test]
    fn scan_request_agrees_with_the_parser() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let limit_sets = [
            Limits::default(),
            Limits { unauthenticated: true, ..Limits::default() },
            Limits { max_bulk_len: 5, max_multibulk_len: 3, ..Limits::default() },
        ];
        let (mut accepted, mut declined) = (0, 0);
        for round in 0..20_000 {
            let mut buf = b"xx".to_vec();
            let from = buf.len();
            let n = rng.gen_range(0..12);
            buf.extend_from_slice(format!("*{n}\r\n").as_bytes());
            for _ in 0..n {
                let len = if rng.gen_bool(0.05) { 16385 } else { rng.gen_range(0..20) };
                buf.extend_from_slice(format!("${len}\r\n").as_bytes());
                buf.extend((0..len).map(|_| rng.gen_range(b'a'..=b'z')));
                buf.extend_from_slice(b"\r\n");
            }
            buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            match round % 4 {
                1 => buf.truncate(rng.gen_range(from..buf.len())),
                2 => {
                    let i = rng.gen_range(from..buf.len());
                    let bytes = b"*$\r\n0123456789-+ a";
                    buf[i] = bytes[rng.gen_range(0..bytes.len())];
                }
                _ => {}
            }
            let limits = &limit_sets[round % limit_sets.len()];
            let mut out: smallvec::SmallVec<[(usize, usize); 4]> = smallvec::smallvec![(0, 0)];
            // 12 lets the unauthenticated cap of 10 arguments decide; 8 is the look-ahead's.
            let max_args = if round % 2 == 0 { 8 } else { 12 };
            let scanned = scan_request(&buf, from, max_args, limits, &mut out);
            let mut p = Parser::new();
            let parsed = p.parse(&buf[from..], limits);
            match scanned {
                Some(consumed) => {
                    accepted += 1;
                    assert_eq!(parsed, Parsed::Command { consumed }, "{:?}", String::from_utf8_lossy(&buf));
                    let mine: Vec<&[u8]> = out[1..].iter().map(|&(s, e)| &buf[s..e]).collect();
                    let theirs: Vec<&[u8]> = p.ranges.iter().map(|&(s, e)| &buf[from + s..from + e]).collect();
                    assert_eq!(mine, theirs);
                    assert_eq!(p.source, ArgSource::Buffer);
                }
                None => {
                    declined += 1;
                    assert_eq!(out.len(), 1, "a declined request leaves no spans behind");
                }
            }
        }
        // Both outcomes were exercised.
        assert!(accepted > 5_000 && declined > 5_000, "{accepted} accepted, {declined} declined");
    }

    /// The one-pass header reader agrees with the general path on every line it accepts, and
    /// declines everything the general path would reject or treat specially.
    #[test]
    fn short_count_agrees_with_the_general_path() {
        let lines: &[&[u8]] = &[
            b"0\r\n",
            b"1\r\n",
            b"16\r\n",
            b"123456789\r\n",
            b"1234567890\r\n",
            b"00\r\n",
            b"01\r\n",
            b"-1\r\n",
            b"+1\r\n",
            b"\r\n",
            b"1\r",
            b"1",
            b"",
            b"1\rx",
            b" 1\r\n",
            b"1 \r\n",
            b"99999999999999999999\r\n",
        ];
        for line in lines {
            let general = find_crlf(line, 0).and_then(|nl| parse_i64(&line[..nl]).map(|v| (v, nl)));
            match short_count(line, 0) {
                Some((v, nl)) => assert_eq!(general, Some((v as i64, nl)), "{:?}", String::from_utf8_lossy(line)),
                None => assert!(
                    general.is_none_or(|(v, _)| !(0..=999_999_999).contains(&v) || line[0] == b'0'),
                    "declined {:?}",
                    String::from_utf8_lossy(line)
                ),
            }
        }
        // Whole requests through both paths give the same arguments.
        let l = Limits::default();
        let mut p = Parser::new();
        let req = b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$10\r\n0123456789\r\n";
        assert_eq!(p.parse(req, &l), Parsed::Command { consumed: req.len() });
        assert_eq!(args(&p, req), vec![b"SET".to_vec(), b"".to_vec(), b"0123456789".to_vec()]);
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*1\r\n$01\r\nx\r\n", &l), Parsed::Error("Protocol error: invalid bulk length"));
        let mut p = Parser::new();
        let auth = Limits { unauthenticated: true, ..Limits::default() };
        assert_eq!(p.parse(b"*11\r\n", &auth), Parsed::Error("Protocol error: unauthenticated multibulk length"));
        let mut p = Parser::new();
        assert_eq!(p.parse(b"*1\r\n$16385\r\n", &auth), Parsed::Error("Protocol error: unauthenticated bulk length"));
    }
}
