//! What the cluster bus's messages do to this node's view, and what it sends (Redis 7.2's
//! `clusterProcessPacket`, `clusterSendPing`, `clusterCron`). No I/O here: the bus thread
//! (`daemons::cluster_bus`) owns the sockets, hands each whole message to [`process`] with
//! what it knows of the link, and carries out the [`Action`]s left in `State::actions`.

use super::wire::{self, Body, Ext, Gossip, Header, Msg, Name, NAMELEN, SLOTS};
use super::*;
use rand::seq::IteratorRandom;

/// What the bus thread (or the server, for replication and keys) must do after a change.
#[derive(Clone)]
pub enum Action {
    /// Send on the node's outbound link (dropped when it has none).
    Send(Name, Msg),
    /// Send on this link (replies go back where the request came from).
    SendLink(usize, Msg),
    CloseLink(usize),
    /// Deliver a message published on another node to this node's subscribers.
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
        shard: bool,
    },
    /// Replicate from this address (CLUSTER REPLICATE, a lost master's slots moved).
    Follow {
        host: String,
        port: u16,
    },
    /// Stop replicating (a failover won).
    BecomeMaster,
    /// Keys of slots this node no longer serves are deleted (Redis's dirty slots).
    DeleteSlots(Vec<usize>),
    /// MFSTART from a replica: pause writes until this Unix ms (0: unpause).
    PauseWrites(i64),
    /// These slots changed hands: their shard channels' subscribers are unsubscribed.
    DropShardChannels(Vec<usize>),
}

/// What the bus thread knows of the link a message came on.
pub struct LinkView {
    pub token: usize,
    /// The node it belongs to (outbound links always; inbound once the sender is known).
    pub node: Option<Name>,
    pub inbound: bool,
    /// The peer's address, and ours on this connection.
    pub peer_ip: String,
    pub local_ip: String,
}

impl State {
    /// The header of a message from this node (Redis's `clusterBuildMessageHdr`).
    pub fn header(&self, kind: u16, offset: u64) -> Header {
        let me = self.me();
        let master = self.master_of(me);
        let s = &self.settings;
        let (port, pport) = if s.tls_cluster { (me.tls_port, me.tcp_port) } else { (me.tcp_port, me.tls_port) };
        let mut mflags = [0u8; 3];
        if me.is_master() && self.mf_end != 0 {
            mflags[0] |= wire::MF_PAUSED;
        }
        Header {
            kind,
            count: 0,
            port,
            pport,
            cport: me.cport,
            current_epoch: self.current_epoch,
            config_epoch: master.config_epoch,
            offset,
            sender: self.myself,
            slots: master.slots.clone(),
            slaveof: if me.is_slave() { me.slaveof } else { None },
            myip: s.announce_ip.clone(),
            flags: me.flags,
            state: if self.ok { 0 } else { 1 },
            mflags,
        }
    }

    fn gossip_entry(&self, n: &Node) -> Gossip {
        let (port, pport) = if self.settings.tls_cluster { (n.tls_port, n.tcp_port) } else { (n.tcp_port, n.tls_port) };
        Gossip {
            name: n.name,
            ping_sent: (n.ping_sent / 1000) as u32,
            pong_received: (n.pong_received / 1000) as u32,
            ip: n.ip.clone(),
            port,
            cport: n.cport,
            flags: n.flags,
            pport,
        }
    }

    /// A PING, PONG or MEET with gossip about a tenth of the nodes (at least three) and every
    /// node in PFAIL, then the extensions.
    pub fn ping(&self, kind: u16, offset: u64) -> Msg {
        let mut hdr = self.header(kind, offset);
        let total = self.nodes.len();
        let wanted = (total / 10).max(3).min(total.saturating_sub(2));
        let mut rng = rand::thread_rng();
        let candidates = self.nodes.values().filter(|n| {
            n.name != self.myself
                && !n.timed_out()
                && !n.in_handshake()
                && n.has_addr()
                && !(n.link.is_none() && n.numslots == 0)
        });
        let mut gossip: Vec<Gossip> =
            candidates.choose_multiple(&mut rng, wanted).into_iter().map(|n| self.gossip_entry(n)).collect();
        for n in self.nodes.values() {
            if n.timed_out() && !n.in_handshake() && n.has_addr() && n.name != self.myself {
                gossip.push(self.gossip_entry(n));
            }
        }
        let me = self.me();
        let mut exts = Vec::new();
        if !me.hostname.is_empty() {
            exts.push(Ext::Hostname(me.hostname.clone().into_bytes()));
        }
        if !me.human_nodename.is_empty() {
            exts.push(Ext::HumanNodename(me.human_nodename.clone().into_bytes()));
        }
        let now_s = now_ms() / 1000;
        for (name, until) in &self.blacklist {
            if *until >= now_s {
                exts.push(Ext::Forgotten { name: *name, ttl: (*until - now_s) as u64 });
            }
        }
        exts.push(Ext::ShardId(me.shard_id));
        hdr.count = gossip.len() as u16;
        Msg { hdr, body: Body::Ping { gossip, exts } }
    }

    fn push_send(&mut self, to: Name, msg: Msg) {
        self.sent[msg.hdr.kind as usize] += 1;
        self.actions.push(Action::Send(to, msg));
    }

    fn push_send_link(&mut self, token: usize, msg: Msg) {
        self.sent[msg.hdr.kind as usize] += 1;
        self.actions.push(Action::SendLink(token, msg));
    }

