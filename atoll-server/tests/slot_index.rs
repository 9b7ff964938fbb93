//! The keyspace's per-slot index (cluster mode), on a key table directly. A test binary of its
//! own: `slot::INDEXED` is process-wide and must be set before any key exists, which the
//! library's unit tests, running side by side in one process, cannot promise.

use atoll::engine::keytable::KeyTable;
use atoll::engine::slot::{key_slot, INDEXED, SHARDS, SLOTS};
use atoll::engine::value::{Obj, Value};
use std::sync::atomic::Ordering;

fn obj(v: Value) -> Obj {
    Obj { val: v, lru: 7 }
}

/// The slot's keys, as GETKEYSINSLOT lists them.
fn listed(t: &KeyTable, slot: usize) -> Vec<String> {
    let mut out = Vec::new();
    t.slot_keys_while(slot, |k| {
        out.push(String::from_utf8(k.to_vec()).unwrap());
        true
    });
    out
}

#[test]
fn keys_are_counted_and_listed_by_slot_as_they_come_and_go() {
    INDEXED.store(true, Ordering::Relaxed);
    let mut t = KeyTable::new();
    // Every key of the {a} tag lands in one slot, of one shard.
    let slot = key_slot(b"{a}");
    for i in 0..10 {
        t.insert(format!("{{a}}{i}").as_bytes(), obj(Value::Int(i)));
    }
    assert_eq!(t.count_in_slot(slot), 10);
    let newest_first: Vec<String> = (0..10).rev().map(|i| format!("{{a}}{i}")).collect();
    assert_eq!(listed(&t, slot), newest_first);
    // Replacing a value is no new key, even when the key moves to a node of another layout
    // (the head, the tail and one between).
    t.insert(b"{a}3", obj(Value::Int(99)));
    for k in [&b"{a}9"[..], b"{a}0", b"{a}5"] {
        t.get_mut(k).unwrap().set(Value::from_text(b"a longer string value"));
        t.get_mut(k).unwrap().val_mut();
    }
    assert_eq!(t.count_in_slot(slot), 10);
    assert_eq!(listed(&t, slot), newest_first);
    // Removal from the middle, the head and the tail.
    for k in [&b"{a}3"[..], b"{a}9", b"{a}0"] {
        assert!(t.remove(k).is_some());
        assert!(t.remove(k).is_none());
    }
    assert_eq!(t.count_in_slot(slot), 7);
    assert_eq!(listed(&t, slot), ["{a}8", "{a}7", "{a}6", "{a}5", "{a}4", "{a}2", "{a}1"]);
    assert_eq!(t.get(b"{a}5").unwrap().text_bytes(), Some(&b"a longer string value"[..]));
    // The node carries the two links: 16 bytes more than outside cluster mode (a 16-byte
    // header, an i64 and a 4-byte key: 28, in jemalloc's 32 class; 44 in its 48 class).
    assert_eq!(t.get(b"{a}8").unwrap().node_bytes(), 48);
    // Another slot of the same shard is counted and listed apart.
    let other = (slot + SHARDS) % SLOTS;
    assert_eq!(t.count_in_slot(other), 0);
    assert!(listed(&t, other).is_empty());
    let mut seen = 0;
    t.slot_keys_while(slot, |_| {
        seen += 1;
        seen < 4
    });
    assert_eq!(seen, 4);
    // The index stays put when the table moves (its first node points into it), and the
    // keys are freed with it.
    let moved = std::mem::take(&mut t);
    assert_eq!(listed(&moved, slot).len(), 7);
    t = moved;
    let mut other_table = KeyTable::new();
    other_table.insert(b"{a}gone", obj(Value::Raw(b"with a value of its own".to_vec())));
    drop(other_table);
    t.clear();
    assert_eq!(t.count_in_slot(slot), 0);
    assert!(listed(&t, slot).is_empty());
    t.insert(b"{a}x", obj(Value::from_text(b"v")));
    assert_eq!(listed(&t, slot), ["{a}x"]);
    // Many keys across the shard's slots, removed in another order than they came.
    let mut t = KeyTable::new();
    let shard = slot % SHARDS;
    let keys: Vec<String> =
        (0..200_000).map(|i| format!("k{i}")).filter(|k| key_slot(k.as_bytes()) % SHARDS == shard).collect();
    for k in &keys {
        t.insert_new(k.as_bytes(), obj(Value::from_text(k.as_bytes())));
    }
    for k in keys.iter().step_by(3) {
        t.remove(k.as_bytes()).unwrap();
    }
    for s in (shard..SLOTS).step_by(SHARDS) {
        let want: Vec<&String> = keys
            .iter()
            .enumerate()
            .filter(|(i, k)| i % 3 != 0 && key_slot(k.as_bytes()) == s)
            .map(|(_, k)| k)
            .rev()
            .collect();
        let got = listed(&t, s);
        assert_eq!(got.len(), t.count_in_slot(s));
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "slot {s}");
    }
}
