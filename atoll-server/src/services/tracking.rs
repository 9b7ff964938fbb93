//! Client-side caching (CLIENT TRACKING), as Redis 7.2's `tracking.c` behaves.
//!
//! *Default mode*: after a read-only command, the keys it read are remembered for the tracking
//! client in the tracking table (key → client ids; key names only, across databases, as in
//! Redis). A write to a remembered key (any write path: commands, scripts, expiry) sends the
//! key's clients one invalidation each and forgets the key. *BCAST mode*: no table; every
//! modified key matching a registered prefix is sent to the prefix's clients, the keys one
//! command modified in one message. FLUSHDB/FLUSHALL invalidate everything with a null.
//!
//! The table is striped by key hash over a few mutexes so that readers on different workers
//! rarely meet; with no tracking client the whole feature costs `call` one relaxed load.
//! Messages travel through the clients' mailboxes like Pub/Sub messages: a RESP3 client (or
//! its RESP3 redirect target) gets `>2 invalidate [keys]`; a RESP2 redirect target in Pub/Sub
//! mode gets a message on `__redis__:invalidate`; anyone else gets nothing, as in Redis.

pub use super::clients::{Batch, Tracker};
use super::pubsub::{frame, Mailbox, Reach};
use crate::lockorder::{rank, Mutex, RwLock};
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

const STRIPES: usize = 64;

/// One stripe of the tracking table: key → ids of the clients that read it.
type Table = HashMap<Box<[u8]>, SmallVec<[u64; 2]>>;

struct Bcast {
    clients: Vec<Arc<Tracker>>,
}

pub struct Tracking {
    /// Tracking clients exist (default or BCAST): the one load the command path pays.
    on: AtomicBool,
    clients: RwLock<HashMap<u64, Arc<Tracker>>, { rank::TRACKING_CLIENTS }>,
    table: [Mutex<Table, { rank::TRACKING_TABLE }>; STRIPES],
    keys: AtomicUsize,
    items: AtomicUsize,
    prefixes: RwLock<BTreeMap<Box<[u8]>, Bcast>, { rank::TRACKING_PREFIXES }>,
}

impl Default for Tracking {
    fn default() -> Tracking {
        Tracking {
            on: AtomicBool::new(false),
            clients: RwLock::default(),
            table: std::array::from_fn(|_| Mutex::default()),
            keys: AtomicUsize::new(0),
            items: AtomicUsize::new(0),
            prefixes: RwLock::default(),
        }
    }
}

fn stripe(key: &[u8]) -> usize {
    (crate::engine::dict::hash_key(key) as usize) % STRIPES
}

impl Tracking {
    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// INFO: tracking_clients, tracking_total_keys, tracking_total_items,
    /// tracking_total_prefixes.
    pub fn figures(&self) -> (usize, usize, usize, usize) {
        let clients = self.clients.read().len();
        let prefixes = self.prefixes.read().len();
        (clients, self.keys.load(Ordering::Relaxed), self.items.load(Ordering::Relaxed), prefixes)
    }

    pub fn enable(&self, t: Arc<Tracker>) {
        if t.bcast {
            let mut p = self.prefixes.write();
            let names: Vec<Box<[u8]>> =
                if t.prefixes.is_empty() { vec![Box::from(&b""[..])] } else { t.prefixes.clone() };
            for name in names {
                let b = p.entry(name).or_insert_with(|| Bcast { clients: Vec::new() });
                b.clients.retain(|x| x.handle.id != t.handle.id);
                b.clients.push(t.clone());
            }
        }
        self.clients.write().insert(t.handle.id, t);
        self.on.store(true, Ordering::Relaxed);
    }

    pub fn disable(&self, id: u64) {
        let mut c = self.clients.write();
        if let Some(t) = c.remove(&id) {
            if t.bcast {
                let mut p = self.prefixes.write();
                for name in &t.prefixes {
                    if let Some(b) = p.get_mut(name) {
                        b.clients.retain(|x| x.handle.id != id);
                        if b.clients.is_empty() {
                            p.remove(name);
                        }
                    }
                }
            }
        }
        self.on.store(!c.is_empty(), Ordering::Relaxed);
    }