    /// Sends a message on every node's outbound link (not myself, not in handshake).
    pub fn broadcast(&mut self, msg: Msg) {
        let targets: Vec<Name> = self
            .nodes
            .values()
            .filter(|n| n.name != self.myself && !n.in_handshake() && n.link.is_some())
            .map(|n| n.name)
            .collect();
        for t in targets {
            self.push_send(t, msg.clone());
        }
    }

    /// A PING on the node's outbound link; only a PING starts the wait for its PONG.
    pub fn send_ping(&mut self, to: Name, offset: u64) {
        let msg = self.ping(wire::PING, offset);
        if let Some(n) = self.nodes.get_mut(&to) {
            if n.link.is_some() {
                n.ping_sent = now_ms();
            }
        }
        self.push_send(to, msg);
    }

    /// CLUSTER MEET's first step: a node in handshake, named at random until it answers.
    pub fn start_handshake(&mut self, ip: &str, port: u16, cport: u16) -> bool {
        let norm = match ip.parse::<std::net::IpAddr>() {
            Ok(a) => a.to_string(),
            Err(_) => return false,
        };
        if port == 0 || cport == 0 {
            return false;
        }
        let tls = self.settings.tls_cluster;
        let busy = self.nodes.values().any(|n| {
            n.in_handshake()
                && n.ip.eq_ignore_ascii_case(&norm)
                && (if tls { n.tls_port } else { n.tcp_port }) == port
                && n.cport == cport
        });
        if busy {
            return true;
        }
        let mut n = Node::new(random_name(), HANDSHAKE | MEET);
        n.ip = norm;
        if tls {
            n.tls_port = port;
        } else {
            n.tcp_port = port;
        }
        n.cport = cport;
        self.add_node(n);
        true
    }

    /// Marks `name` failing when a majority of masters reported it (and tells everyone).
    fn mark_failing_if_needed(&mut self, name: &Name) {
        let timeout = self.settings.node_timeout;
        let me_master = self.me().is_master();
        let quorum = self.size / 2 + 1;
        let now = now_ms();
        let Some(n) = self.nodes.get_mut(name) else { return };
        if !n.timed_out() || n.failed() {
            return;
        }
        n.fail_reports.retain(|(_, t)| now - *t <= timeout * 2);
        let failures = n.fail_reports.len() + usize::from(me_master);
        if failures < quorum {
            return;
        }
        crate::log_notice!("Marking node {} as failing (quorum reached).", super::who(n));
        n.flags &= !PFAIL;
        n.flags |= FAIL;
        n.fail_time = now;
        let msg = Msg { hdr: self.header(wire::FAIL, 0), body: Body::Fail { name: *name } };
        self.broadcast(msg);
        self.todo_update = true;
        self.todo_save = true;
    }

    /// A master that is back clears FAIL at once if it serves no slot, or once it has been
    /// failing long enough that nobody took its slots.
    fn clear_failure_if_needed(&mut self, name: &Name) {
        let timeout = self.settings.node_timeout;
        let now = now_ms();
        let Some(n) = self.nodes.get_mut(name) else { return };
        let clear =
            n.is_slave() || n.numslots == 0 || (n.is_master() && n.numslots > 0 && now - n.fail_time > timeout * 2);
        if clear && n.failed() {
            crate::log_notice!(
                "Clear FAIL state for node {}:{} is reachable again.",
                super::who(n),
                if n.is_slave() || n.numslots == 0 { "replica" } else { "master without slots" }
            );
            n.flags &= !FAIL;
            self.todo_update = true;
            self.todo_save = true;
        }
    }

    /// Makes a node a master (it was a replica).
    pub fn set_node_as_master(&mut self, name: &Name) {
        let me = self.myself;
        let Some(n) = self.nodes.get_mut(name) else { return };
        if n.is_master() {
            return;
        }
        let old = n.slaveof.take();
        n.flags &= !SLAVE;
        n.flags |= MASTER;
        if old.is_some() && *name != me {
            n.flags |= MIGRATE_TO;
        }
        self.todo_save = true;
        self.todo_update = true;
    }

    /// Redis's `clusterUpdateSlotsConfigWith`: the sender claims `slots` with `epoch`; every
    /// slot held by an older epoch moves to it. Returns the slots this node lost with keys.
    pub fn update_slots_with(
        &mut self,
        sender: Name,
        epoch: u64,
        slots: &wire::Slots,
        offset_keys: &dyn Fn(usize) -> bool,
    ) {
        if sender == self.myself {
            return;
        }
        let me = self.me();
        let curmaster = if me.is_master() { Some(self.myself) } else { me.slaveof };
        let mut newmaster = None;
        let mut migrated_ours = 0usize;
        let mut dirty = Vec::new();
        let sender_slots = slots.iter().map(|b| b.count_ones() as usize).sum::<usize>();
        for j in 0..SLOTS {
            if wire::slot_bit(slots, j) {
                if self.slots[j] == Some(sender) {
                    wire::set_slot_bit(&mut self.owner_not_claiming, j, false);
                    continue;
                }
                if self.importing.contains_key(&j) {
                    continue;
                }
                let owner_epoch = self.slots[j].and_then(|o| self.nodes.get(&o)).map(|o| o.config_epoch);
                let unclaimed = self.slots[j].is_none() || wire::slot_bit(&self.owner_not_claiming, j);
                if unclaimed || owner_epoch.is_some_and(|e| e < epoch) {
                    if self.slots[j] == Some(self.myself) && offset_keys(j) {
                        dirty.push(j);
                    }
                    if self.slots[j].is_some() && self.slots[j] == curmaster {
                        newmaster = Some(sender);
                        migrated_ours += 1;
                    }
                    self.del_slot(j);
                    self.add_slot(j, sender);
                    wire::set_slot_bit(&mut self.owner_not_claiming, j, false);
                    self.todo_save = true;
                    self.todo_update = true;
                }
            } else if self.slots[j] == Some(sender) {
                wire::set_slot_bit(&mut self.owner_not_claiming, j, true);
            }
        }
        let cur_slots = curmaster.and_then(|m| self.nodes.get(&m)).map(|m| m.numslots).unwrap_or(0);
        if let Some(nm) = newmaster.filter(|_| cur_slots == 0) {
            if self.settings.allow_replica_migration || sender_slots == migrated_ours {
                crate::log_notice!(
                    "Configuration change detected. Reconfiguring myself as a replica of {}",
                    self.who(&nm)
                );
                self.set_my_master(nm);
                return;
            }
        }
        if !dirty.is_empty() {
            // The bus thread deletes their keys and logs the slots that had some.
            self.actions.push(Action::DeleteSlots(dirty));
        }
    }

