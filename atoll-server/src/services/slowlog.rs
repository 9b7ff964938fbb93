//! The slow log (SLOWLOG): commands whose execution took at least `slowlog-log-slower-than`
//! microseconds, newest first, at most `slowlog-max-len`, with Redis 7.2's entry layout —
//! id, unix time, duration, arguments (at most 32, each cut at 128 bytes, credentials
//! redacted), client address and name.
//!
//! Only slow commands reach it (`call` compares the duration with one threshold first), so
//! its lock is never on the common path.

use crate::lockorder::{rank, Mutex};
use std::collections::VecDeque;

/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const MAX_ARGC: usize = 32;
const MAX_STRING: usize = 128;

pub struct Entry {
    pub id: u64,
    pub time: i64,
    pub usec: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

#[derive(Default)]
pub struct SlowLog {
    /// Newest first; the next id.
    entries: Mutex<(VecDeque<Entry>, u64), { rank::LEAF }>,
}

impl SlowLog {
    /// Adds an entry and trims to `max_len`.
    pub fn push(&self, argv: &[&[u8]], usec: u64, time: i64, addr: &str, name: &[u8], max_len: usize) {
        let args = trimmed(argv);
        let mut g = self.entries.lock();
        let (list, next) = &mut *g;
        list.push_front(Entry { id: *next, time, usec, args, addr: addr.to_string(), name: name.to_vec() });
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
