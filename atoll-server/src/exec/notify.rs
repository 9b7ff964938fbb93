//! Keyspace notifications (`notify-keyspace-events`): a write records what happened to which
//! key as a [`Note`] on its `KsView` (`ks.note(class, "event", key)`, one branch when the
//! class is off), and the command's epilogue publishes them, still under its locks, on
//! `__keyspace@<db>__:<key>` (message: the event) and `__keyevent@<db>__:<event>` (message:
//! the key), as Redis's `notifyKeyspaceEvent` does. Expiry raises `expired` from lazy and
//! active expiry alike; creating a key raises `new`.

use super::state::Server;
use std::sync::atomic::Ordering;

// The classes, with Redis's bit values (server.h NOTIFY_*).
pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 13;
pub const NEW: u32 = 1 << 14;

/// The flags of a `notify-keyspace-events` value, as the hot path reads them: 0 unless `K`
/// or `E` is on (with neither, no notification is ever sent).
pub fn flags_of(v: &str) -> u32 {
    let mut f = 0;
    for c in v.chars() {
        f |= match c {
            'A' => GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            _ => 0,
        };
    }
    if f & (KEYSPACE | KEYEVENT) == 0 {
        0
    } else {
        f
    }
}

/// One event a command raised.
pub struct Note {
    pub class: u32,
    pub event: &'static str,
    pub db: usize,
    pub key: Box<[u8]>,
}

/// Publishes the events on their channels. `self_id`: the client whose command raised them.
pub fn publish(srv: &Server, notes: &[Note], self_id: u64) {
    let flags = srv.config.hot.notify.load(Ordering::Relaxed);
    let mut chan = Vec::new();
    for n in notes {
        if flags & n.class == 0 {
            continue;
        }
        let mut db = itoa::Buffer::new();
        let db = db.format(n.db).as_bytes();
        if flags & KEYSPACE != 0 {
            chan.clear();
            chan.extend_from_slice(b"__keyspace@");
            chan.extend_from_slice(db);
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(&n.key);
            srv.pubsub.publish(srv, false, &chan, n.event.as_bytes(), self_id);
        }
        if flags & KEYEVENT != 0 {
            chan.clear();
            chan.extend_from_slice(b"__keyevent@");
            chan.extend_from_slice(db);
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(n.event.as_bytes());
            srv.pubsub.publish(srv, false, &chan, &n.key, self_id);
        }
    }
}

/// Publishes one event raised outside a command (active expiry).
pub fn raise(srv: &Server, class: u32, event: &'static str, db: usize, key: &[u8]) {
    if srv.config.hot.notify.load(Ordering::Relaxed) & class != 0 {
        publish(srv, &[Note { class, event, db, key: key.into() }], 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_need_keyspace_or_keyevent() {
        assert_eq!(flags_of("A"), 0);
        assert_eq!(flags_of("KA") & KEY_MISS, 0);
        assert_eq!(flags_of("KA") & NEW, 0);
        assert_eq!(flags_of("Egx"), KEYEVENT | GENERIC | EXPIRED);
        assert_eq!(flags_of("KEA") & (GENERIC | STREAM | EVICTED), GENERIC | STREAM | EVICTED);
    }
}