    /// Makes myself a replica of `master` (Redis's `clusterSetMaster`).
    pub fn set_my_master(&mut self, master: Name) {
        let me = self.myself;
        self.routes_dirty = true;
        if master == me {
            return;
        }
        let was_master = self.me().is_master();
        if was_master {
            self.del_node_slots(&me);
            self.migrating.clear();
            self.importing.clear();
        }
        let (shard, host, port) = match self.nodes.get(&master) {
            Some(m) => (m.shard_id, m.ip.clone(), if self.settings.tls_replication { m.tls_port } else { m.tcp_port }),
            None => return,
        };
        let n = self.me_mut();
        n.flags &= !(MASTER | MIGRATE_TO);
        n.flags |= SLAVE;
        n.slaveof = Some(master);
        n.shard_id = shard;
        self.mf_end = 0;
        self.actions.push(Action::Follow { host, port });
        self.todo_save = true;
        self.todo_update = true;
    }

    /// A message from the bus. `offset`: this node's replication offset (for the PONG).
    /// Returns false when the link must be closed (the bus thread closes it).
    pub fn process(
        &mut self,
        link: &mut LinkView,
        msg: Msg,
        offset: u64,
        keys_in_slot: &dyn Fn(usize) -> bool,
    ) -> bool {
        let h = &msg.hdr;
        let kind = h.kind;
        self.received[kind as usize] += 1;
        let now = now_ms();
        // The sender: the link's node once known, else the name in the header.
        let sender: Option<Name> = match link.node.and_then(|n| self.nodes.get(&n)) {
            Some(n) if !n.in_handshake() => Some(n.name),
            _ => {
                let s = self.nodes.get(&h.sender).map(|n| n.name);
                if let (Some(s), true) = (s, link.inbound && link.node.is_none()) {
                    self.bind_inbound(link, s);
                }
                s
            }
        };
        if let Some(s) = sender {
            let mf_watch = self.mf_end != 0
                && self.me().is_slave()
                && self.me().slaveof == Some(s)
                && h.mflags[0] & wire::MF_PAUSED != 0
                && self.mf_master_offset == -1;
            let n = self.nodes.get_mut(&s).expect("sender known");
            n.data_received = now;
            if !n.in_handshake() {
                if h.config_epoch > n.config_epoch {
                    n.config_epoch = h.config_epoch;
                    self.todo_save = true;
                }
                n.repl_offset = h.offset;
                n.repl_offset_time = now;
                if h.current_epoch > self.current_epoch {
                    self.current_epoch = h.current_epoch;
                    self.todo_save = true;
                }
                if mf_watch {
                    self.mf_master_offset = h.offset as i64;
                    crate::log_notice!("Received replication offset for paused master manual failover: {}", h.offset);
                }
            }
        }
        match kind {
            wire::PING | wire::PONG | wire::MEET => {}
            wire::FAIL => {
                if let (Some(_), Body::Fail { name }) = (sender, &msg.body) {
                    let name = *name;
                    let sender_who = self.who(&h.sender);
                    if let Some(n) = self.nodes.get_mut(&name) {
                        if n.flags & (FAIL | MYSELF) == 0 {
                            crate::log_notice!("FAIL message received from {} about {}", sender_who, super::who(n));
                            n.flags |= FAIL;
                            n.fail_time = now;
                            n.flags &= !PFAIL;
                            self.todo_update = true;
                            self.todo_save = true;
                        }
                    }
                }
                return true;
            }
            wire::PUBLISH | wire::PUBLISHSHARD => {
                if let (Some(_), Body::Publish { channel, message }) = (sender, msg.body) {
                    self.actions.push(Action::Publish { channel, message, shard: kind == wire::PUBLISHSHARD });
                }
                return true;
            }
            wire::AUTH_REQUEST => {
                if let Some(s) = sender {
                    self.vote_if_needed(s, &msg.hdr);
                }
                return true;
            }
            wire::AUTH_ACK => {
                if let Some(s) = sender {
                    let n = &self.nodes[&s];
                    if n.is_master() && n.numslots > 0 && h.current_epoch >= self.failover_auth_epoch {
                        self.failover_auth_count += 1;
                    }
                }
                return true;
            }
            wire::MFSTART => {
                if let Some(s) = sender {
                    if self.nodes[&s].slaveof == Some(self.myself) {
                        self.mf_end = now + 5000;
                        self.mf_slave = Some(s);
                        self.actions.push(Action::PauseWrites(now + 10_000));
                        crate::log_notice!("Manual failover requested by replica {}.", self.who(&s));
                        let ping = self.ping(wire::PING, offset);
                        self.push_send_link(link.token, ping);
                    }
                }
                return true;
            }
            wire::UPDATE => {
                if let (Some(_), Body::Update { config_epoch, name, slots }) = (sender, &msg.body) {
                    let Some(n) = self.nodes.get(name) else { return true };
                    if n.config_epoch >= *config_epoch {
                        return true;
                    }
                    let name = *name;
                    if n.is_slave() {
                        self.set_node_as_master(&name);
                    }
                    self.nodes.get_mut(&name).expect("known").config_epoch = *config_epoch;
                    self.todo_save = true;
                    self.update_slots_with(name, *config_epoch, slots, keys_in_slot);
                }
                return true;
            }
            _ => return true,
        }
        // PING, PONG, MEET.
        let (gossip, exts) = match &msg.body {
            Body::Ping { gossip, exts } => (gossip.as_slice(), exts.as_slice()),
            _ => (&[][..], &[][..]),
        };
        let (tcp_port, tls_port) = if self.settings.tls_cluster { (h.pport, h.port) } else { (h.port, h.pport) };
        if kind == wire::PING || kind == wire::MEET {
            // The address others reach us at: the local end of a connection they opened.
            if (kind == wire::MEET || self.me().ip.is_empty()) && self.settings.announce_ip.is_empty() {
                let ip = link.local_ip.clone();
                if !ip.is_empty() && self.me().ip != ip {
                    crate::log_notice!("IP address for this node updated to {ip}");
                    self.me_mut().ip = ip;
                    self.todo_save = true;
                }
            }
            if sender.is_none() && kind == wire::MEET {
                let mut n = Node::new(random_name(), HANDSHAKE);
                n.ip = if h.myip.is_empty() { link.peer_ip.clone() } else { h.myip.clone() };
                n.tcp_port = tcp_port;
                n.tls_port = tls_port;
                n.cport = h.cport;
                self.add_node(n);
                self.todo_save = true;
            }
            let pong = self.ping(wire::PONG, offset);
            self.push_send_link(link.token, pong);
        }
        if !link.inbound {
            let lnode = link.node.expect("an outbound link has its node");
            let in_handshake = self.nodes.get(&lnode).is_some_and(|n| n.in_handshake());
            if in_handshake {
                if let Some(s) = sender {
                    // We knew the node under its real name already: the handshake node goes.
                    self.update_address(s, link, h);
                    self.del_node(&lnode);
                    return false;
                }
                // The node's real name, now that it answered.
                crate::log_notice!("Handshake with node {} completed.", name_str(&h.sender));
                if self.nodes.contains_key(&h.sender) || h.sender == [0; NAMELEN] {
                    return false;
                }
                let mut n = self.nodes.remove(&lnode).expect("known");
                n.name = h.sender;
                n.flags &= !HANDSHAKE;
                n.flags |= h.flags & (MASTER | SLAVE);
                self.nodes.insert(h.sender, n);
                link.node = Some(h.sender);
                self.todo_save = true;
            } else if lnode != h.sender {
                crate::log_notice!(
                    "PONG contains mismatching sender ID. About node {} added {} ms ago, having flags {}",
                    self.who(&lnode),
                    now - self.nodes.get(&lnode).map(|n| n.ctime).unwrap_or(now),
                    self.nodes.get(&lnode).map(|n| n.flags).unwrap_or(0)
                );
                if let Some(n) = self.nodes.get_mut(&lnode) {
                    n.flags |= NOADDR;
                    n.ip.clear();
                    n.tcp_port = 0;
                    n.tls_port = 0;
                    n.cport = 0;
                    n.link = None;
                }
                self.todo_save = true;
                return false;
            }
        }
        if let Some(s) = sender {
            let n = self.nodes.get_mut(&s).expect("known");
            n.flags = (n.flags & !NOFAILOVER) | (h.flags & NOFAILOVER);
            if kind == wire::PING && !n.in_handshake() && self.update_address(s, link, h) {
                self.todo_save = true;
                self.todo_update = true;
            }
        }
        if !link.inbound && kind == wire::PONG {
            let lnode = link.node.expect("outbound");
            if let Some(n) = self.nodes.get_mut(&lnode) {
                n.pong_received = now;
                n.ping_sent = 0;
                if n.timed_out() {
                    n.flags &= !PFAIL;
                    self.todo_update = true;
                    self.todo_save = true;
                } else if n.failed() {
                    self.clear_failure_if_needed(&lnode);
                }
            }
        }
        let Some(s) = sender else { return true };
        // Role.
        match h.slaveof {
            None => self.set_node_as_master(&s),
            Some(m) => {
                let n = self.nodes.get_mut(&s).expect("known");
                if n.is_master() {
                    n.flags &= !(MASTER | MIGRATE_TO);
                    n.flags |= SLAVE;
                    self.del_node_slots(&s);
                    self.todo_save = true;
                    self.todo_update = true;
                }
                if self.nodes.contains_key(&m) && self.nodes[&s].slaveof != Some(m) {
                    let shard = self.nodes[&m].shard_id;
                    if let Some(mn) = self.nodes.get_mut(&m) {
                        mn.flags |= MIGRATE_TO;
                    }
                    let n = self.nodes.get_mut(&s).expect("known");
                    n.slaveof = Some(m);
                    n.shard_id = shard;
                    self.todo_save = true;
                }
            }
        }
        // Slots.
        let sender_master = if self.nodes[&s].is_master() { Some(s) } else { self.nodes[&s].slaveof };
        let dirty = sender_master.and_then(|m| self.nodes.get(&m)).is_some_and(|m| m.slots[..] != h.slots[..]);
        if dirty && self.nodes[&s].is_master() {
            let slots = h.slots.clone();
            self.update_slots_with(s, h.config_epoch, &slots, keys_in_slot);
        }
        if dirty {
            for j in 0..SLOTS {
                if !wire::slot_bit(&h.slots, j) {
                    continue;
                }
                let Some(owner) = self.slots[j] else { continue };
                if owner == s || wire::slot_bit(&self.owner_not_claiming, j) {
                    continue;
                }
                let oe = self.nodes.get(&owner).map(|o| o.config_epoch).unwrap_or(0);
                if oe > h.config_epoch {
                    let o = &self.nodes[&owner];
                    let mut slots = o.slots.clone();
                    for (b, nc) in slots.iter_mut().zip(self.owner_not_claiming.iter()) {
                        *b &= !nc;
                    }
                    let upd = Msg {
                        hdr: self.header(wire::UPDATE, 0),
                        body: Body::Update { config_epoch: o.config_epoch, name: owner, slots },
                    };
                    self.push_send(s, upd);
                    break;
                }
            }
        }
        // Two masters with one config epoch: the one with the smaller name moves on.
        let me = self.me();
        if me.is_master()
            && self.nodes[&s].is_master()
            && h.config_epoch == me.config_epoch
            && self.nodes[&s].config_epoch == me.config_epoch
            && s > self.myself
        {
            self.current_epoch = self.current_epoch.wrapping_add(1);
            let e = self.current_epoch;
            self.me_mut().config_epoch = e;
            self.todo_save = true;
            crate::log_notice!("WARNING: configEpoch collision with node {}. configEpoch set to {e}", self.who(&s));
        }
        self.process_gossip(s, gossip);
        self.process_extensions(s, exts);
        true
    }

