//! The command log (Valkey 8.1's COMMANDLOG; SLOWLOG is its `slow` part): three logs of
//! commands, each newest first and bounded, with Redis 7.2's SLOWLOG entry layout — id, unix
//! time, a value, arguments (at most 32, each cut at 128 bytes, credentials redacted), client
//! address and name. The value is what got the command in:
//! * `slow` — it ran at least `slowlog-log-slower-than` µs (Valkey also names the setting
//!   `commandlog-execution-slower-than`); the value is the duration;
//! * `large-request` — its request took at least `commandlog-request-larger-than` bytes on
//!   the wire (Valkey compares with `>=`, as the slow log does, whatever the name says); the
//!   value is that size;
//! * `large-reply` — its reply took at least `commandlog-reply-larger-than` bytes; the value
//!   is that size.
//!
//! Only commands over a threshold reach it (`call` compares first), so its locks are never
//! on the common path.

use crate::lockorder::{rank, Mutex};
use std::collections::VecDeque;

/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const MAX_ARGC: usize = 32;
const MAX_STRING: usize = 128;

pub struct Entry {
    pub id: u64,
    pub time: i64,
    /// Microseconds (`slow`) or bytes (`large-request`, `large-reply`).
    pub value: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

/// Which of the three logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Slow,
    LargeRequest,
    LargeReply,
}

impl Kind {
    /// COMMANDLOG's type argument (case-insensitive, as Valkey's `strcasecmp`).
    pub fn parse(name: &[u8]) -> Option<Kind> {
        [("slow", Kind::Slow), ("large-request", Kind::LargeRequest), ("large-reply", Kind::LargeReply)]
            .into_iter()
            .find(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
            .map(|(_, k)| k)
    }
}

/// One log: its entries and the next id (ids go on across RESET, as Redis's).
#[derive(Default)]
pub struct Log {
    entries: Mutex<(VecDeque<Entry>, u64), { rank::LEAF }>,
}

impl Log {
    /// Adds an entry and trims to `max_len`.
    pub fn push(&self, args: Vec<Vec<u8>>, value: u64, time: i64, addr: &str, name: &[u8], max_len: usize) {
        let mut g = self.entries.lock();
        let (list, next) = &mut *g;
        list.push_front(Entry { id: *next, time, value, args, addr: addr.to_string(), name: name.to_vec() });
        *next += 1;
        list.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        self.entries.lock().0.clear();
    }

    /// Calls `f` with the newest `count` entries (all for None).
    pub fn with<R>(&self, count: Option<usize>, f: impl FnOnce(&mut dyn Iterator<Item = &Entry>) -> R) -> R {
        let g = self.entries.lock();
        let n = count.unwrap_or(usize::MAX);
        f(&mut g.0.iter().take(n))
    }
}

/// The three logs.
#[derive(Default)]
pub struct CommandLog {
    pub slow: Log,
    pub large_request: Log,
    pub large_reply: Log,
}

/// What a command measured, and each log's threshold and length (a threshold of None: that
/// log is off).
pub struct Measured {
    pub usec: u64,
    pub request_bytes: u64,
    pub reply_bytes: u64,
}

pub struct Limits {
    pub slower_than: Option<u64>,
    pub slow_max: usize,
    pub request_over: Option<u64>,
    pub request_max: usize,
    pub reply_over: Option<u64>,
    pub reply_max: usize,
}

impl CommandLog {
    pub fn get(&self, kind: Kind) -> &Log {
        match kind {
            Kind::Slow => &self.slow,
            Kind::LargeRequest => &self.large_request,
            Kind::LargeReply => &self.large_reply,
        }
    }

