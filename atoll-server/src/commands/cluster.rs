//! CLUSTER and its subcommands, ASKING, READONLY/READWRITE in cluster mode (Redis 7.2's
//! `clusterCommand`). The view they read and change is `services::cluster`; messages they
//! cause (a MEET, a PONG after an epoch bump) go out through the bus thread.

use crate::exec::*;
use crate::services::cluster::{self as cl, gossip::Action, name_str, wire, State, SLAVE};

const DISABLED: &str = "ERR This instance has cluster support disabled";

fn with_state<R>(ctx: &Ctx, f: impl FnOnce(&mut State) -> R) -> Result<R, CmdError> {
    ctx.srv.cluster.with(f).ok_or_else(|| CmdError::msg(DISABLED))
}

/// The state for a subcommand that only reads it (no routes republished).
fn read_state<R>(ctx: &Ctx, f: impl FnOnce(&mut State) -> R) -> Result<R, CmdError> {
    ctx.srv.cluster.read(f).ok_or_else(|| CmdError::msg(DISABLED))
}

/// Refuses every cluster command outside cluster mode, as Redis does (HELP included).
fn enabled(ctx: &Ctx) -> CmdResult {
    if ctx.srv.cluster.enabled {
        Ok(())
    } else {
        Err(CmdError::msg(DISABLED))
    }
}

/// The master a SETSLOT names (MIGRATING/IMPORTING's refusals).
fn target_master(st: &State, id: &[u8]) -> Result<wire::Name, CmdError> {
    let n = lookup(st, id)
        .ok_or_else(|| CmdError::msg(format!("ERR I don't know about node {}", String::from_utf8_lossy(id))))?;
    if st.nodes[&n].is_slave() {
        return Err(CmdError::msg("ERR Target node is not a master"));
    }
    Ok(n)
}

fn tls_client(ctx: &Ctx) -> bool {
    let tls = ctx.srv.config.int(crate::config::p::TLS_PORT);
    ctx.client.handle.came_in_on(tls)
}

fn slot_arg(a: &[u8]) -> Result<usize, CmdError> {
    match std::str::from_utf8(a).ok().and_then(|s| s.parse::<i64>().ok()) {
        Some(s) if (0..wire::SLOTS as i64).contains(&s) => Ok(s as usize),
        _ => Err(CmdError::msg("ERR Invalid or out of range slot")),
    }
}

fn unknown_node(id: &[u8]) -> CmdError {
    CmdError::msg(format!("ERR Unknown node {}", String::from_utf8_lossy(id)))
}

/// A node named by a client: 40 characters of [a-z0-9] that this node knows.
fn lookup(st: &State, id: &[u8]) -> Option<wire::Name> {
    let ok = id.len() == wire::NAMELEN && id.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let n = cl::parse_name(id).filter(|_| ok)?;
    st.nodes.contains_key(&n).then_some(n)
}

fn offset(ctx: &Ctx) -> u64 {
    ctx.srv.repl.cluster_offset()
}

pub fn help(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    help_reply(
        ctx,
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Assign slots to current node.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Assign slots which are between <start-slot> and <end-slot> to current node.",
            "BUMPEPOCH",
            "    Advance the cluster config epoch.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Return number of failure reports for <node-id>.",
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Delete slots information from current node.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Promote current replica node to being a master.",
            "FORGET <node-id>",
            "    Remove a node from the cluster.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "FLUSHSLOTS",
            "    Delete current node own slots information.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MEET <ip> <port> [<bus-port>]",
            "    Connect nodes into a working cluster.",
            "MYID",
            "    Return the node id.",
            "MYSHARDID",
            "    Return the node's shard id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICATE <node-id>",
            "    Configure current node as replica to <node-id>.",
            "RESET [HARD|SOFT]",
            "    Reset current node (default: soft).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Set config epoch of current node.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Set slot state.",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SAVECONFIG",
            "    Force saving cluster configuration on disk.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "LINKS",
            "    Return information about all network links between this node and its peers.",
            "    Output format is an array where each array element is a map containing attributes of a link",
        ],
    );
    Ok(())
}

pub fn info(ctx: &mut Ctx) -> CmdResult {
    let text = read_state(ctx, |st| st.info_text())?;
    ctx.reply.verbatim("txt", text.as_bytes());
    Ok(())
}