    /// Binds an inbound link to its node (dropping an older inbound link of that node).
    fn bind_inbound(&mut self, link: &mut LinkView, name: Name) {
        link.node = Some(name);
        if let Some(n) = self.nodes.get_mut(&name) {
            if let Some(old) = n.inbound.replace(link.token) {
                if old != link.token {
                    self.actions.push(Action::CloseLink(old));
                }
            }
        }
    }

    /// The node's address from a message on another link than our own to it; true when it
    /// changed (our link to the old address is closed, a master we follow is followed there).
    fn update_address(&mut self, name: Name, link: &LinkView, h: &Header) -> bool {
        let (tcp_port, tls_port) = if self.settings.tls_cluster { (h.pport, h.port) } else { (h.port, h.pport) };
        let my_master = self.me().slaveof;
        let tls = self.settings.tls_replication;
        let Some(n) = self.nodes.get_mut(&name) else { return false };
        if n.link == Some(link.token) && !link.inbound {
            return false;
        }
        let ip = if h.myip.is_empty() { link.peer_ip.clone() } else { h.myip.clone() };
        if ip.is_empty() || (n.tcp_port == tcp_port && n.tls_port == tls_port && n.cport == h.cport && n.ip == ip) {
            return false;
        }
        n.ip = ip;
        n.tcp_port = tcp_port;
        n.tls_port = tls_port;
        n.cport = h.cport;
        n.flags &= !NOADDR;
        let close = n.link.take();
        crate::log_notice!("Address updated for node {}, now {}:{}", super::who(n), n.ip, n.tcp_port);
        let (host, port) = (n.ip.clone(), if tls { n.tls_port } else { n.tcp_port });
        if let Some(t) = close {
            self.actions.push(Action::CloseLink(t));
        }
        if my_master == Some(name) {
            self.actions.push(Action::Follow { host, port });
        }
        true
    }