    /// Remembers that client `id` read `keys` (default mode), then keeps the table within
    /// `tracking-table-max-keys` by invalidating keys it forgets.
    pub fn remember(&self, r: &Reach, id: u64, keys: &[&[u8]]) {
        for k in keys {
            let mut t = self.table[stripe(k)].lock();
            let ids = match t.get_mut(*k) {
                Some(ids) => ids,
                None => {
                    self.keys.fetch_add(1, Ordering::Relaxed);
                    t.entry(Box::from(*k)).or_default()
                }
            };
            if !ids.contains(&id) {
                ids.push(id);
                self.items.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.enforce_limit(r);
    }

    /// Keeps the table within `tracking-table-max-keys` (after reads, and from the cron).
    pub fn enforce_limit(&self, r: &Reach) {
        let max = r.hot.tracking_max_keys.load(Ordering::Relaxed);
        if max > 0 && self.keys.load(Ordering::Relaxed) > max {
            self.evict(r, max);
        }
    }

    /// Forgets keys until the table holds `max`, telling their clients (Redis's
    /// `trackingLimitUsedSlots`: the key did not change, but it is no longer tracked).
    #[cold]
    fn evict(&self, r: &Reach, max: usize) {
        // A bounded effort per call, as Redis's (100 keys per call and more when far over):
        // lowering the limit a lot must not stall this command's shards.
        let over = self.keys.load(Ordering::Relaxed).saturating_sub(max);
        let mut budget = over.min(100 + over / 10);
        let mut s = 0;
        while budget > 0 && self.keys.load(Ordering::Relaxed) > max && s < STRIPES * 2 {
            let victim = self.table[s % STRIPES].lock().keys().next().cloned();
            if let Some(k) = victim {
                budget -= 1;
                self.invalidate_table(r, &k, 0);
            } else {
                s += 1;
            }
        }
    }

    /// `key` was modified (by client `by`, 0 for none): its default-mode clients are told and
    /// it leaves the table.
    fn invalidate_table(&self, r: &Reach, key: &[u8], by: u64) {
        let Some(ids) = self.table[stripe(key)].lock().remove(key) else { return };
        self.keys.fetch_sub(1, Ordering::Relaxed);
        self.items.fetch_sub(ids.len(), Ordering::Relaxed);
        let clients = self.clients.read();
        for id in ids {
            let Some(t) = clients.get(&id) else { continue };
            if t.bcast || (t.noloop && id == by) {
                continue;
            }
            send(r, t, Keys::List(&[key]));
        }
    }
}

/// What an invalidation names.
enum Keys<'a> {
    List(&'a [&'a [u8]]),
    /// Everything (a flush).
    All,
}

/// Sends one invalidation to `t` (or its redirect target).
fn send(r: &Reach, t: &Tracker, keys: Keys) {
    let target: Arc<Mailbox>;
    let redirected = t.redirect != 0;
    let handle = if redirected {
        match r.clients.get(t.redirect).filter(|h| !h.quitting.load(Ordering::Relaxed)) {
            Some(h) => h,
            None => {
                t.broken.store(true, Ordering::Relaxed);
                if t.handle.resp.load(Ordering::Relaxed) == 3 {
                    let id = t.redirect.to_string();
                    let mut f = frame(&[b"tracking-redir-broken"]);
                    // [name, id]: the id is an integer.
                    f[1] = b'2';
                    f.extend_from_slice(format!(":{id}\r\n").as_bytes());
                    r.pubsub.send(r.hot, &t.handle.mailbox(), &f, 0);
                }
                return;
            }
        }
    } else {
        t.handle.clone()
    };
    let resp3 = handle.resp.load(Ordering::Relaxed) == 3;
    let mut f = if resp3 {
        frame(&[b"invalidate"])
    } else if redirected && handle.subscriptions() > 0 {
        frame(&[b"message", b"__redis__:invalidate"])
    } else {
        return;
    };
    // One more element: the array of keys (or a null).
    let n = f[1] - b'0' + 1;
    f[1] = b'0' + n;
    match keys {
        Keys::List(ks) => {
            f.push(b'*');
            f.extend_from_slice(ks.len().to_string().as_bytes());
            f.extend_from_slice(b"\r\n");
            for k in ks {
                f.push(b'$');
                f.extend_from_slice(k.len().to_string().as_bytes());
                f.extend_from_slice(b"\r\n");
                f.extend_from_slice(k);
                f.extend_from_slice(b"\r\n");
            }
        }
        Keys::All => f.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
    }
    // Queued like any delivery, even to the client whose command caused it: it follows that
    // command's reply (and may follow later pipelined replies, which only makes a cache drop
    // a value early).
    target = handle.mailbox();
    r.pubsub.send(r.hot, &target, &f, 0);
}