pub fn nodes(ctx: &mut Ctx) -> CmdResult {
    let tls = tls_client(ctx);
    let text = read_state(ctx, |st| st.nodes_text(tls))?;
    ctx.reply.verbatim("txt", text.as_bytes());
    Ok(())
}

pub fn myid(ctx: &mut Ctx) -> CmdResult {
    let id = read_state(ctx, |st| st.myself)?;
    ctx.reply.bulk(&id);
    Ok(())
}

pub fn myshardid(ctx: &mut Ctx) -> CmdResult {
    let id = read_state(ctx, |st| st.me().shard_id)?;
    ctx.reply.bulk(&id);
    Ok(())
}

pub fn keyslot(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    ctx.reply.int(crate::engine::slot::key_slot(ctx.args[2]) as i64);
    Ok(())
}

/// Up to `limit` keys of `slot` in database 0, as Redis's slot-to-keys index lists them
/// (keys whose TTL passed but that were not deleted yet included). The shard holds sixteen
/// slots: its walk skips the others and stops once the slot's count is reached. The commands
/// that call this have the `Walk` scope: in a transaction or a script the whole database is
/// held, so the shard is; alone they take the one shard briefly.
fn keys_in_slot(ctx: &mut Ctx, slot: usize, limit: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if ctx.srv.ks.db_if_exists(0).is_none() {
        return out;
    }
    ctx.ks.locks.with_shard(0, slot & (crate::engine::slot::SHARDS - 1), |s| {
        let want = s.keys.count_in_slot(slot).min(limit);
        if want == 0 {
            return;
        }
        s.keys.slot_keys_while(slot, |k| {
            out.push(k.to_vec());
            out.len() < want
        });
    });
    out
}

/// How many keys `slot` holds in database 0 (its count, kept as keys come and go).
fn count_in_slot(ctx: &mut Ctx, slot: usize) -> usize {
    if ctx.srv.ks.db_if_exists(0).is_none() {
        return 0;
    }
    ctx.ks.locks.with_shard(0, slot & (crate::engine::slot::SHARDS - 1), |s| s.keys.count_in_slot(slot))
}

pub fn countkeysinslot(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let slot = ctx.arg_i64(2)?;
    if !(0..wire::SLOTS as i64).contains(&slot) {
        return Err(CmdError::msg("ERR Invalid slot"));
    }
    let n = count_in_slot(ctx, slot as usize);
    ctx.reply.int(n as i64);
    Ok(())
}

pub fn getkeysinslot(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let slot = ctx.arg_i64(2)?;
    let count = ctx.arg_i64(3)?;
    if !(0..wire::SLOTS as i64).contains(&slot) || count < 0 {
        return Err(CmdError::msg("ERR Invalid slot or number of keys"));
    }
    let keys = keys_in_slot(ctx, slot as usize, count as usize);
    ctx.reply.array(keys.len());
    for k in keys {
        ctx.reply.bulk(&k);
    }
    Ok(())
}

pub fn meet(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    if ctx.args.len() > 5 {
        return Err(subcommand_syntax(ctx));
    }
    let port = std::str::from_utf8(ctx.args[3]).ok().and_then(|s| s.parse::<i64>().ok()).ok_or_else(|| {
        CmdError::msg(format!("ERR Invalid base port specified: {}", String::from_utf8_lossy(ctx.args[3])))
    })?;
    let cport = match ctx.args.get(4) {
        Some(a) => std::str::from_utf8(a)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| CmdError::msg(format!("ERR Invalid bus port specified: {}", String::from_utf8_lossy(a))))?,
        None => port + 10000,
    };
    let ip = String::from_utf8_lossy(ctx.args[2]).into_owned();
    let valid = (1..=65535).contains(&port) && (1..=65535).contains(&cport);
    let ok = valid && with_state(ctx, |st| st.start_handshake(&ip, port as u16, cport as u16))?;
    if !ok {
        return Err(CmdError::msg(format!(
            "ERR Invalid node address specified: {ip}:{}",
            String::from_utf8_lossy(ctx.args[3])
        )));
    }
    ctx.reply.ok();
    Ok(())
}

fn subcommand_syntax(ctx: &Ctx) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
        String::from_utf8_lossy(&ctx.args[1][..ctx.args[1].len().min(128)])
    ))
}

pub fn flushslots(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    if ctx.ks.locks.dbsize(0) != 0 {
        return Err(CmdError::msg("ERR DB must be empty to perform CLUSTER FLUSHSLOTS."));
    }
    with_state(ctx, |st| {
        let me = st.myself;
        st.del_node_slots(&me);
        st.todo_update = true;
        st.todo_save = true;
    })?;
    ctx.reply.ok();
    Ok(())
}

