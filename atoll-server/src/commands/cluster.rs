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
    // An atomic migration owns its slots' fate (Valkey refuses SETSLOT node-wide meanwhile).
    if !ctx.srv.cluster.migrations.running(true).is_empty() {
        return Err(CmdError::msg("ERR Slot export in progress."));
    }
    if !ctx.srv.cluster.migrations.running(false).is_empty() {
        return Err(CmdError::msg("ERR Slot import in progress."));
    }
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
    let (text, number) =
        ctx.srv.cluster.peek(|st| cl::conf::render_numbered(st)).ok_or_else(|| CmdError::msg(DISABLED))?;
    cl::conf::write_numbered(&text, number, &path, true).map_err(|e| {
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

// ---------------------------------------------------------------------------------------------
// Atomic slot migration (Valkey 9): MIGRATESLOTS, SYNCSLOTS, GETSLOTMIGRATIONS,
// CANCELSLOTMIGRATIONS. The jobs and the protocol: `services::cluster::migration`; the
// source's link: `daemons::slot_export`.

use crate::services::cluster::migration::{self as asm, Job, Step};

/// Slot ranges, first and last slot of each.
type Ranges = Vec<(usize, usize)>;
/// One migration MIGRATESLOTS plans: its ranges, the target's name, host and port.
type Planned = (Ranges, String, String, u16);

fn int_arg(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// Slot ranges from `args[*at..]`, up to the first argument that is not a number (Valkey's
/// parseSlotRangesOrReply): each slot in range and served, all by one shard, no overlap.
fn parse_ranges(st: &State, args: &[&[u8]], at: &mut usize) -> Result<Vec<(usize, usize)>, CmdError> {
    let bad = || CmdError::msg("ERR Invalid or out of range slot");
    let slot = |a: &[u8]| match int_arg(a) {
        Some(s) if (0..wire::SLOTS as i64).contains(&s) => Ok(s as usize),
        _ => Err(bad()),
    };
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut owner = None;
    while *at < args.len() && int_arg(args[*at]).is_some() {
        let start = slot(args[*at])?;
        let Some(end) = args.get(*at + 1) else {
            return Err(CmdError::msg("ERR No end slot for final slot range"));
        };
        let end = slot(end)?;
        *at += 2;
        if start > end {
            return Err(CmdError::msg(format!("ERR Start slot number {start} is greater than end slot number {end}.")));
        }
        for s in start..=end {
            let Some(o) = st.slots[s] else {
                return Err(CmdError::msg(format!("ERR Slot {s} has no node served.")));
            };
            if *owner.get_or_insert(o) != o {
                return Err(CmdError::msg("ERR Requested slots span multiple shards"));
            }
        }
        if let Some(&(a, b)) = ranges.iter().find(|&&(a, b)| start <= b && a <= end) {
            return Err(CmdError::msg(format!("ERR Slot range {start}-{end} overlaps with previous range {a}-{b}.")));
        }
        ranges.push((start, end));
    }
    if ranges.is_empty() {
        return Err(CmdError::msg("ERR No slot ranges specified"));
    }
    Ok(ranges)
}

/// SETSLOT states on this node: an atomic migration refuses to start beside them.
fn manual_moves(st: &State) -> Result<(), CmdError> {
    if !st.importing.is_empty() {
        return Err(CmdError::msg("ERR Slots are being manually imported"));
    }
    if !st.migrating.is_empty() {
        return Err(CmdError::msg("ERR Slots are being manually migrated"));
    }
    Ok(())
}

/// CLUSTER MIGRATESLOTS SLOTSRANGE start end [start end …] NODE id [SLOTSRANGE … NODE id …]:
/// checked whole (no job starts if any part is wrong), then each group moves in a job of its
/// own, in the background.
pub fn migrateslots(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let migrations = &ctx.srv.cluster.migrations;
    let args = ctx.args;
    // (Read before the view's lock, which ranks after the jobs'.)
    let exporting: std::collections::HashSet<usize> = migrations.running(true).iter().flat_map(|j| j.slots()).collect();
    let planned = read_state(ctx, |st| -> Result<Vec<Planned>, CmdError> {
        if st.me().is_slave() {
            return Err(CmdError::msg("ERR Slot migration can only be used on primary nodes."));
        }
        manual_moves(st)?;
        let me = st.myself;
        let mut groups: Vec<Planned> = Vec::new();
        let mut at = 2;
        while at < args.len() {
            if !args[at].eq_ignore_ascii_case(b"slotsrange") {
                return Err(CmdError::Syntax);
            }
            at += 1;
            let ranges = parse_ranges(st, args, &mut at)?;
            if st.slots[ranges[0].0] != Some(me) {
                return Err(CmdError::msg("ERR Slots are not served by this node."));
            }
            if let Some(s) = ranges.iter().flat_map(|&(a, b)| a..=b).find(|s| exporting.contains(s)) {
                return Err(CmdError::msg(format!("ERR I am already migrating slot {s}.")));
            }
            let overlaps = |r: &[(usize, usize)]| r.iter().any(|&(a, b)| ranges.iter().any(|&(c, d)| a <= d && c <= b));
            if groups.iter().any(|g| overlaps(&g.0)) {
                return Err(CmdError::msg("ERR Slot ranges in migrations overlap"));
            }
            if at + 1 >= args.len() || !args[at].eq_ignore_ascii_case(b"node") {
                return Err(CmdError::Syntax);
            }
            let id = args[at + 1];
            at += 2;
            if id.len() != wire::NAMELEN {
                return Err(CmdError::msg(format!("ERR Invalid node name: {}", String::from_utf8_lossy(id))));
            }
            let Some(n) = cl::parse_name(id).filter(|n| st.nodes.contains_key(n)) else {
                return Err(CmdError::msg(format!("ERR Unknown node name: {}", String::from_utf8_lossy(id))));
            };
            if n == me {
                return Err(CmdError::msg("ERR Target node can not be this node."));
            }
            let t = &st.nodes[&n];
            let port = if st.settings.tls_replication { t.tls_port } else { t.tcp_port };
            groups.push((ranges, name_str(&n).to_string(), t.ip.clone(), port));
        }
        Ok(groups)
    })??;
    let me = read_state(ctx, |st| name_str(&st.myself).to_string())?;
    for (ranges, target, host, port) in planned {
        migrations.add(std::sync::Arc::new(Job::new(asm::new_name(), true, ranges, me.clone(), target, (host, port))));
    }
    // Writes to the slots are wanted from now on; the bus thread starts the jobs' links.
    migrations.refresh_exporting();
    ctx.srv.refresh_effects();
    ctx.srv.cluster.wake();
    ctx.reply.ok();
    Ok(())
}

/// CLUSTER GETSLOTMIGRATIONS: the jobs, newest first, each a map of Valkey's twelve fields (ten
/// for a replica's record of its primary's import, without the two nodes).
pub fn getslotmigrations(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let jobs = ctx.srv.cluster.migrations.all();
    ctx.reply.array(jobs.len());
    for j in jobs {
        let p = j.progress.lock();
        let (step, message, last_update, last_ack) = (p.step, p.message.clone(), p.last_update, p.last_ack);
        drop(p);
        // A replica's record of its primary's import names neither node.
        let tracking = j.source.is_empty();
        ctx.reply.map(if tracking { 10 } else { 12 });
        ctx.reply.bulk(b"name");
        ctx.reply.bulk(j.name.as_bytes());
        ctx.reply.bulk(b"operation");
        ctx.reply.bulk(if j.export { b"EXPORT" } else { b"IMPORT" });
        ctx.reply.bulk(b"slot_ranges");
        ctx.reply.bulk(j.ranges_text().as_bytes());
        if !tracking {
            ctx.reply.bulk(b"target_node");
            ctx.reply.bulk(j.target.as_bytes());
            ctx.reply.bulk(b"source_node");
            ctx.reply.bulk(j.source.as_bytes());
        }
        for (k, v) in [("create_time", j.create_time), ("last_update_time", last_update), ("last_ack_time", last_ack)] {
            ctx.reply.bulk(k.as_bytes());
            ctx.reply.int(v);
        }
        ctx.reply.bulk(b"state");
        ctx.reply.bulk(step.name().as_bytes());
        ctx.reply.bulk(b"message");
        ctx.reply.bulk(message.as_bytes());
        // No fork: nothing is copied on write for the snapshot (its writer copies shards a
        // write is about to change, counted in INFO's current_cow_size while it runs).
        ctx.reply.bulk(b"cow_size");
        ctx.reply.int(0);
        ctx.reply.bulk(b"remaining_repl_size");
        ctx.reply.int(j.pending() as i64);
    }
    Ok(())
}

/// CLUSTER CANCELSLOTMIGRATIONS: stops this node's exports (the targets see their links close).
pub fn cancelslotmigrations(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let running = ctx.srv.cluster.migrations.running(true);
    if running.is_empty() {
        return Err(CmdError::msg("ERR No migrations ongoing"));
    }
    for j in running {
        j.cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    ctx.reply.ok();
    Ok(())
}

/// CLUSTER SYNCSLOTS: the migration protocol's messages. ESTABLISH makes the connection this
/// node's import link; the others are only for such links (the source's end is the export
/// thread's, which reads the target's messages itself).
pub fn syncslots(ctx: &mut Ctx) -> CmdResult {
    enabled(ctx)?;
    let sub = ctx.args[2].to_ascii_uppercase();
    // A replica is told of its primary's imports in the stream (Valkey's tracking job).
    if ctx.client.replaying && ctx.client.handle.master.load(std::sync::atomic::Ordering::Relaxed) {
        return syncslots_from_primary(ctx, &sub);
    }
    if sub == b"ESTABLISH" {
        return establish(ctx);
    }
    if sub == b"CAPA" {
        // Reserved by Valkey for future capabilities, and answered by nothing there.
        ctx.client.reply_mode = crate::exec::client::ReplyMode::Skipping;
        return Ok(());
    }
    let known =
        [b"ACK".as_slice(), b"SNAPSHOT-EOF", b"REQUEST-PAUSE", b"PAUSED", b"REQUEST-FAILOVER", b"FAILOVER-GRANTED"];
    let Some(job) = ctx.client.import.clone() else {
        if known.contains(&sub.as_slice()) {
            return Err(CmdError::msg(format!(
                "ERR CLUSTER SYNCSLOTS {} should only be used by slot migration clients",
                String::from_utf8_lossy(&sub)
            )));
        }
        return Err(CmdError::Syntax);
    };
    if job.step().finished() {
        return Ok(());
    }
    let now = cl::now_ms();
    job.progress.lock().heard_ms = now;
    let step = job.step();
    let send = |ctx: &Ctx, what: &str| {
        ctx.srv.pubsub.send_raw(&ctx.srv.config.hot, &ctx.client.handle.mailbox(), &asm::message(what));
    };
    match (sub.as_slice(), step) {
        (b"ACK", _) => {
            job.progress.lock().last_ack = now / 1000;
            if step == Step::WaitingForAck {
                job.set(Step::ReceivingSnapshot);
            }
        }
        (b"SNAPSHOT-EOF", Step::ReceivingSnapshot) => {
            job.set(Step::WaitingForPaused);
            send(ctx, "REQUEST-PAUSE");
        }
        (b"PAUSED", Step::WaitingForPaused) => {
            job.set(Step::FailoverRequested);
            send(ctx, "REQUEST-FAILOVER");
        }
        (b"FAILOVER-GRANTED", Step::FailoverRequested) => {
            take_over(ctx, &job)?;
            job.set(Step::Success);
            ctx.srv.cluster.migrations.refresh_importing();
            ctx.srv.slot_import_ended(&job);
            crate::log_notice!(
                "Slot migration {} ({}) succeeded: the slots are served here",
                job.name,
                job.ranges_text()
            );
            ctx.client.close_after_reply = true;
        }
        _ => {
            let why = if known.contains(&sub.as_slice()) {
                "Unexpected state machine transition"
            } else {
                "Unknown SYNCSLOTS subcommand used"
            };
            job.fail(why);
            ctx.srv.cluster.import_failed(&job);
            ctx.srv.slot_import_ended(&job);
            ctx.client.close_after_reply = true;
        }
    }
    Ok(())
}

/// The target's end of a migration takes its slots: a new config epoch without the cluster's
/// consent (its slots were another's), the slots, nodes.conf saved, and a PONG to every node
/// so the cluster learns at once (Valkey's performSlotImportJobFailover).
fn take_over(ctx: &Ctx, job: &Job) -> CmdResult {
    let off = offset(ctx);
    with_state(ctx, |st| {
        let me = st.myself;
        if st.bump_epoch_without_consensus() {
            crate::log_notice!("configEpoch updated after importing slots {}", job.ranges_text());
        }
        for s in job.slots() {
            st.del_slot(s);
            st.add_slot(s, me);
        }
        st.todo_save = true;
        st.todo_update = true;
        let pong = st.ping(wire::PONG, off);
        st.broadcast(pong);
    })
}

/// CLUSTER SYNCSLOTS ESTABLISH SOURCE id NAME name SLOTSRANGE start end …, from the source's
/// link: answered `+OK` (the last reply this connection gets) or refused.
fn establish(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    if ctx.client.import.is_some() {
        return Err(CmdError::msg("ERR This connection already brings a slot migration in"));
    }
    let (name, source, ranges) = read_state(ctx, |st| -> Result<(String, wire::Name, Ranges), CmdError> {
        let (mut source, mut name, mut ranges) = (None, None, None);
        let mut at = 3;
        while at < args.len() {
            let key = args[at].to_ascii_lowercase();
            match key.as_slice() {
                b"source" if source.is_none() => {
                    source = Some(*args.get(at + 1).ok_or(CmdError::Syntax)?);
                    at += 2;
                }
                b"name" if name.is_none() => {
                    let n = *args.get(at + 1).ok_or(CmdError::Syntax)?;
                    if n.len() != wire::NAMELEN {
                        return Err(CmdError::Syntax);
                    }
                    name = Some(String::from_utf8_lossy(n).into_owned());
                    at += 2;
                }
                b"slotsrange" if ranges.is_none() => {
                    at += 1;
                    ranges = Some(parse_ranges(st, args, &mut at)?);
                }
                _ => return Err(CmdError::Syntax),
            }
        }
        let (Some(source), Some(name), Some(ranges)) = (source, name, ranges) else {
            return Err(CmdError::Syntax);
        };
        if st.me().is_slave() {
            return Err(CmdError::msg("ERR Slot migration can only be used on primary nodes."));
        }
        let Some(src) = cl::parse_name(source).filter(|n| st.nodes.contains_key(n)) else {
            return Err(CmdError::msg("ERR Target node does not know the source node"));
        };
        if src == st.myself {
            return Err(CmdError::msg("ERR Source node is target node itself"));
        }
        if ranges.iter().flat_map(|&(a, b)| a..=b).any(|s| st.slots[s] != Some(src)) {
            return Err(CmdError::msg("ERR Target node does not agree about current slot ownership"));
        }
        Ok((name, src, ranges))
    })??;
    let migrations = &ctx.srv.cluster.migrations;
    if ranges.iter().flat_map(|&(a, b)| a..=b).any(|s| migrations.moving(s, false).is_some()) {
        return Err(CmdError::msg("ERR Slot is already being imported on the target by a different migration"));
    }
    read_state(ctx, |st| manual_moves(st))??;
    let me = read_state(ctx, |st| name_str(&st.myself).to_string())?;
    let job = std::sync::Arc::new(Job::new(name, false, ranges, name_str(&source).to_string(), me, (String::new(), 0)));
    job.link.store(ctx.client.id() as i64, std::sync::atomic::Ordering::Relaxed);
    migrations.add(job.clone());
    crate::log_notice!("Importing slots {} from {} (slot migration {})", job.ranges_text(), job.source, job.name);
    // From here on the link is the source's: its commands run as a primary's do (no routing,
    // no replies; an error fails the migration).
    ctx.srv.slot_import_began(&job);
    ctx.client.import = Some(job);
    migrations.refresh_importing();
    ctx.client.replaying = true;
    ctx.client.reply_mode = crate::exec::client::ReplyMode::OffAfterThis;
    ctx.reply.ok();
    Ok(())
}

/// SYNCSLOTS in a primary's replication stream: ESTABLISH and FINISH keep a record of the
/// primary's import (`occurring-on-primary`, then its outcome); the rest is the link's traffic
/// passed on, with nothing to do here.
fn syncslots_from_primary(ctx: &mut Ctx, sub: &[u8]) -> CmdResult {
    let args = ctx.args;
    let value = |key: &str| {
        args.iter().position(|a| a.eq_ignore_ascii_case(key.as_bytes())).and_then(|i| args.get(i + 1)).copied()
    };
    match sub {
        b"ESTABLISH" => {
            let (Some(name), Some(at)) =
                (value("name"), args.iter().position(|a| a.eq_ignore_ascii_case(b"slotsrange")))
            else {
                return Err(CmdError::Syntax);
            };
            let mut ranges = Vec::new();
            let mut i = at + 1;
            while let (Some(a), Some(b)) =
                (args.get(i).and_then(|a| int_arg(a)), args.get(i + 1).and_then(|a| int_arg(a)))
            {
                ranges.push((a.clamp(0, 16383) as usize, b.clamp(0, 16383) as usize));
                i += 2;
            }
            let job = Job::new(
                String::from_utf8_lossy(name).into_owned(),
                false,
                ranges,
                String::new(),
                String::new(),
                (String::new(), 0),
            );
            job.set(Step::OccurringOnPrimary);
            ctx.srv.cluster.migrations.add(std::sync::Arc::new(job));
            ctx.srv.cluster.migrations.refresh_importing();
        }
        b"FINISH" => {
            let name = value("name").map(|n| String::from_utf8_lossy(n).into_owned()).unwrap_or_default();
            let Some(job) = ctx.srv.cluster.migrations.find(&name) else {
                return Err(CmdError::msg("ERR No such slot migration job"));
            };
            match value("state").map(|s| s.to_ascii_lowercase()) {
                Some(s) if s == b"success" => {
                    job.set(Step::Success);
                }
                _ => {
                    job.fail(&value("message").map(|m| String::from_utf8_lossy(m).into_owned()).unwrap_or_default());
                }
            }
            ctx.srv.cluster.migrations.refresh_importing();
        }
        _ => {}
    }
    ctx.reply.ok();
    Ok(())
}