    fn process_gossip(&mut self, sender: Name, gossip: &[Gossip]) {
        let sender_master = self.nodes[&sender].is_master();
        let now = now_ms();
        let now_s = now / 1000;
        self.blacklist.retain(|_, until| *until >= now_s);
        for g in gossip {
            let failing = g.flags & (FAIL | PFAIL) != 0;
            let (tcp_port, tls_port) = if self.settings.tls_cluster { (g.pport, g.port) } else { (g.port, g.pport) };
            if self.nodes.contains_key(&g.name) {
                if sender_master && g.name != self.myself {
                    let n = self.nodes.get_mut(&g.name).expect("known");
                    if failing {
                        match n.fail_reports.iter_mut().find(|(r, _)| *r == sender) {
                            Some(r) => r.1 = now,
                            None => {
                                n.fail_reports.push((sender, now));
                                let them = super::who(n);
                                crate::log_verbose!(
                                    "Node {} reported node {them} as not reachable.",
                                    self.who(&sender)
                                );
                            }
                        }
                        self.mark_failing_if_needed(&g.name);
                    } else {
                        let before = n.fail_reports.len();
                        n.fail_reports.retain(|(r, _)| *r != sender);
                        if n.fail_reports.len() != before {
                            let them = super::who(n);
                            crate::log_verbose!("Node {} reported node {them} is back online.", self.who(&sender));
                        }
                    }
                }
                let timeout = self.settings.node_timeout;
                let n = self.nodes.get_mut(&g.name).expect("known");
                n.fail_reports.retain(|(_, t)| now - *t <= timeout * 2);
                if !failing && n.ping_sent == 0 && n.fail_reports.is_empty() {
                    let pong = g.pong_received as i64 * 1000;
                    if pong <= now + 500 && pong > n.pong_received {
                        n.pong_received = pong;
                    }
                }
                if n.flags & (FAIL | PFAIL) != 0
                    && g.flags & (NOADDR | FAIL | PFAIL) == 0
                    && (!n.ip.eq_ignore_ascii_case(&g.ip)
                        || n.tcp_port != tcp_port
                        || n.tls_port != tls_port
                        || n.cport != g.cport)
                {
                    n.ip = g.ip.clone();
                    n.tcp_port = tcp_port;
                    n.tls_port = tls_port;
                    n.cport = g.cport;
                    n.flags &= !NOADDR;
                    if let Some(t) = n.link.take() {
                        self.actions.push(Action::CloseLink(t));
                    }
                }
            } else if g.flags & NOADDR == 0 && !self.blacklist.contains_key(&g.name) && g.name != [0; NAMELEN] {
                let mut n = Node::new(g.name, g.flags & !(MYSELF | MEET | HANDSHAKE));
                n.ip = g.ip.clone();
                n.tcp_port = tcp_port;
                n.tls_port = tls_port;
                n.cport = g.cport;
                self.add_node(n);
                self.todo_save = true;
            }
        }
    }

