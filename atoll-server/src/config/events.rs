//! `notify-keyspace-events`: the event classes, with Redis's bit values (server.h NOTIFY_*),
//! and the flags a value stands for. The configuration mirrors them into its hot values;
//! `exec::notify` raises the events.

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
