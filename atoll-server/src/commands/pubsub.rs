//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB. The registry and delivery are `exec::pubsub`.
//!
//! The (un)subscribe confirmations are push messages in RESP3 and arrays in RESP2, one per
//! name, and CLIENT REPLY OFF does not silence them (Redis sends them as pushes).

use crate::exec::client::Client;
use crate::exec::{help_reply, CmdError, CmdResult, Ctx, Effect};
use crate::services::pubsub::{Kind, Subs};
use indexmap::IndexSet;

/// The client's subscription state, made on its first subscription.
fn subs_of(client: &mut Client) -> &mut Subs {
    let subs = client.subs.get_or_insert_with(|| {
        Box::new(Subs {
            mailbox: client.handle.mailbox(),
            channels: IndexSet::new(),
            patterns: IndexSet::new(),
            shard: IndexSet::new(),
        })
    });
    subs.reconcile();
    subs
}

/// One (un)subscribe confirmation: `[word, name or null, count]`.
fn confirm(ctx: &mut Ctx, word: &str, name: Option<&[u8]>, count: usize) {
    ctx.reply.push(3);
    ctx.reply.bulk(word.as_bytes());
    match name {
        Some(n) => ctx.reply.bulk(n),
        None => ctx.reply.null(),
    }
    ctx.reply.int(count as i64);
}

fn subscribe(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    // A client in a transaction cannot wait for messages (Redis's DENY_BLOCKING); SUBSCRIBE
    // and PSUBSCRIBE are let through inside MULTI for backward compatibility, as in Redis.
    if ctx.client.in_exec && kind == Kind::Shard {
        return Err(CmdError::msg("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client"));
    }
    ctx.client.push_reply = true;
    let srv = ctx.srv;
    let word = kind.words().0;
    for &name in &ctx.args[1..] {
        let subs = subs_of(ctx.client);
        if subs.set(kind).insert(name.into()) {
            srv.pubsub.add(kind, name, &subs.mailbox);
        }
        let n = subs.count(kind);
        subs.show();
        confirm(ctx, word, Some(name), n);
    }
    Ok(())
}

fn unsubscribe(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    ctx.client.push_reply = true;
    // Messages that arrived before this command go before its confirmations (a RESP2 client
    // leaving Pub/Sub mode must not see a message after its last confirmation). Not inside
    // EXEC, whose reply must stay whole.
    if !ctx.client.in_exec {
        if let Some(s) = &ctx.client.subs {
            s.mailbox.take_into(&mut ctx.reply.buf);
        }
    }
    let word = kind.words().1;
    if let Some(s) = ctx.client.subs.as_mut() {
        s.reconcile();
    }
    let names: Vec<Box<[u8]>> = if ctx.args.len() > 1 {
        ctx.args[1..].iter().map(|&a| a.into()).collect()
    } else {
        ctx.client.subs.as_mut().map(|s| s.set(kind).iter().cloned().collect()).unwrap_or_default()
    };
    if names.is_empty() {
        let n = ctx.client.subs.as_ref().map_or(0, |s| s.count(kind));
        confirm(ctx, word, None, n);
    }
    for name in names {
        let n = match ctx.client.subs.as_mut() {
            Some(subs) => {
                if subs.set(kind).shift_remove(&name) {
                    ctx.srv.pubsub.remove(kind, &name, &subs.mailbox);
                }
                subs.show();
                subs.count(kind)
            }
            None => 0,
        };
        confirm(ctx, word, Some(&name), n);
    }
    leave_if_done(ctx.client);
    Ok(())
}

/// A client left with no subscription is out of Pub/Sub mode. Its state stays only while
/// messages wait in its mailbox (the session hands them over after this command).
fn leave_if_done(client: &mut Client) {
    if client.subs.as_ref().is_some_and(|s| s.total() == 0 && s.mailbox.is_empty()) {
        client.subs = None;
    }
}

// SUBSCRIBE channel [channel ...]
pub fn subscribe_cmd(ctx: &mut Ctx) -> CmdResult {
    subscribe(ctx, Kind::Channel)
}

// UNSUBSCRIBE [channel [channel ...]]
pub fn unsubscribe_cmd(ctx: &mut Ctx) -> CmdResult {
    unsubscribe(ctx, Kind::Channel)
}

// PSUBSCRIBE pattern [pattern ...]
pub fn psubscribe(ctx: &mut Ctx) -> CmdResult {
    subscribe(ctx, Kind::Pattern)
}

