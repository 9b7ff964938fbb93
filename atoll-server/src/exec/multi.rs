//! Transaction and WATCH state of a client, as the execution core changes it (DISCARD, RESET,
//! EXEC and a closing connection all leave it the same way). The commands are in
//! `commands::multi`.

use super::client::Client;
use super::Server;
use crate::engine::{key_shard, Locks};
use std::sync::atomic::Ordering;

/// Leaves MULTI state without running anything.
pub fn discard_state(_srv: &Server, client: &mut Client) {
    client.multi = None;
    client.handle.multi.store(-1, Ordering::Relaxed);
    client.handle.multi_mem.store(0, Ordering::Relaxed);
}

/// Removes all of the client's watches, using `locks` for shards it holds.
pub fn unwatch_locked(locks: &mut Locks, client: &mut Client) {
    if let Some(w) = client.watch.take() {
        for (db, key) in &w.keys {
            let shard = key_shard(key);
            if locks.holds(*db, shard) {
                locks.shard(*db, shard).unwatch(key, &w.flag);
            } else {
                let (key, flag) = (key.clone(), w.flag.clone());
                locks.keyspace().change_shard(*db, shard, move |s| s.unwatch(&key, &flag));
            }
        }
        client.handle.flags_watch.store(false, Ordering::Relaxed);
        client.handle.watch_mem.store(0, Ordering::Relaxed);
    }
}

/// Removes all of the client's watches (no locks held by the caller).
pub fn unwatch_all(srv: &Server, client: &mut Client) {
    let mut locks = Locks::none(&srv.ks);
    unwatch_locked(&mut locks, client);
}