    fn process_extensions(&mut self, sender: Name, exts: &[Ext]) {
        let (mut host, mut human, mut shard) = (None, None, None);
        for e in exts {
            match e {
                Ext::Hostname(h) => host = Some(String::from_utf8_lossy(h).into_owned()),
                Ext::HumanNodename(h) => human = Some(String::from_utf8_lossy(h).into_owned()),
                Ext::Forgotten { name, ttl } => {
                    let my_master = self.me().slaveof;
                    // (A node cannot make us forget itself: its message is still being read.)
                    if *name != self.myself
                        && *name != sender
                        && self.nodes.contains_key(name)
                        && my_master != Some(*name)
                    {
                        let ttl = i64::try_from(*ttl).unwrap_or(i64::MAX);
                        self.blacklist.insert(*name, (now_ms() / 1000).saturating_add(ttl));
                        self.del_node(name);
                        self.todo_update = true;
                        self.todo_save = true;
                    }
                }
                Ext::ShardId(id) => shard = Some(*id),
            }
        }
        let Some(n) = self.nodes.get(&sender) else { return };
        let master_shard = self.master_of(n).shard_id;
        let my_master = self.me().slaveof;
        let Some(n) = self.nodes.get_mut(&sender) else { return };
        n.hostname = host.unwrap_or_default();
        n.human_nodename = human.unwrap_or_default();
        let id = shard.unwrap_or(master_shard);
        if n.shard_id != id {
            n.shard_id = id;
            self.todo_save = true;
        }
        if my_master == Some(sender) && self.me().shard_id != id {
            self.me_mut().shard_id = id;
            self.todo_save = true;
        }
    }

    /// A replica asks for this master's vote (Redis's `clusterSendFailoverAuthIfNeeded`).
    fn vote_if_needed(&mut self, requester: Name, req: &Header) {
        let me = self.me();
        if me.is_slave() || me.numslots == 0 {
            return;
        }
        if req.current_epoch < self.current_epoch || self.last_vote_epoch == self.current_epoch {
            return;
        }
        let r = &self.nodes[&requester];
        let Some(master) = r.slaveof.filter(|_| r.is_slave()) else { return };
        let force = req.mflags[0] & wire::MF_FORCEACK != 0;
        let Some(m) = self.nodes.get(&master) else { return };
        if !m.failed() && !force {
            return;
        }
        let now = now_ms();
        if now - m.voted_time < self.settings.node_timeout * 2 {
            return;
        }
        for j in 0..SLOTS {
            if !wire::slot_bit(&req.slots, j) {
                continue;
            }
            let Some(owner) = self.slots[j] else { continue };
            if wire::slot_bit(&self.owner_not_claiming, j) {
                continue;
            }
            if self.nodes.get(&owner).is_some_and(|o| o.config_epoch > req.config_epoch) {
                return;
            }
        }
        self.last_vote_epoch = self.current_epoch;
        self.nodes.get_mut(&master).expect("known").voted_time = now;
        self.todo_save = true;
        crate::log_notice!("Failover auth granted to {} for epoch {}", self.who(&requester), self.current_epoch);
        let ack = Msg { hdr: self.header(wire::AUTH_ACK, 0), body: Body::Empty };
        self.push_send(requester, ack);
    }
}

impl State {
    pub fn reset_manual_failover(&mut self) {
        if self.mf_slave.take().is_some() {
            self.actions.push(Action::PauseWrites(0));
        }
        self.mf_end = 0;
        self.mf_can_start = false;
        self.mf_master_offset = -1;
    }

    /// A replica takes its master's place: it becomes a master serving every slot the old
    /// master served, and tells everyone (Redis's `clusterFailoverReplaceYourMaster`).
    pub fn replace_my_master(&mut self, offset: u64) {
        let me = self.myself;
        let Some(old) = self.me().slaveof else { return };
        if self.me().is_master() {
            return;
        }
        self.set_node_as_master(&me);
        self.me_mut().flags &= !MIGRATE_TO;
        self.actions.push(Action::BecomeMaster);
        for j in 0..SLOTS {
            if self.slots[j] == Some(old) {
                self.del_slot(j);
                self.add_slot(j, me);
            }
        }
        self.update_state();
        self.todo_save = true;
        let pong = self.ping(wire::PONG, offset);
        self.broadcast(pong);
        self.reset_manual_failover();
    }

    /// This replica's rank among its master's replicas: how many have a greater offset.
    fn replica_rank(&self, my_offset: u64) -> usize {
        let Some(m) = self.me().slaveof else { return 0 };
        self.replicas_of(&m)
            .into_iter()
            .filter(|r| r.name != self.myself && r.flags & NOFAILOVER == 0 && r.repl_offset > my_offset)
            .count()
    }