/// ADDSLOTS/DELSLOTS and their RANGE forms: all the slots are checked before any changes.
fn change_slots(ctx: &mut Ctx, del: bool, ranges: bool) -> CmdResult {
    enabled(ctx)?;
    let mut pairs = Vec::new();
    if ranges {
        if ctx.args.len() % 2 == 1 {
            return Err(CmdError::Arity(format!("cluster|{}", if del { "delslotsrange" } else { "addslotsrange" })));
        }
        for p in ctx.args[2..].chunks(2) {
            let (a, b) = (slot_arg(p[0])?, slot_arg(p[1])?);
            if a > b {
                return Err(CmdError::msg(format!("ERR start slot number {a} is greater than end slot number {b}")));
            }
            pairs.push((a, b));
        }
    } else {
        for a in &ctx.args[2..] {
            let s = slot_arg(a)?;
            pairs.push((s, s));
        }
    }
    with_state(ctx, |st| {
        let mut seen = vec![false; wire::SLOTS];
        for &(a, b) in &pairs {
            for (s, seen) in seen.iter_mut().enumerate().take(b + 1).skip(a) {
                if del && st.slots[s].is_none() {
                    return Err(CmdError::msg(format!("ERR Slot {s} is already unassigned")));
                }
                if !del && st.slots[s].is_some() {
                    return Err(CmdError::msg(format!("ERR Slot {s} is already busy")));
                }
                if std::mem::replace(seen, true) {
                    return Err(CmdError::msg(format!("ERR Slot {s} specified multiple times")));
                }
            }
        }
        let me = st.myself;
        for (s, _) in seen.iter().enumerate().filter(|(_, on)| **on) {
            st.importing.remove(&s);
            if del {
                st.del_slot(s);
            } else {
                st.add_slot(s, me);
            }
        }
        st.todo_update = true;
        st.todo_save = true;
        Ok(())
    })??;
    ctx.reply.ok();
    Ok(())
}

pub fn addslots(ctx: &mut Ctx) -> CmdResult {
    change_slots(ctx, false, false)
}
pub fn delslots(ctx: &mut Ctx) -> CmdResult {
    change_slots(ctx, true, false)
}
pub fn addslotsrange(ctx: &mut Ctx) -> CmdResult {
    change_slots(ctx, false, true)
}
pub fn delslotsrange(ctx: &mut Ctx) -> CmdResult {
    change_slots(ctx, true, true)
}

