//! Redis Cluster: this node's view of the cluster (Redis's `clusterState`) — the nodes it
//! knows, who serves each of the 16384 slots, the epochs — and the decisions the call path
//! asks of it: may this node run a command on these keys, or where must the client go
//! (`-MOVED`, `-ASK`, `-TRYAGAIN`, `-CROSSSLOT`, `-CLUSTERDOWN`).
//!
//! The state sits under one leaf lock, taken by CLUSTER commands, the bus thread
//! (`daemons::cluster_bus`) and the call path's slow case. The common case takes no lock:
//! `route` keeps one byte per slot that says "served here, nothing moving", rebuilt whenever
//! slot ownership changes, so a GET in cluster mode costs one more load than standalone.
//!
//! `gossip` holds what the bus messages do to the state; `wire` their bytes; `conf` the
//! nodes.conf file.

pub mod conf;
pub mod gossip;
pub mod migration;
pub mod wire;

use crate::lockorder::{rank, Mutex};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use wire::{Name, Slots, NAMELEN, SLOTS};

/// Node flags, as the bus carries them.
pub const MASTER: u16 = 1;
pub const SLAVE: u16 = 2;
pub const PFAIL: u16 = 4;
pub const FAIL: u16 = 8;
pub const MYSELF: u16 = 16;
pub const HANDSHAKE: u16 = 32;
pub const NOADDR: u16 = 64;
pub const MEET: u16 = 128;
pub const MIGRATE_TO: u16 = 256;
pub const NOFAILOVER: u16 = 512;

/// `route` values.
const ROUTE_ELSEWHERE: u8 = 0;
const ROUTE_MINE: u8 = 1;

/// Two node names equal, compared as five words: `==` on 40-byte arrays is a call to memcmp,
/// and the loops over all 16384 slots after each CLUSTER SETSLOT spent most of their time
/// there.
#[inline]
fn same_name(a: &Name, b: &Name) -> bool {
    const _: () = assert!(wire::NAMELEN.is_multiple_of(8), "a name is compared in whole words");
    a.chunks_exact(8)
        .zip(b.chunks_exact(8))
        .all(|(x, y)| u64::from_ne_bytes(x.try_into().unwrap()) == u64::from_ne_bytes(y.try_into().unwrap()))
}

pub fn now_ms() -> i64 {
    crate::services::clock::unix_ms()
}

/// A random 40-hex-digit name (node IDs, shard IDs), as Redis's `getRandomHexChars`.
pub fn random_name() -> Name {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut n = [0u8; NAMELEN];
    for c in n.iter_mut() {
        *c = b"0123456789abcdef"[rng.gen_range(0..16)];
    }
    n
}

pub fn name_str(n: &Name) -> &str {
    std::str::from_utf8(n).unwrap_or("????????????????????????????????????????")
}

/// A node name as a client typed it: 40 characters (Redis checks only the length and that
/// the node exists).
pub fn parse_name(s: &[u8]) -> Option<Name> {
    s.try_into().ok()
}

#[derive(Clone)]
pub struct Node {
    pub name: Name,
    pub shard_id: Name,
    pub flags: u16,
    pub config_epoch: u64,
    pub slots: Box<Slots>,
    pub numslots: usize,
    pub slaveof: Option<Name>,
    pub ctime: i64,
    pub ping_sent: i64,
    pub pong_received: i64,
    pub data_received: i64,
    pub fail_time: i64,
    pub voted_time: i64,
    pub orphaned_time: i64,
    pub repl_offset: u64,
    pub repl_offset_time: i64,
    pub ip: String,
    pub hostname: String,
    pub human_nodename: String,
    pub tcp_port: u16,
    pub tls_port: u16,
    pub cport: u16,
    /// The bus links toward the node (ours) and from it (its), as the bus thread's tokens.
    pub link: Option<usize>,
    pub inbound: Option<usize>,
    /// When those links were made (CLUSTER LINKS, the cron's stale-link check).
    pub link_ctime: i64,
    pub inbound_ctime: i64,
    /// Masters that reported this node failing, and when.
    pub fail_reports: Vec<(Name, i64)>,
}