    /// Redis's `clusterHandleSlaveFailover`: a replica of a failed master waits its turn
    /// (500 ms + up to 500 ms + 1 s per better replica), asks the masters for votes, and
    /// takes over with a majority. `data_age_ms`: time since the master was last heard from.
    pub fn handle_replica_failover(&mut self, offset: u64, data_age_ms: i64, repl_ping_period_s: i64) {
        let now = now_ms();
        let timeout = self.settings.node_timeout;
        let manual = self.mf_end != 0 && self.mf_can_start;
        let auth_timeout = (timeout * 2).max(2000);
        let retry = auth_timeout * 2;
        let me = self.me();
        let Some(m) = me.slaveof.filter(|_| me.is_slave()) else { return };
        let Some(master) = self.nodes.get(&m) else { return };
        let wanted = manual || (master.failed() && !self.settings.replica_no_failover);
        if !wanted || master.numslots == 0 {
            return;
        }
        let mut age = data_age_ms;
        if age > timeout {
            age -= timeout;
        }
        let factor = self.settings.replica_validity_factor;
        if factor != 0 && age > repl_ping_period_s * 1000 + timeout * factor && !manual {
            self.log_cant_failover("Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option.");
            return;
        }
        let auth_age = now - self.failover_auth_time;
        if auth_age > retry {
            self.failover_auth_time = now + 500 + rand::random::<i64>().rem_euclid(500);
            self.failover_auth_count = 0;
            self.failover_auth_sent = false;
            self.failover_auth_rank = self.replica_rank(offset);
            self.failover_auth_time += self.failover_auth_rank as i64 * 1000;
            if self.mf_end != 0 {
                self.failover_auth_time = now;
                self.failover_auth_rank = 0;
            }
            crate::log_notice!(
                "Start of election delayed for {} milliseconds (rank #{}, offset {offset}).",
                self.failover_auth_time - now,
                self.failover_auth_rank
            );
            let pong = self.ping(wire::PONG, offset);
            let local: Vec<Name> = self.replicas_of(&m).iter().map(|r| r.name).filter(|n| *n != self.myself).collect();
            for r in local {
                if self.nodes[&r].link.is_some() {
                    self.push_send(r, pong.clone());
                }
            }
            return;
        }
        if !self.failover_auth_sent && !manual {
            let rank = self.replica_rank(offset);
            if rank > self.failover_auth_rank {
                let delay = (rank - self.failover_auth_rank) as i64 * 1000;
                self.failover_auth_time += delay;
                self.failover_auth_rank = rank;
                crate::log_notice!("Replica rank updated to #{rank}, added {delay} milliseconds of delay.");
            }
        }
        if now < self.failover_auth_time {
            self.log_cant_failover("Waiting for the failover start time");
            return;
        }
        if auth_age > auth_timeout {
            self.log_cant_failover("Failover attempt expired.");
            return;
        }
        if !self.failover_auth_sent {
            self.current_epoch = self.current_epoch.wrapping_add(1);
            self.failover_auth_epoch = self.current_epoch;
            crate::log_notice!("Starting a failover election for epoch {}.", self.current_epoch);
            let mut hdr = self.header(wire::AUTH_REQUEST, offset);
            if self.mf_end != 0 {
                hdr.mflags[0] |= wire::MF_FORCEACK;
            }
            self.broadcast(Msg { hdr, body: Body::Empty });
            self.failover_auth_sent = true;
            self.todo_save = true;
            self.todo_update = true;
            return;
        }
        let needed = self.size / 2 + 1;
        if self.failover_auth_count >= needed {
            crate::log_notice!("Failover election won: I'm the new master.");
            if self.me().config_epoch < self.failover_auth_epoch {
                let e = self.failover_auth_epoch;
                self.me_mut().config_epoch = e;
                crate::log_notice!("configEpoch set to {e} after successful failover");
            }
            self.replace_my_master(offset);
        } else {
            self.log_cant_failover("Waiting for votes, but majority still not reached.");
        }
    }

    fn log_cant_failover(&mut self, why: &str) {
        let now = now_ms();
        if now - self.cant_failover_logged > 10_000 {
            self.cant_failover_logged = now;
            crate::log_notice!("Currently unable to failover: {why}");
        }
    }

    /// Redis's manual failover step on the replica: voting may start once this replica has
    /// applied everything the paused master had.
    pub fn handle_manual_failover(&mut self, offset: u64) {
        if self.mf_end == 0 || self.mf_can_start || self.mf_master_offset == -1 {
            return;
        }
        if self.mf_master_offset as u64 == offset {
            self.mf_can_start = true;
            crate::log_notice!("All master replication stream processed, manual failover can start.");
        }
    }

