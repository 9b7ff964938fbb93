//! Keyspace notifications (`notify-keyspace-events`): a write records what happened to which
//! key as a [`Note`] on its `KsView` (`ks.note(class, "event", key)`, one branch when the
//! class is off), and the command's epilogue publishes them, still under its locks, on
//! `__keyspace@<db>__:<key>` (message: the event) and `__keyevent@<db>__:<event>` (message:
//! the key), as Redis's `notifyKeyspaceEvent` does. Expiry raises `expired` from lazy and
//! active expiry alike; creating a key raises `new`.

use super::pubsub::Reach;
use std::sync::atomic::Ordering;

// The classes and the parsing of `notify-keyspace-events` live with the configuration
// (which mirrors the flags into its hot values); re-exported here for the writers.
pub use crate::config::events::*;

/// One event a command raised.
pub struct Note {
    pub class: u32,
    pub event: &'static str,
    pub db: usize,
    pub key: Box<[u8]>,
}

/// Publishes the events on their channels. `self_id`: the client whose command raised them.
pub fn publish(r: &Reach, notes: &[Note], self_id: u64) {
    let flags = r.hot.notify.load(Ordering::Relaxed);
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
            r.pubsub.publish(r.hot, false, &chan, n.event.as_bytes(), self_id);
        }
        if flags & KEYEVENT != 0 {
            chan.clear();
            chan.extend_from_slice(b"__keyevent@");
            chan.extend_from_slice(db);
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(n.event.as_bytes());
            r.pubsub.publish(r.hot, false, &chan, &n.key, self_id);
        }
    }
}

/// Publishes one event raised outside a command (active expiry).
pub fn raise(r: &Reach, class: u32, event: &'static str, db: usize, key: &[u8]) {
    if r.hot.notify.load(Ordering::Relaxed) & class != 0 {
        publish(r, &[Note { class, event, db, key: key.into() }], 0);
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