impl Node {
    pub fn new(name: Name, flags: u16) -> Node {
        Node {
            name,
            shard_id: random_name(),
            flags,
            config_epoch: 0,
            slots: Box::new([0; SLOTS / 8]),
            numslots: 0,
            slaveof: None,
            ctime: now_ms(),
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            voted_time: 0,
            orphaned_time: 0,
            repl_offset: 0,
            repl_offset_time: 0,
            ip: String::new(),
            hostname: String::new(),
            human_nodename: String::new(),
            tcp_port: 0,
            tls_port: 0,
            cport: 0,
            link: None,
            inbound: None,
            link_ctime: 0,
            inbound_ctime: 0,
            fail_reports: Vec::new(),
        }
    }
    pub fn is_master(&self) -> bool {
        self.flags & MASTER != 0
    }
    pub fn is_slave(&self) -> bool {
        self.flags & SLAVE != 0
    }
    pub fn failed(&self) -> bool {
        self.flags & FAIL != 0
    }
    pub fn timed_out(&self) -> bool {
        self.flags & PFAIL != 0
    }
    pub fn in_handshake(&self) -> bool {
        self.flags & HANDSHAKE != 0
    }
    pub fn has_addr(&self) -> bool {
        self.flags & NOADDR == 0
    }
    pub fn has_slot(&self, slot: usize) -> bool {
        wire::slot_bit(&self.slots, slot)
    }
    /// The slots as (first, last) ranges, ascending.
    pub fn slot_ranges(&self) -> Vec<(usize, usize)> {
        slot_ranges(&self.slots)
    }
}