// PUNSUBSCRIBE [pattern [pattern ...]]
pub fn punsubscribe(ctx: &mut Ctx) -> CmdResult {
    unsubscribe(ctx, Kind::Pattern)
}

// SSUBSCRIBE shardchannel [shardchannel ...]
pub fn ssubscribe(ctx: &mut Ctx) -> CmdResult {
    subscribe(ctx, Kind::Shard)
}

// SUNSUBSCRIBE [shardchannel [shardchannel ...]]
pub fn sunsubscribe(ctx: &mut Ctx) -> CmdResult {
    unsubscribe(ctx, Kind::Shard)
}

// PUBLISH channel message
pub fn publish(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.srv.pubsub.publish(&ctx.srv.config.hot, false, ctx.args[1], ctx.args[2], ctx.client.id());
    to_cluster(ctx, false);
    ctx.reply.int(n as i64);
    Ok(())
}

// SPUBLISH shardchannel message
pub fn spublish(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.srv.pubsub.publish(&ctx.srv.config.hot, true, ctx.args[1], ctx.args[2], ctx.client.id());
    to_cluster(ctx, true);
    ctx.reply.int(n as i64);
    Ok(())
}

/// In cluster mode a message reaches the other nodes' subscribers over the bus (all nodes
/// for PUBLISH, this shard's for SPUBLISH), as Redis's clusterPropagatePublish.
/// Standalone, replicas' subscribers get it down the replication stream instead (the bus
/// reaches replicas in cluster mode, so Redis 7.2 sends it one way only).
fn to_cluster(ctx: &mut Ctx, shard: bool) {
    if !ctx.srv.cluster.enabled {
        return to_replicas(ctx);
    }
    if !ctx.client.replaying {
        let (c, m) = (ctx.args[1], ctx.args[2]);
        ctx.srv.cluster.peek(|st| st.propagate_publish(c, m, shard));
    }
}

/// Messages reach the replicas' subscribers too: (S)PUBLISH goes down the replication
/// stream, not to the AOF (Redis's forceCommandPropagation(PROPAGATE_REPL)).
fn to_replicas(ctx: &mut Ctx) {
    if ctx.srv.repl.on() {
        let argv: Vec<Vec<u8>> = ctx.args.iter().map(|a| a.to_vec()).collect();
        ctx.srv.repl.feed(&ctx.srv.reach(), &[Effect::new(ctx.ks.db, argv)]);
    }
}

// PUBSUB HELP
pub fn pubsub_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}

fn list_names(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(&ctx.args[1][..ctx.args[1].len().min(128)])
        )));
    }
    let names = ctx.srv.pubsub.names(kind, ctx.args.get(2).copied());
    ctx.reply.array(names.len());
    for n in names {
        ctx.reply.bulk(&n);
    }
    Ok(())
}

fn count_subscribers(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    ctx.reply.array((ctx.args.len() - 2) * 2);
    for &name in &ctx.args[2..] {
        ctx.reply.bulk(name);
        ctx.reply.int(ctx.srv.pubsub.count(kind, name) as i64);
    }
    Ok(())
}

// PUBSUB CHANNELS [pattern]
pub fn pubsub_channels(ctx: &mut Ctx) -> CmdResult {
    list_names(ctx, Kind::Channel)
}

// PUBSUB SHARDCHANNELS [pattern]
pub fn pubsub_shardchannels(ctx: &mut Ctx) -> CmdResult {
    list_names(ctx, Kind::Shard)
}

// PUBSUB NUMSUB [channel ...]
pub fn pubsub_numsub(ctx: &mut Ctx) -> CmdResult {
    count_subscribers(ctx, Kind::Channel)
}

// PUBSUB SHARDNUMSUB [shardchannel ...]
pub fn pubsub_shardnumsub(ctx: &mut Ctx) -> CmdResult {
    count_subscribers(ctx, Kind::Shard)
}

// PUBSUB NUMPAT
pub fn pubsub_numpat(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.int(ctx.srv.pubsub.len(Kind::Pattern) as i64);
    Ok(())
}

// MONITOR
pub fn monitor(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.in_exec {
        return Err(CmdError::msg("ERR MONITOR isn't allowed for DENY BLOCKING client"));
    }
    // Already monitoring: Redis ignores it, without a reply.
    if ctx.client.monitor.is_some() {
        return Ok(());
    }
    let c = &mut *ctx.client;
    let mb = c.handle.mailbox();
    c.handle.monitor.store(true, std::sync::atomic::Ordering::Relaxed);
    ctx.srv.pubsub.add_monitor(mb.clone());
    c.monitor = Some(mb);
    ctx.reply.ok();
    Ok(())
}