    /// The bus's periodic work (Redis's `clusterCron`, every 100 ms): handshakes that took
    /// too long go, a random node is pinged each second, nodes not pinged for half the node
    /// timeout are, and nodes silent past the timeout are flagged PFAIL. Returns the nodes a
    /// link must be opened to.
    pub fn cron(&mut self, iteration: u64, offset: u64) -> Vec<Name> {
        let now = now_ms();
        let timeout = self.settings.node_timeout;
        let handshake_timeout = timeout.max(1000);
        let mut connect = Vec::new();
        let names: Vec<Name> = self.nodes.keys().copied().collect();
        for name in &names {
            let n = &self.nodes[name];
            if n.flags & (MYSELF | NOADDR) != 0 {
                continue;
            }
            if n.in_handshake() && now - n.ctime > handshake_timeout {
                self.del_node(name);
                continue;
            }
            if n.link.is_none() {
                connect.push(*name);
            }
        }
        if iteration.is_multiple_of(10) {
            let mut rng = rand::thread_rng();
            let pick = self
                .nodes
                .values()
                .filter(|n| n.link.is_some() && n.ping_sent == 0 && n.flags & (MYSELF | HANDSHAKE) == 0)
                .choose_multiple(&mut rng, 5)
                .into_iter()
                .min_by_key(|n| n.pong_received)
                .map(|n| n.name);
            if let Some(p) = pick {
                self.send_ping(p, offset);
            }
        }
        let mut update = false;
        let me_master = self.me().is_master();
        for name in &names {
            let Some(n) = self.nodes.get(name) else { continue };
            if n.flags & (MYSELF | NOADDR | HANDSHAKE) != 0 {
                continue;
            }
            if let Some(t) = n.link {
                if now - n.link_ctime > timeout
                    && n.ping_sent != 0
                    && now - n.ping_sent > timeout / 2
                    && now - n.data_received > timeout / 2
                {
                    self.actions.push(Action::CloseLink(t));
                    self.nodes.get_mut(name).expect("known").link = None;
                    continue;
                }
            }
            let n = &self.nodes[name];
            let interval = if self.settings.ping_interval > 0 { self.settings.ping_interval } else { timeout / 2 };
            if n.link.is_some() && n.ping_sent == 0 && now - n.pong_received > interval {
                self.send_ping(*name, offset);
                continue;
            }
            if me_master && self.mf_end != 0 && self.mf_slave == Some(*name) && n.link.is_some() {
                self.send_ping(*name, offset);
                continue;
            }
            if n.ping_sent == 0 {
                continue;
            }
            let delay = (now - n.ping_sent).min(now - n.data_received);
            if delay > timeout && n.flags & (PFAIL | FAIL) == 0 {
                crate::log_notice!("*** NODE {} possibly failing", name_str(name));
                self.nodes.get_mut(name).expect("known").flags |= PFAIL;
                update = true;
                if me_master && self.size == 1 {
                    self.mark_failing_if_needed(name);
                }
            }
        }
        if self.me().is_slave() && self.settings.allow_replica_migration {
            self.migrate_replica_if_needed(now);
        }
        if self.mf_end != 0 && self.mf_end < now {
            crate::log_notice!("Manual failover timed out.");
            self.reset_manual_failover();
        }
        if update || !self.ok || self.todo_update {
            self.todo_update = false;
            self.update_state();
        }
        connect
    }
}

impl State {
    /// PUBLISH reaches every node's subscribers; SPUBLISH the other nodes of this shard.
    pub fn propagate_publish(&mut self, channel: &[u8], message: &[u8], shard: bool) {
        let kind = if shard { wire::PUBLISHSHARD } else { wire::PUBLISH };
        let msg = Msg {
            hdr: self.header(kind, 0),
            body: Body::Publish { channel: channel.to_vec(), message: message.to_vec() },
        };
        if !shard {
            return self.broadcast(msg);
        }
        let my_shard = self.me().shard_id;
        let targets: Vec<Name> = self
            .nodes
            .values()
            .filter(|n| n.name != self.myself && n.shard_id == my_shard && n.link.is_some() && !n.in_handshake())
            .map(|n| n.name)
            .collect();
        for t in targets {
            self.push_send(t, msg.clone());
        }
    }
}

impl State {
    fn ok_replicas(&self, master: &Name) -> usize {
        self.nodes.values().filter(|r| r.is_slave() && r.slaveof.as_ref() == Some(master) && !r.failed()).count()
    }

    /// Replica migration (Redis's `clusterHandleSlaveMigration`): when a master that had
    /// replicas is left with none, the replica with the smallest ID among those of the
    /// masters with the most replicas moves to it — if its own master keeps more than
    /// `cluster-migration-barrier` working replicas — after the orphan waited 5 s.
    fn migrate_replica_if_needed(&mut self, now: i64) {
        let Some(my_master) = self.me().slaveof else { return };
        let mut orphaned = 0;
        let mut max_replicas = 0;
        let mut mine = 0;
        for n in self.nodes.values() {
            if n.is_master() && !n.failed() && n.flags & (NOADDR | HANDSHAKE) == 0 {
                let ok = self.ok_replicas(&n.name);
                if ok == 0 && n.numslots > 0 && n.flags & MIGRATE_TO != 0 {
                    orphaned += 1;
                }
                max_replicas = max_replicas.max(ok);
                if n.name == my_master {
                    mine = ok;
                }
            }
        }
        if orphaned == 0 || max_replicas < 2 || mine != max_replicas || !self.ok {
            return;
        }
        if (self.ok_replicas(&my_master) as i64) <= self.settings.migration_barrier {
            return;
        }
        let mut candidate = self.myself;
        let mut target = None;
        let names: Vec<Name> = self.nodes.keys().copied().collect();
        for name in names {
            let n = &self.nodes[&name];
            let ok = if n.is_master() { self.ok_replicas(&name) } else { 0 };
            let is_orphaned = n.is_master() && !n.failed() && n.flags & MIGRATE_TO != 0 && ok == 0;
            if n.is_master() && ok == max_replicas {
                for r in self.replicas_of(&name) {
                    if r.name < candidate {
                        candidate = r.name;
                    }
                }
            }
            let slots = n.numslots;
            let n = self.nodes.get_mut(&name).expect("known");
            if is_orphaned {
                if target.is_none() && slots > 0 {
                    target = Some(name);
                }
                if n.orphaned_time == 0 {
                    n.orphaned_time = now;
                }
            } else {
                n.orphaned_time = 0;
            }
        }
        if let Some(t) = target {
            if candidate == self.myself && now - self.nodes[&t].orphaned_time > 5000 {
                crate::log_notice!("Migrating to orphaned master {}", name_str(&t));
                self.set_my_master(t);
            }
        }
    }
}