pub fn slot_ranges(slots: &Slots) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for s in 0..=SLOTS {
        let on = s < SLOTS && wire::slot_bit(slots, s);
        match (on, start) {
            (true, None) => start = Some(s),
            (false, Some(b)) => {
                out.push((b, s - 1));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Settings the cluster reads often, copied from the configuration when it changes.
#[derive(Clone, Default)]
pub struct Settings {
    pub node_timeout: i64,
    /// How long after its last PONG a node is pinged (0: half the node timeout).
    pub ping_interval: i64,
    pub require_full_coverage: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
    pub allow_replica_migration: bool,
    pub migration_barrier: i64,
    pub replica_validity_factor: i64,
    pub replica_no_failover: bool,
    pub announce_ip: String,
    pub announce_hostname: String,
    pub announce_human_nodename: String,
    pub announce_port: u16,
    pub announce_tls_port: u16,
    pub announce_bus_port: u16,
    pub preferred_endpoint: Endpoint,
    pub tls_cluster: bool,
    /// `tls-replication`: a replica follows its master's TLS port (Redis's
    /// getNodeDefaultReplicationPort), whatever the bus runs over.
    pub tls_replication: bool,
    pub link_sendbuf_limit: u64,
    /// The client ports and the bus port this node listens on.
    pub tcp_port: u16,
    pub tls_port: u16,
    pub bus_port: u16,
}

#[derive(Clone, Copy, Default, PartialEq)]
pub enum Endpoint {
    #[default]
    Ip,
    Hostname,
    Unknown,
}

/// This node's view of the cluster.
pub struct State {
    pub myself: Name,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub ok: bool,
    /// Masters serving at least one slot.
    pub size: usize,
    pub nodes: HashMap<Name, Node>,
    pub slots: Vec<Option<Name>>,
    pub migrating: HashMap<usize, Name>,
    pub importing: HashMap<usize, Name>,
    /// Forgotten nodes, kept out until the Unix second given.
    pub blacklist: HashMap<Name, i64>,
    pub sent: [u64; wire::TYPES],
    pub received: [u64; wire::TYPES],
    pub links_buffer_limit_exceeded: u64,
    pub settings: Settings,
    /// Changes waiting for the bus thread: save nodes.conf (and fsync), recompute the state.
    pub todo_save: bool,
    pub todo_update: bool,
    /// When this node first saw it could not reach a majority, or rejoined (the delays of
    /// `update_state`).
    pub among_minority_since: i64,
    pub first_call_time: i64,
    /// Replica election (`gossip::handle_replica_failover`).
    pub failover_auth_time: i64,
    pub failover_auth_count: usize,
    pub failover_auth_sent: bool,
    pub failover_auth_rank: usize,
    pub failover_auth_epoch: u64,
    pub cant_failover_reason: u8,
    pub cant_failover_logged: i64,
    /// Manual failover: its deadline (0: none), the replica driving it (on the master), the
    /// master's offset to reach (on the replica, -1 until known), whether voting may start,
    /// and how it was asked (FORCE, TAKEOVER).
    pub mf_end: i64,
    pub mf_slave: Option<Name>,
    pub mf_master_offset: i64,
    pub mf_can_start: bool,
    /// Slots a ping stopped claiming (not re-spread by UPDATE messages).
    pub owner_not_claiming: Box<Slots>,
    /// Events for the bus thread or the server that cannot run under this lock.
    pub actions: Vec<gossip::Action>,
    /// Slot ownership, an open slot or the cluster's state changed since the routes were
    /// last published to the call path.
    pub routes_dirty: bool,
    /// Each link's bytes queued and not yet written, and what the bus thread's poll waits for
    /// on it (CLUSTER LINKS' send-buffer and events), as the bus thread last saw them.
    pub link_io: HashMap<usize, (u64, &'static str)>,
    /// Slots deleted from their owner since the bus last dropped their shard channels.
    channel_slots: Vec<usize>,
}

impl State {
    pub fn new(settings: Settings) -> State {
        let name = random_name();
        let mut me = Node::new(name, MYSELF | MASTER);
        me.tcp_port = settings.tcp_port;
        me.tls_port = settings.tls_port;
        me.cport = settings.bus_port;
        let mut nodes = HashMap::new();
        nodes.insert(name, me);
        let mut st = State {
            myself: name,
            current_epoch: 0,
            last_vote_epoch: 0,
            ok: false,
            size: 0,
            nodes,
            slots: vec![None; SLOTS],
            migrating: HashMap::new(),
            importing: HashMap::new(),
            blacklist: HashMap::new(),
            sent: [0; wire::TYPES],
            received: [0; wire::TYPES],
            links_buffer_limit_exceeded: 0,
            settings,
            todo_save: true,
            todo_update: true,
            among_minority_since: 0,
            first_call_time: 0,
            failover_auth_time: 0,
            failover_auth_count: 0,
            failover_auth_sent: false,
            failover_auth_rank: 0,
            failover_auth_epoch: 0,
            cant_failover_reason: 0,
            cant_failover_logged: 0,
            mf_end: 0,
            mf_slave: None,
            mf_master_offset: -1,
            mf_can_start: false,
            owner_not_claiming: Box::new([0; SLOTS / 8]),
            actions: Vec::new(),
            link_io: HashMap::new(),
            channel_slots: Vec::new(),
            routes_dirty: true,
        };
        st.apply_announced();
        st
    }

    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }
    pub fn me_mut(&mut self) -> &mut Node {
        self.nodes.get_mut(&self.myself).expect("myself is always known")
    }

    /// The announced hostname, human nodename and ports, and the nofailover flag, copied onto
    /// myself.
    pub fn apply_announced(&mut self) {
        let s = self.settings.clone();
        let me = self.me_mut();
        let before =
            (me.hostname.clone(), me.human_nodename.clone(), me.tcp_port, me.tls_port, me.cport, me.ip.clone());
        me.hostname = s.announce_hostname.clone();
        me.human_nodename = s.announce_human_nodename.clone();
        me.tcp_port = if s.announce_port != 0 { s.announce_port } else { s.tcp_port };
        me.tls_port = if s.announce_tls_port != 0 { s.announce_tls_port } else { s.tls_port };
        me.cport = if s.announce_bus_port != 0 { s.announce_bus_port } else { s.bus_port };
        if !s.announce_ip.is_empty() {
            me.ip = s.announce_ip.clone();
        }
        // cluster-replica-no-failover is announced as the node's nofailover flag (Redis's
        // clusterUpdateMyselfFlags).
        let flags = me.flags;
        me.flags = (me.flags & !NOFAILOVER) | if s.replica_no_failover { NOFAILOVER } else { 0 };
        let after = (me.hostname.clone(), me.human_nodename.clone(), me.tcp_port, me.tls_port, me.cport, me.ip.clone());
        let flags_changed = flags != me.flags;
        if before != after || flags_changed {
            self.todo_save = true;
        }
        if flags_changed {
            self.todo_update = true;
        }
    }

    /// A node as Redis's log names it: its id and its human nodename in parentheses.
    pub fn who(&self, n: &Name) -> String {
        match self.nodes.get(n) {
            Some(node) => who(node),
            None => format!("{} ()", name_str(n)),
        }
    }

    /// Slots deleted from their owner (`del_slot`: given to another node, to none, or even
    /// back to the same one by SETSLOT NODE): their shard channels' clients are unsubscribed
    /// by the bus thread (Redis's clusterDelSlot → removeChannelsInSlot).
    pub fn drop_channels_of_deleted_slots(&mut self) {
        if !self.channel_slots.is_empty() {
            let mut slots = std::mem::take(&mut self.channel_slots);
            slots.sort_unstable();
            slots.dedup();
            self.actions.push(gossip::Action::DropShardChannels(slots));
        }
    }

    /// The master of `n` (itself when it is one).
    pub fn master_of<'a>(&'a self, n: &'a Node) -> &'a Node {
        match n.slaveof.and_then(|m| self.nodes.get(&m)) {
            Some(m) if n.is_slave() => m,
            _ => n,
        }
    }

    pub fn replicas_of(&self, master: &Name) -> Vec<&Node> {
        let mut v: Vec<&Node> =
            self.nodes.values().filter(|n| n.is_slave() && n.slaveof.as_ref() == Some(master)).collect();
        v.sort_by_key(|a| a.name);
        v
    }

    /// Gives `slot` to `owner` (both in the node's bitmap and the slot table).
    pub fn add_slot(&mut self, slot: usize, owner: Name) -> bool {
        if self.slots[slot].is_some() {
            return false;
        }
        if let Some(n) = self.nodes.get_mut(&owner) {
            if !wire::slot_bit(&n.slots, slot) {
                wire::set_slot_bit(&mut n.slots, slot, true);
                n.numslots += 1;
            }
        }
        self.slots[slot] = Some(owner);
        self.routes_dirty = true;
        true
    }

    pub fn del_slot(&mut self, slot: usize) -> bool {
        let Some(owner) = self.slots[slot].take() else {
            return false;
        };
        // As Redis's clusterDelSlot: the slot's "owner stopped claiming it" mark goes with its
        // owner; an import in progress stays (SETSLOT NODE to myself ends it).
        wire::set_slot_bit(&mut self.owner_not_claiming, slot, false);
        self.routes_dirty = true;
        self.channel_slots.push(slot);
        if let Some(n) = self.nodes.get_mut(&owner) {
            if wire::slot_bit(&n.slots, slot) {
                wire::set_slot_bit(&mut n.slots, slot, false);
                n.numslots -= 1;
            }
        }
        true
    }

    /// Removes every slot `name` serves; how many.
    pub fn del_node_slots(&mut self, name: &Name) -> usize {
        let mut deleted = 0;
        for s in 0..SLOTS {
            if self.slots[s].as_ref() == Some(name) {
                self.del_slot(s);
                deleted += 1;
            }
        }
        deleted
    }

    /// The greatest config epoch known, or the current epoch if greater.
    pub fn max_epoch(&self) -> u64 {
        self.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0).max(self.current_epoch)
    }

    /// Redis's `clusterBumpConfigEpochWithoutConsensus`: a new config epoch for myself unless
    /// mine is already the greatest and unique.
    pub fn bump_epoch_without_consensus(&mut self) -> bool {
        let max = self.max_epoch();
        let mine = self.me().config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch = self.current_epoch.wrapping_add(1);
            let e = self.current_epoch;
            self.me_mut().config_epoch = e;
            self.todo_save = true;
            crate::log_notice!("New configEpoch set to {e}");
            true
        } else {
            false
        }
    }

    /// Makes `name` a known node (used by MEET handshakes and nodes.conf).
    pub fn add_node(&mut self, n: Node) {
        self.nodes.insert(n.name, n);
    }

    /// Forgets `name`: its slots, its failure reports about others, its replicas' master.
    pub fn del_node(&mut self, name: &Name) {
        self.routes_dirty = true;
        for s in 0..SLOTS {
            if self.importing.get(&s) == Some(name) {
                self.importing.remove(&s);
            }
            if self.migrating.get(&s) == Some(name) {
                self.migrating.remove(&s);
            }
            if self.slots[s].as_ref() == Some(name) {
                self.del_slot(s);
            }
        }
        for n in self.nodes.values_mut() {
            n.fail_reports.retain(|(r, _)| r != name);
        }
        if let Some(n) = self.nodes.remove(name) {
            for token in [n.link, n.inbound].into_iter().flatten() {
                self.actions.push(gossip::Action::CloseLink(token));
            }
        }
    }

    /// The endpoint clients are sent to for `n` (`cluster-preferred-endpoint-type`).
    pub fn preferred_endpoint(&self, n: &Node) -> String {
        match self.settings.preferred_endpoint {
            Endpoint::Ip => n.ip.clone(),
            Endpoint::Hostname if !n.hostname.is_empty() => n.hostname.clone(),
            Endpoint::Hostname => "?".to_string(),
            Endpoint::Unknown => String::new(),
        }
    }

    /// The port a client is sent to (MOVED, ASK, CLUSTER NODES/SLOTS/SHARDS …).
    pub fn client_port(&self, n: &Node, tls_client: bool) -> u16 {
        // As Redis's getNodeClientPort: by the asking client's connection alone, whatever the
        // bus runs over (a TLS client of a plain-bus cluster is sent to TLS ports).
        if tls_client {
            n.tls_port
        } else {
            n.tcp_port
        }
    }

    /// Redis's `clusterUpdateState`: the cluster is ok when every slot is served by a node
    /// that is not failing (or `cluster-require-full-coverage no`) and this master can reach
    /// a majority of the masters; a master coming back from a minority waits before serving.
    pub fn update_state(&mut self) {
        let now = now_ms();
        if self.first_call_time == 0 {
            self.first_call_time = now;
        }
        let timeout = self.settings.node_timeout;
        // A master waits a little after start-up for the others' view before saying ok.
        let rejoin_delay = timeout.clamp(500, 5000);
        if self.me().is_master() && !self.ok && now - self.first_call_time < 2000 {
            return;
        }
        let mut new_ok = true;
        if self.settings.require_full_coverage {
            // Slots come in runs of one owner: its node is looked up once per run, not once
            // per slot (this runs after every CLUSTER SETSLOT of a reshard).
            let mut last: Option<(Name, bool)> = None;
            for o in self.slots.iter() {
                let Some(o) = o else {
                    new_ok = false;
                    break;
                };
                let serving = match last {
                    Some((l, v)) if same_name(&l, o) => v,
                    _ => {
                        let v = self.nodes.get(o).is_some_and(|n| !n.failed());
                        last = Some((*o, v));
                        v
                    }
                };
                if !serving {
                    new_ok = false;
                    break;
                }
            }
        }
        let masters: Vec<&Node> = self.nodes.values().filter(|n| n.is_master() && n.numslots > 0).collect();
        self.size = masters.len();
        let reachable = masters.iter().filter(|n| !n.failed() && !n.timed_out()).count();
        let quorum = self.size / 2 + 1;
        if reachable < quorum {
            new_ok = false;
            self.among_minority_since = now;
        }
        if new_ok != self.ok {
            if new_ok && self.me().is_master() && now - self.among_minority_since < rejoin_delay {
                return;
            }
            crate::log_notice!("Cluster state changed: {}", if new_ok { "ok" } else { "fail" });
            self.ok = new_ok;
            self.routes_dirty = true;
        }
    }

    /// Redis's getNodeByQuery for keys already reduced to their slots (`None`: no keys).
    pub fn route(&self, q: &Query, exists: &mut dyn FnMut(&[u8]) -> bool) -> Result<(), Redirect> {
        let Some(slot) = q.slot else {
            return Ok(());
        };
        let Some(owner) = self.slots[slot] else {
            return Err(Redirect::Unbound);
        };
        let me = self.me();
        let migrating = owner == self.myself && self.migrating.contains_key(&slot);
        let importing = !migrating && self.importing.contains_key(&slot);
        let (mut missing, mut existing) = (0, 0);
        if migrating || importing {
            for k in q.keys {
                if exists(k) {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
        if !self.ok {
            if q.pubsubshard {
                if !self.settings.allow_pubsubshard_when_down {
                    return Err(Redirect::Down);
                }
            } else if !self.settings.allow_reads_when_down {
                return Err(Redirect::Down);
            } else if q.write {
                return Err(Redirect::DownReadOnly);
            }
        }
        if (migrating || importing) && q.is_migrate {
            return Ok(());
        }
        if migrating && missing > 0 {
            if existing > 0 {
                return Err(Redirect::TryAgain);
            }
            return Err(Redirect::Ask(slot, self.migrating[&slot]));
        }
        if importing && q.asking {
            if q.multiple_keys && missing > 0 {
                return Err(Redirect::TryAgain);
            }
            return Ok(());
        }
        if (q.readonly || q.pubsubshard) && !q.write && me.is_slave() && me.slaveof == Some(owner) {
            return Ok(());
        }
        if owner != self.myself {
            return Err(Redirect::Moved(slot, owner));
        }
        Ok(())
    }

    /// The error text of a redirection, with the target's address as this node knows it.
    pub fn redirect_text(&self, r: &Redirect, tls_client: bool) -> String {
        match r {
            Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Redirect::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Redirect::Down => "CLUSTERDOWN The cluster is down".into(),
            Redirect::DownReadOnly => "CLUSTERDOWN The cluster is down and only accepts read commands".into(),
            Redirect::Unbound => "CLUSTERDOWN Hash slot not served".into(),
            Redirect::Moved(slot, n) | Redirect::Ask(slot, n) => {
                let kind = if matches!(r, Redirect::Moved(..)) { "MOVED" } else { "ASK" };
                match self.nodes.get(n) {
                    Some(node) => format!(
                        "{kind} {slot} {}:{}",
                        self.preferred_endpoint(node),
                        self.client_port(node, tls_client)
                    ),
                    None => "CLUSTERDOWN Hash slot not served".into(),
                }
            }
        }
    }

    /// The per-slot bytes the call path reads without this lock.
    fn routes(&self) -> Vec<u8> {
        let mut r = vec![ROUTE_ELSEWHERE; SLOTS];
        if !self.ok {
            return r;
        }
        for (s, o) in self.slots.iter().enumerate() {
            if o.as_ref().is_some_and(|o| same_name(o, &self.myself)) {
                r[s] = ROUTE_MINE;
            }
        }
        // A slot on the move is decided per key (ASK / TRYAGAIN), not by the table.
        for s in self.migrating.keys().chain(self.importing.keys()) {
            r[*s] = ROUTE_ELSEWHERE;
        }
        r
    }

    /// One line of CLUSTER NODES (`conf`: the nodes.conf form, with the aux fields).
    pub fn describe(&self, n: &Node, conf: bool, tls_client: bool) -> String {
        let mut s = String::with_capacity(256);
        s.push_str(name_str(&n.name));
        let port = if conf { n.tcp_port } else { self.client_port(n, tls_client) };
        let _ = write!(s, " {}:{}@{}", n.ip, port, n.cport);
        if conf {
            // The aux fields in Redis's order; a bare comma when there is no hostname.
            let _ = write!(s, ",{},tls-port={}", n.hostname, n.tls_port);
            if !n.human_nodename.is_empty() {
                let _ = write!(s, ",nodename={}", n.human_nodename);
            }
            let _ = write!(s, ",shard-id={}", name_str(&n.shard_id));
        } else if !n.hostname.is_empty() {
            let _ = write!(s, ",{}", n.hostname);
        }
        s.push(' ');
        s.push_str(&flags_text(n.flags));
        match n.slaveof {
            Some(m) if n.is_slave() => {
                s.push(' ');
                s.push_str(name_str(&m));
            }
            _ => s.push_str(" -"),
        }
        let epoch = self.master_of(n).config_epoch;
        let connected = n.link.is_some() || n.flags & MYSELF != 0;
        let _ = write!(
            s,
            " {} {} {} {}",
            n.ping_sent,
            n.pong_received,
            epoch,
            if connected { "connected" } else { "disconnected" }
        );
        if n.is_master() {
            for (a, b) in n.slot_ranges() {
                if a == b {
                    let _ = write!(s, " {a}");
                } else {
                    let _ = write!(s, " {a}-{b}");
                }
            }
        }
        if n.flags & MYSELF != 0 {
            let mut open: Vec<(usize, String)> = Vec::new();
            for (slot, to) in &self.migrating {
                open.push((*slot, format!(" [{slot}->-{}]", name_str(to))));
            }
            for (slot, from) in &self.importing {
                open.push((*slot, format!(" [{slot}-<-{}]", name_str(from))));
            }
            open.sort();
            for (_, t) in open {
                s.push_str(&t);
            }
        }
        s
    }

    /// CLUSTER NODES: every node, myself first.
    pub fn nodes_text(&self, tls_client: bool) -> String {
        let mut out = String::new();
        for n in self.ordered_nodes() {
            out.push_str(&self.describe(n, false, tls_client));
            out.push('\n');
        }
        out
    }

    /// Nodes in a stable order: myself, then by name.
    pub fn ordered_nodes(&self) -> Vec<&Node> {
        let mut v: Vec<&Node> = self.nodes.values().collect();
        v.sort_by_key(|a| (a.name != self.myself, a.name));
        v
    }

    pub fn slots_assigned(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// CLUSTER INFO.
    pub fn info_text(&self) -> String {
        let (mut ok, mut pfail, mut fail) = (0, 0, 0);
        for o in self.slots.iter().flatten() {
            match self.nodes.get(o) {
                Some(n) if n.failed() => fail += 1,
                Some(n) if n.timed_out() => pfail += 1,
                Some(_) => ok += 1,
                None => {}
            }
        }
        let me = self.me();
        let my_epoch = self.master_of(me).config_epoch;
        let mut s = format!(
            "cluster_state:{}\r\ncluster_slots_assigned:{}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
            if self.ok { "ok" } else { "fail" },
            self.slots_assigned(),
            self.nodes.len(),
            self.size,
            self.current_epoch,
        );
        let mut total = 0;
        for (i, name) in wire::TYPE_NAMES.iter().enumerate() {
            if self.sent[i] != 0 {
                let _ = write!(s, "cluster_stats_messages_{name}_sent:{}\r\n", self.sent[i]);
            }
            total += self.sent[i];
        }
        let _ = write!(s, "cluster_stats_messages_sent:{total}\r\n");
        let mut total = 0;
        for (i, name) in wire::TYPE_NAMES.iter().enumerate() {
            if self.received[i] != 0 {
                let _ = write!(s, "cluster_stats_messages_{name}_received:{}\r\n", self.received[i]);
            }
            total += self.received[i];
        }
        let _ = write!(s, "cluster_stats_messages_received:{total}\r\n");
        let _ = write!(s, "total_cluster_links_buffer_limit_exceeded:{}\r\n", self.links_buffer_limit_exceeded);
        s
    }
}

/// Flags as CLUSTER NODES words them.
pub fn flags_text(f: u16) -> String {
    let mut v = Vec::new();
    for (bit, word) in [
        (MYSELF, "myself"),
        (MASTER, "master"),
        (SLAVE, "slave"),
        (PFAIL, "fail?"),
        (FAIL, "fail"),
        (HANDSHAKE, "handshake"),
        (NOADDR, "noaddr"),
        (NOFAILOVER, "nofailover"),
    ] {
        if f & bit != 0 {
            v.push(word);
        }
    }
    if v.is_empty() {
        "noflags".into()
    } else {
        v.join(",")
    }
}

/// What the call path asks of a command.
pub struct Query<'a> {
    /// The one slot every key is in (`None`: the command names no key).
    pub slot: Option<usize>,
    pub keys: &'a [&'a [u8]],
    pub multiple_keys: bool,
    pub write: bool,
    pub asking: bool,
    pub readonly: bool,
    pub pubsubshard: bool,
    pub is_migrate: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Redirect {
    CrossSlot,
    TryAgain,
    Ask(usize, Name),
    Moved(usize, Name),
    Down,
    DownReadOnly,
    Unbound,
}

/// A node as Redis's log names it: its id and its human nodename in parentheses.
pub fn who(n: &Node) -> String {
    format!("{} ({})", name_str(&n.name), n.human_nodename)
}

/// The cluster as the server holds it: disabled, or the state and the lock-free route table.
pub struct Cluster {
    pub enabled: bool,
    route: Vec<AtomicU8>,
    pub state: Mutex<Option<State>, { rank::LEAF }>,
    /// Wakes the bus thread (set once it runs).
    pub waker: std::sync::OnceLock<std::sync::Arc<mio::Waker>>,
    /// The nodes.conf path, once loaded.
    pub conf_path: std::sync::OnceLock<std::path::PathBuf>,
    pub ok: AtomicBool,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: messages of this type are counted and dropped
    /// unread (-1: none).
    pub drop_filter: std::sync::atomic::AtomicI64,
    /// Bytes the bus's links hold in their buffers (INFO's mem_cluster_links).
    pub links_mem: std::sync::atomic::AtomicU64,
    /// Atomic slot migrations (CLUSTER MIGRATESLOTS), either end.
    pub migrations: migration::Migrations,
}

impl Cluster {
    pub fn new(enabled: bool) -> Cluster {
        if enabled {
            // Before any key is loaded: every key is counted in its slot from the start.
            crate::engine::slot::INDEXED.store(true, Ordering::Relaxed);
        }
        Cluster {
            enabled,
            route: (0..SLOTS).map(|_| AtomicU8::new(ROUTE_ELSEWHERE)).collect(),
            state: Mutex::new(None),
            waker: std::sync::OnceLock::new(),
            conf_path: std::sync::OnceLock::new(),
            ok: AtomicBool::new(false),
            drop_filter: std::sync::atomic::AtomicI64::new(-1),
            links_mem: std::sync::atomic::AtomicU64::new(0),
            migrations: migration::Migrations::default(),
        }
    }

    /// Whether `slot` is served here with nothing moving and the cluster ok: the call path's
    /// whole check in the common case.
    #[inline]
    pub fn serves(&self, slot: usize) -> bool {
        self.route[slot].load(Ordering::Relaxed) == ROUTE_MINE
    }

    /// Publishes the state's slot ownership to the lock-free table when it changed (the bus
    /// thread, after each message and cron).
    pub fn publish_if_dirty(&self, st: &mut State) {
        if std::mem::take(&mut st.routes_dirty) {
            st.drop_channels_of_deleted_slots();
            self.publish(st);
        }
    }

    /// Runs `f` on the state without republishing the routes (reads, PUBLISH).
    pub fn peek<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        let mut g = self.state.lock();
        let r = f(g.as_mut()?);
        drop(g);
        self.wake();
        Some(r)
    }

    /// Publishes the state's slot ownership to the lock-free table (after any change).
    pub fn publish(&self, st: &State) {
        // Only the slots whose route changed are written: workers read these on every keyed
        // command, and a store would take each cache line away from them.
        for (i, r) in st.routes().into_iter().enumerate() {
            if self.route[i].load(Ordering::Relaxed) != r {
                self.route[i].store(r, Ordering::Relaxed);
            }
        }
        self.ok.store(st.ok, Ordering::Relaxed);
    }

    /// Runs `f` on a state that changes nothing routing depends on (CLUSTER INFO, NODES, MYID
    /// …): brought up to date first if a change is pending, but not republished when none is,
    /// as Redis's reads leave its beforeSleep nothing to do. (Republishing walks all 16384
    /// slots; pending actions and saves stay the bus thread's.)
    pub fn read<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        let mut g = self.state.lock();
        let st = g.as_mut()?;
        if std::mem::take(&mut st.todo_update) {
            st.update_state();
            self.publish_if_dirty(st);
        }
        Some(f(st))
    }

    /// Runs `f` on the state, then republishes the routes and wakes the bus thread.
    pub fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        let mut g = self.state.lock();
        let st = g.as_mut()?;
        let r = f(st);
        // As Redis's beforeSleep after a command: the cluster's state is recomputed before the
        // next command is routed.
        if std::mem::take(&mut st.todo_update) {
            st.update_state();
        }
        st.routes_dirty = false;
        st.drop_channels_of_deleted_slots();
        self.publish(st);
        drop(g);
        self.wake();
        Some(r)
    }

    pub fn wake(&self) {
        if let Some(w) = self.waker.get() {
            let _ = w.wake();
        }
    }
}
