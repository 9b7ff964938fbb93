//! MIGRATE's connections to its targets, kept open for the next MIGRATE as Redis keeps them
//! (`migrate_cached_sockets` in INFO): at most 64, one per `host:port`, each closed after 10
//! idle seconds by the cron, with the database it last SELECTed so the next transfer to the
//! same database skips the SELECT.
//!
//! A MIGRATE takes its connection out of the cache for the transfer and puts it back only if
//! the transfer went well, so the lock is held for a lookup and never across network I/O, and
//! a connection that failed is simply dropped (closed).

use crate::lockorder::{rank, Mutex};
use std::collections::HashMap;
use std::net::TcpStream;

/// Redis's MIGRATE_SOCKET_CACHE_ITEMS and MIGRATE_SOCKET_CACHE_TTL.
const MAX_ITEMS: usize = 64;
const IDLE_SECS: i64 = 10;

pub struct Cached {
    pub sock: TcpStream,
    /// The database the target has selected on this connection; None forces a SELECT.
    pub db: Option<i64>,
    last_use_s: i64,
}

#[derive(Default)]
pub struct MigrateSockets {
    map: Mutex<HashMap<String, Cached>, { rank::LEAF }>,
}

impl MigrateSockets {
    /// The cached connection to `name` (`host:port`), taken out for one transfer.
    pub fn take(&self, name: &str) -> Option<Cached> {
        self.map.lock().remove(name)
    }

    /// Keeps a connection that served a transfer. A full cache drops one other connection, as
    /// Redis drops a random one; a connection made meanwhile by a concurrent MIGRATE to the
    /// same target is replaced.
    pub fn put(&self, name: String, sock: TcpStream, db: Option<i64>, now_s: i64) {
        let mut map = self.map.lock();
        if map.len() >= MAX_ITEMS && !map.contains_key(&name) {
            if let Some(victim) = map.keys().next().cloned() {
                map.remove(&victim);
            }
        }
        map.insert(name, Cached { sock, db, last_use_s: now_s });
    }

    /// Wraps a fresh connection (no database selected yet).
    pub fn fresh(sock: TcpStream, now_s: i64) -> Cached {
        Cached { sock, db: None, last_use_s: now_s }
    }

    /// The cron's sweep: closes connections idle for more than 10 seconds.
    pub fn close_idle(&self, now_s: i64) {
        self.map.lock().retain(|_, c| now_s - c.last_use_s <= IDLE_SECS);
    }

    /// INFO's `migrate_cached_sockets`.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