/// A key a write touched, and whether expiry deleted it (then no client modified it: NOLOOP
/// does not hide it from BCAST clients, as in Redis).
pub type Touched = (Box<[u8]>, bool);

impl Tracking {
    /// After a read-only command of tracking client `t`: remember what it read (default
    /// mode, with the OPTIN/OPTOUT rules of CLIENT CACHING; `caching`: CLIENT CACHING YES/NO
    /// was given). `keys`: the keys the command named.
    pub fn read_by(&self, r: &Reach, t: &Tracker, caching: bool, keys: &[&[u8]]) {
        if t.bcast || keys.is_empty() {
            return;
        }
        if (t.optin && !caching) || (t.optout && caching) {
            return;
        }
        // The tracker's own id: a script's commands run as another client, for their caller.
        self.remember(r, t.handle.id, keys);
    }

    /// Keys a command modified: default-mode clients are told at once; BCAST prefixes get them
    /// now, or into `batch` (a transaction's or script's, broadcast when it ends, as Redis
    /// broadcasts once per event-loop round). `by`: the client whose command modified them
    /// (NOLOOP skips it).
    pub fn modified(&self, r: &Reach, keys: &[Touched], by: u64, batch: Option<&mut Batch>) {
        let tr = self;
        for (k, _) in keys {
            tr.invalidate_table(r, k, by);
        }
        if tr.prefixes.read().is_empty() {
            return;
        }
        let who = |expired: bool| if expired { 0 } else { by };
        match batch {
            Some(b) => b.extend(keys.iter().map(|(k, e)| (k.clone(), who(*e)))),
            None => {
                let keys: Batch = keys.iter().map(|(k, e)| (k.clone(), who(*e))).collect();
                self.broadcast(r, keys);
            }
        }
    }

    /// Sends BCAST clients the keys under their prefixes: one message per prefix, keys in order
    /// and each once (the last to modify a key is who NOLOOP compares with), as Redis's
    /// `trackingBroadcastInvalidationMessages` does.
    pub fn broadcast(&self, r: &Reach, mut keys: Batch) {
        if keys.is_empty() {
            return;
        }
        // Sorted by key, the last modification of each kept.
        keys.reverse();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        keys.dedup_by(|a, b| a.0 == b.0);
        let prefixes = self.prefixes.read();
        let mut out: Vec<(Arc<Tracker>, Vec<&[u8]>)> = Vec::new();
        for (p, b) in prefixes.iter() {
            let under: Vec<&(Box<[u8]>, u64)> = keys.iter().filter(|(k, _)| k.starts_with(p)).collect();
            if under.is_empty() {
                continue;
            }
            for t in &b.clients {
                let ks: Vec<&[u8]> =
                    under.iter().filter(|(_, by)| !(t.noloop && *by == t.handle.id)).map(|(k, _)| &k[..]).collect();
                if !ks.is_empty() {
                    out.push((t.clone(), ks));
                }
            }
        }
        drop(prefixes);
        for (t, ks) in out {
            send(r, &t, Keys::List(&ks));
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client learns that all its keys are invalid.
    pub fn flushed(&self, r: &Reach) {
        let tr = self;
        // Each stripe's entries are counted out under its lock: a concurrent read in another
        // database may be adding to the table meanwhile.
        for s in &tr.table {
            let mut t = s.lock();
            if t.is_empty() {
                continue;
            }
            let items: usize = t.values().map(|ids| ids.len()).sum();
            tr.keys.fetch_sub(t.len(), Ordering::Relaxed);
            tr.items.fetch_sub(items, Ordering::Relaxed);
            *t = HashMap::new();
        }
        if !tr.on() {
            return;
        }
        let clients: Vec<Arc<Tracker>> = tr.clients.read().values().cloned().collect();
        for t in clients {
            send(r, &t, Keys::All);
        }
    }
}