    /// Adds the command to each log whose threshold it passed (the arguments trimmed once).
    pub fn record(&self, argv: &[&[u8]], m: &Measured, l: &Limits, time: i64, addr: &str, name: &[u8]) {
        let mut args: Option<Vec<Vec<u8>>> = None;
        let logs = [
            (&self.slow, m.usec, l.slower_than.filter(|t| m.usec >= *t), l.slow_max),
            (&self.large_request, m.request_bytes, l.request_over.filter(|t| m.request_bytes >= *t), l.request_max),
            (&self.large_reply, m.reply_bytes, l.reply_over.filter(|t| m.reply_bytes >= *t), l.reply_max),
        ];
        for (log, value, passed, max) in logs {
            if passed.is_some() {
                let a = args.get_or_insert_with(|| trimmed(argv)).clone();
                log.push(a, value, time, addr, name, max);
            }
        }
    }
}

/// The arguments as an entry keeps them: credentials replaced by `(redacted)`, the 32nd
/// standing for the rest (`... (N more arguments)`), long strings cut (`... (N more bytes)`).
fn trimmed(argv: &[&[u8]]) -> Vec<Vec<u8>> {
    let redact = redacted_positions(argv);
    let keep = if argv.len() > MAX_ARGC { MAX_ARGC - 1 } else { argv.len() };
    let mut out: Vec<Vec<u8>> = argv[..keep]
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if redact.contains(&i) {
                b"(redacted)".to_vec()
            } else if a.len() > MAX_STRING {
                let mut v = a[..MAX_STRING].to_vec();
                v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
                v
            } else {
                a.to_vec()
            }
        })
        .collect();
    if argv.len() > MAX_ARGC {
        out.push(format!("... ({} more arguments)", argv.len() - keep).into_bytes());
    }
    out
}

/// Which arguments Redis redacts: AUTH's, HELLO's AUTH pair, the value of a sensitive CONFIG
/// SET parameter, every ACL SETUSER argument after the subcommand, MIGRATE's AUTH/AUTH2.
fn redacted_positions(argv: &[&[u8]]) -> Vec<usize> {
    let is = |i: usize, w: &str| argv.get(i).is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()));
    let mut out = Vec::new();
    if is(0, "auth") {
        out.extend(1..argv.len());
    } else if is(0, "hello") {
        let mut i = 2;
        while i < argv.len() {
            if is(i, "auth") && i + 2 < argv.len() {
                out.extend([i + 1, i + 2]);
                i += 3;
            } else {
                i += 1;
            }
        }
    } else if is(0, "config") && is(1, "set") {
        for i in (2..argv.len()).step_by(2) {
            if ["masterauth", "requirepass", "masteruser"].iter().any(|s| is(i, s)) {
                out.push(i + 1);
            }
        }
    } else if is(0, "acl") && is(1, "setuser") {
        out.extend(2..argv.len());
    } else if is(0, "migrate") {
        for i in 6..argv.len() {
            if is(i, "auth") {
                out.push(i + 1);
            } else if is(i, "auth2") {
                out.extend([i + 1, i + 2]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_trimmed_and_redacted_as_redis() {
        let many: Vec<Vec<u8>> = (0..42).map(|i| format!("a{i}").into_bytes()).collect();
        let argv: Vec<&[u8]> = many.iter().map(|a| a.as_slice()).collect();
        let t = trimmed(&argv);
        assert_eq!(t.len(), 32);
        assert_eq!(t[31], b"... (11 more arguments)");
        let long = vec![b'x'; 130];
        let t = trimmed(&[b"SET", b"k", &long]);
        assert_eq!(t[2].len(), 146);
        assert!(t[2].ends_with(b"... (2 more bytes)"));
        let t = trimmed(&[b"HELLO", b"2", b"AUTH", b"default", b"pw", b"SETNAME", b"n2"]);
        assert_eq!(t[3], b"(redacted)");
        assert_eq!(t[4], b"(redacted)");
        assert_eq!(t[6], b"n2");
        let t = trimmed(&[b"CONFIG", b"SET", b"masterauth", b"secret"]);
        assert_eq!(t[3], b"(redacted)");
    }
}