pub fn setslot(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    if with_state(ctx, |st| st.me().is_slave())? {
        return Err(CmdError::msg("ERR Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(ctx.args[2])?;
    let action = ctx.args[3].to_ascii_lowercase();
    let argc = ctx.args.len();
    let invalid = || CmdError::msg("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP");
    let id = ctx.args.get(4).copied().unwrap_or(b"");
    // The slot's keys, counted before the state's lock (NODE refuses to give away a slot
    // that still has keys here).
    let has_keys = action == b"node" && !keys_in_slot(ctx, slot, 1).is_empty();
    let off = offset(ctx);
    with_state(ctx, |st| {
        let me = st.myself;
        match (action.as_slice(), argc) {
            (b"migrating", 5) => {
                if st.slots[slot] != Some(me) {
                    return Err(CmdError::msg(format!("ERR I'm not the owner of hash slot {slot}")));
                }
                let n = target_master(st, id)?;
                st.migrating.insert(slot, n);
            }
            (b"importing", 5) => {
                if st.slots[slot] == Some(me) {
                    return Err(CmdError::msg(format!("ERR I'm already the owner of hash slot {slot}")));
                }
                let n = target_master(st, id)?;
                st.importing.insert(slot, n);
            }
            (b"stable", 4) => {
                st.importing.remove(&slot);
                st.migrating.remove(&slot);
            }
            (b"node", 5) => {
                let n = lookup(st, id).ok_or_else(|| unknown_node(id))?;
                if st.nodes[&n].is_slave() {
                    return Err(CmdError::msg("ERR Target node is not a master"));
                }
                if st.slots[slot] == Some(me) && n != me && has_keys {
                    return Err(CmdError::msg(format!(
                        "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                    )));
                }
                if !has_keys {
                    st.migrating.remove(&slot);
                }
                let was_mine = st.slots[slot] == Some(me);
                st.del_slot(slot);
                st.add_slot(slot, n);
                if was_mine && n != me && st.me().numslots == 0 && st.settings.allow_replica_migration {
                    crate::log_notice!(
                        "Configuration change detected. Reconfiguring myself as a replica of {}",
                        st.who(&n)
                    );
                    st.set_my_master(n);
                }
                if n == me && st.importing.remove(&slot).is_some() {
                    if st.bump_epoch_without_consensus() {
                        crate::log_notice!("configEpoch updated after importing slot {slot}");
                    }
                    let pong = st.ping(wire::PONG, off);
                    st.broadcast(pong);
                }
            }
            _ => return Err(invalid()),
        }
        st.todo_save = true;
        st.todo_update = true;
        Ok(())
    })??;
    ctx.reply.ok();
    Ok(())
}

pub fn bumpepoch(ctx: &mut Ctx) -> CmdResult {
    let (bumped, e) = with_state(ctx, |st| {
        let b = st.bump_epoch_without_consensus();
        (b, st.me().config_epoch)
    })?;
    ctx.reply.simple(&format!("{} {e}", if bumped { "BUMPED" } else { "STILL" }));
    Ok(())
}

pub fn saveconfig(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let path = ctx.srv.cluster.conf_path.get().cloned().unwrap_or_default();
    // Rendered under the view's lock, written (and fsynced) after it.
    let text = ctx.srv.cluster.peek(|st| cl::conf::render(st)).ok_or_else(|| CmdError::msg(DISABLED))?;
    cl::conf::write(&text, &path, true).map_err(|e| {
        CmdError::msg(format!("ERR error saving the cluster node config: {}", crate::log::strerror(&e)))
    })?;
    ctx.reply.ok();
    Ok(())
}

pub fn forget(ctx: &mut Ctx) -> CmdResult {
    let id = ctx.args[2];
    with_state(ctx, |st| {
        let Some(n) = lookup(st, id) else {
            let known = cl::parse_name(id).is_some_and(|n| st.blacklist.contains_key(&n));
            return if known { Ok(()) } else { Err(unknown_node(id)) };
        };
        if n == st.myself {
            return Err(CmdError::msg("ERR I tried hard but I can't forget myself..."));
        }
        if st.me().is_slave() && st.me().slaveof == Some(n) {
            return Err(CmdError::msg("ERR Can't forget my master!"));
        }
        st.blacklist.insert(n, cl::now_ms() / 1000 + 60);
        st.del_node(&n);
        for r in st.nodes.values_mut() {
            if r.slaveof == Some(n) {
                r.slaveof = None;
            }
        }
        st.todo_update = true;
        st.todo_save = true;
        Ok(())
    })??;
    ctx.reply.ok();
    Ok(())
}

pub fn replicate(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let id = ctx.args[2];
    let empty = ctx.ks.locks.dbsize(0) == 0;
    with_state(ctx, |st| {
        let n = lookup(st, id).ok_or_else(|| unknown_node(id))?;
        if n == st.myself {
            return Err(CmdError::msg("ERR Can't replicate myself"));
        }
        if st.nodes[&n].is_slave() {
            return Err(CmdError::msg("ERR I can only replicate a master, not a replica."));
        }
        if st.me().is_master() && (st.me().numslots != 0 || !empty) {
            return Err(CmdError::msg("ERR To set a master the node must be empty and without assigned slots."));
        }
        st.set_my_master(n);
        Ok(())
    })??;
    ctx.reply.ok();
    Ok(())
}

pub fn replicas(ctx: &mut Ctx) -> CmdResult {
    let id = ctx.args[2];
    let tls = tls_client(ctx);
    let lines = read_state(ctx, |st| {
        let n = lookup(st, id).ok_or_else(|| unknown_node(id))?;
        if st.nodes[&n].is_slave() {
            return Err(CmdError::msg("ERR The specified node is not a master"));
        }
        Ok(st.replicas_of(&n).into_iter().map(|r| st.describe(r, false, tls)).collect::<Vec<_>>())
    })??;
    ctx.reply.array(lines.len());
    for l in lines {
        ctx.reply.bulk(l.as_bytes());
    }
    Ok(())
}

pub fn count_failure_reports(ctx: &mut Ctx) -> CmdResult {
    let id = ctx.args[2];
    let n = read_state(ctx, |st| {
        let n = lookup(st, id).ok_or_else(|| unknown_node(id))?;
        let timeout = st.settings.node_timeout;
        let now = cl::now_ms();
        let node = st.nodes.get_mut(&n).expect("known");
        node.fail_reports.retain(|(_, t)| now - *t <= timeout * 2);
        Ok(node.fail_reports.len())
    })??;
    ctx.reply.int(n as i64);
    Ok(())
}

pub fn set_config_epoch(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let epoch = ctx.arg_i64(2)?;
    if epoch < 0 {
        return Err(CmdError::msg(format!("ERR Invalid config epoch specified: {epoch}")));
    }
    with_state(ctx, |st| {
        if st.nodes.len() > 1 {
            return Err(CmdError::msg(
                "ERR The user can assign a config epoch only when the node does not know any other node.",
            ));
        }
        if st.me().config_epoch != 0 {
            return Err(CmdError::msg("ERR Node config epoch is already non-zero"));
        }
        st.me_mut().config_epoch = epoch as u64;
        crate::log_notice!("configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH");
        st.current_epoch = st.current_epoch.max(epoch as u64);
        st.todo_update = true;
        st.todo_save = true;
        Ok(())
    })??;
    ctx.reply.ok();
    Ok(())
}

pub fn reset(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let hard = match ctx.args.get(2).map(|a| a.to_ascii_lowercase()) {
        None => false,
        Some(a) if a == b"hard" => true,
        Some(a) if a == b"soft" => false,
        Some(_) => return Err(CmdError::Syntax),
    };
    if ctx.args.len() > 3 {
        return Err(subcommand_syntax(ctx));
    }
    let slave = with_state(ctx, |st| st.me().is_slave())?;
    if !slave && ctx.ks.locks.dbsize(0) != 0 {
        return Err(CmdError::msg("ERR CLUSTER RESET can't be called with master nodes containing keys"));
    }
    with_state(ctx, |st| {
        if st.me().is_slave() {
            let me = st.myself;
            st.set_node_as_master(&me);
            st.me_mut().flags &= !cl::MIGRATE_TO;
            st.actions.push(Action::BecomeMaster);
            st.actions.push(Action::DeleteSlots((0..wire::SLOTS).collect()));
        }
        st.migrating.clear();
        st.importing.clear();
        st.mf_end = 0;
        for s in 0..wire::SLOTS {
            st.del_slot(s);
        }
        let others: Vec<wire::Name> = st.nodes.keys().filter(|n| **n != st.myself).copied().collect();
        for n in others {
            st.del_node(&n);
        }
        st.blacklist.clear();
        if hard {
            st.current_epoch = 0;
            st.last_vote_epoch = 0;
            let mut me = st.nodes.remove(&st.myself).expect("myself");
            me.config_epoch = 0;
            me.name = cl::random_name();
            me.shard_id = cl::random_name();
            st.myself = me.name;
            crate::log_notice!("Node hard reset, now I'm {}", name_str(&me.name));
            st.nodes.insert(me.name, me);
        }
        st.todo_save = true;
        st.todo_update = true;
    })?;
    ctx.reply.ok();
    Ok(())
}

pub fn failover(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    if ctx.args.len() > 3 {
        return Err(subcommand_syntax(ctx));
    }
    let (force, takeover) = match ctx.args.get(2).map(|a| a.to_ascii_lowercase()) {
        None => (false, false),
        Some(a) if a == b"force" => (true, false),
        Some(a) if a == b"takeover" => (true, true),
        Some(_) => return Err(CmdError::Syntax),
    };
    let off = offset(ctx);
    with_state(ctx, |st| {
        let me = st.me();
        if me.is_master() {
            return Err(CmdError::msg("ERR You should send CLUSTER FAILOVER to a replica"));
        }
        let Some(m) = me.slaveof.filter(|m| st.nodes.contains_key(m)) else {
            return Err(CmdError::msg("ERR I'm a replica but my master is unknown to me"));
        };
        let master = &st.nodes[&m];
        if !force && (master.failed() || master.link.is_none()) {
            return Err(CmdError::msg("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE"));
        }
        st.reset_manual_failover();
        st.mf_end = cl::now_ms() + 5000;
        if takeover {
            crate::log_notice!("Taking over the master (user request).");
            st.bump_epoch_without_consensus();
            st.replace_my_master(off);
        } else if force {
            crate::log_notice!("Forced failover user request accepted.");
            st.mf_can_start = true;
        } else {
            crate::log_notice!("Manual failover user request accepted.");
            let h = st.header(wire::MFSTART, off);
            st.sent[wire::MFSTART as usize] += 1;
            st.actions.push(Action::Send(m, wire::Msg { hdr: h, body: wire::Body::Empty }));
        }
        Ok(())
    })??;
    ctx.reply.ok();
    Ok(())
}

/// DEBUG CLUSTERLINK KILL <to|from|all> <node-id>: the bus thread closes the link(s); the
/// cron connects again as after any lost link.
pub fn kill_link(ctx: &mut Ctx) -> CmdResult {
    if !ctx.srv.cluster.enabled {
        return Err(CmdError::msg("ERR Debug option only available for cluster mode enabled setup!"));
    }
    let (dir, id) = (ctx.args[3], ctx.args[4]);
    with_state(ctx, |st| {
        let n = cl::parse_name(id).and_then(|n| st.nodes.get(&n)).ok_or_else(|| unknown_node(id))?;
        let (to, from) = (n.link, n.inbound);
        let doomed = match () {
            _ if dir.eq_ignore_ascii_case(b"to") => [to, None],
            _ if dir.eq_ignore_ascii_case(b"from") => [None, from],
            _ if dir.eq_ignore_ascii_case(b"all") => [to, from],
            // Redis writes this error and then +OK as well (two replies to one command):
            // only the error is kept here.
            _ => return Err(CmdError::msg(format!("ERR Unknown direction {}", String::from_utf8_lossy(dir)))),
        };
        st.actions.extend(doomed.into_iter().flatten().map(Action::CloseLink));
        Ok(())
    })??;
    ctx.reply.ok();
    Ok(())
}

pub fn links(ctx: &mut Ctx) -> CmdResult {
    let links = read_state(ctx, |st| {
        let mut v = Vec::new();
        for n in st.ordered_nodes() {
            let io = |t: usize| st.link_io.get(&t).copied().unwrap_or((0, ""));
            if let Some(t) = n.link {
                v.push(("to", n.name, n.link_ctime, io(t)));
            }
            if let Some(t) = n.inbound {
                v.push(("from", n.name, n.inbound_ctime, io(t)));
            }
        }
        v
    })?;
    ctx.reply.array(links.len());
    for (dir, name, ctime, (queued, events)) in links {
        ctx.reply.map(6);
        ctx.reply.bulk(b"direction");
        ctx.reply.bulk(dir.as_bytes());
        ctx.reply.bulk(b"node");
        ctx.reply.bulk(&name);
        ctx.reply.bulk(b"create-time");
        ctx.reply.int(ctime);
        ctx.reply.bulk(b"events");
        ctx.reply.bulk(events.as_bytes());
        // Redis gives its queued messages' size for both.
        ctx.reply.bulk(b"send-buffer-allocated");
        ctx.reply.int(queued as i64);
        ctx.reply.bulk(b"send-buffer-used");
        ctx.reply.int(queued as i64);
    }
    Ok(())
}

/// One node as CLUSTER SLOTS lists it: endpoint, port, id, and the other addresses.
fn slots_node(st: &State, n: &cl::Node, tls: bool, reply: &mut crate::protocol::Reply) {
    reply.array(4);
    match st.settings.preferred_endpoint {
        cl::Endpoint::Ip => reply.bulk(n.ip.as_bytes()),
        cl::Endpoint::Hostname => reply.bulk(if n.hostname.is_empty() { b"?" } else { n.hostname.as_bytes() }),
        cl::Endpoint::Unknown => reply.null(),
    }
    reply.int(if tls { n.tls_port } else { n.tcp_port } as i64);
    reply.bulk(&n.name);
    let ip = st.settings.preferred_endpoint != cl::Endpoint::Ip;
    let host = st.settings.preferred_endpoint != cl::Endpoint::Hostname && !n.hostname.is_empty();
    reply.map(ip as usize + host as usize);
    if ip {
        reply.bulk(b"ip");
        reply.bulk(n.ip.as_bytes());
    }
    if host {
        reply.bulk(b"hostname");
        reply.bulk(n.hostname.as_bytes());
    }
}

fn replica_available(st: &State, r: &cl::Node, my_offset: u64) -> bool {
    let off = if r.name == st.myself { my_offset } else { r.repl_offset };
    !r.failed() && off != 0
}

pub fn slots(ctx: &mut Ctx) -> CmdResult {
    let tls = tls_client(ctx);
    let off = offset(ctx);
    let g = ctx.srv.cluster.state.lock();
    let st = g.as_ref().ok_or_else(|| CmdError::msg(DISABLED))?;
    let mut ranges: Vec<(usize, usize, wire::Name)> = Vec::new();
    for (s, o) in st.slots.iter().enumerate() {
        match (o, ranges.last_mut()) {
            (Some(o), Some(last)) if last.2 == *o && last.1 + 1 == s => last.1 = s,
            (Some(o), _) => ranges.push((s, s, *o)),
            (None, _) => {}
        }
    }
    let reply = &mut *ctx.reply;
    reply.array(ranges.len());
    for (a, b, owner) in ranges {
        let m = &st.nodes[&owner];
        let reps: Vec<&cl::Node> =
            st.replicas_of(&owner).into_iter().filter(|r| replica_available(st, r, off)).collect();
        reply.array(3 + reps.len());
        reply.int(a as i64);
        reply.int(b as i64);
        slots_node(st, m, tls, reply);
        for r in reps {
            slots_node(st, r, tls, reply);
        }
    }
    Ok(())
}

fn shard_node(st: &State, n: &cl::Node, my_offset: u64, reply: &mut crate::protocol::Reply) {
    let mut fields: Vec<(&str, Field)> = vec![("id", Field::Bulk(n.name.to_vec()))];
    if n.tcp_port != 0 {
        fields.push(("port", Field::Int(n.tcp_port as i64)));
    }
    if n.tls_port != 0 {
        fields.push(("tls-port", Field::Int(n.tls_port as i64)));
    }
    fields.push(("ip", Field::Bulk(n.ip.clone().into_bytes())));
    let endpoint = match st.settings.preferred_endpoint {
        cl::Endpoint::Ip => n.ip.clone(),
        cl::Endpoint::Hostname if !n.hostname.is_empty() => n.hostname.clone(),
        cl::Endpoint::Hostname => "?".into(),
        cl::Endpoint::Unknown => String::new(),
    };
    fields.push(("endpoint", Field::Bulk(endpoint.into_bytes())));
    if !n.hostname.is_empty() {
        fields.push(("hostname", Field::Bulk(n.hostname.clone().into_bytes())));
    }
    let slave = n.flags & SLAVE != 0;
    fields.push(("role", Field::Bulk(if slave { b"replica".to_vec() } else { b"master".to_vec() })));
    let off = if n.name == st.myself { my_offset } else { n.repl_offset };
    fields.push(("replication-offset", Field::Int(off as i64)));
    let health = if n.failed() {
        "fail"
    } else if slave && off == 0 {
        "loading"
    } else {
        "online"
    };
    fields.push(("health", Field::Bulk(health.as_bytes().to_vec())));
    reply.map(fields.len());
    for (k, v) in fields {
        reply.bulk(k.as_bytes());
        match v {
            Field::Bulk(b) => reply.bulk(&b),
            Field::Int(i) => reply.int(i),
        }
    }
}

enum Field {
    Bulk(Vec<u8>),
    Int(i64),
}

pub fn shards(ctx: &mut Ctx) -> CmdResult {
    let off = offset(ctx);
    let g = ctx.srv.cluster.state.lock();
    let st = g.as_ref().ok_or_else(|| CmdError::msg(DISABLED))?;
    let mut shards: Vec<(wire::Name, Vec<&cl::Node>)> = Vec::new();
    for n in st.ordered_nodes() {
        match shards.iter_mut().find(|(id, _)| *id == n.shard_id) {
            Some((_, v)) => v.push(n),
            None => shards.push((n.shard_id, vec![n])),
        }
    }
    let reply = &mut *ctx.reply;
    reply.array(shards.len());
    for (_, nodes) in shards {
        let master = nodes.iter().find(|n| n.is_master()).copied().unwrap_or_else(|| st.master_of(nodes[0]));
        reply.map(2);
        reply.bulk(b"slots");
        let ranges = master.slot_ranges();
        reply.array(ranges.len() * 2);
        for (a, b) in ranges {
            reply.int(a as i64);
            reply.int(b as i64);
        }
        reply.bulk(b"nodes");
        reply.array(nodes.len());
        for n in nodes {
            shard_node(st, n, off, reply);
        }
    }
    Ok(())
}

pub fn asking(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    ctx.client.asking = true;
    ctx.reply.ok();
    Ok(())
}
