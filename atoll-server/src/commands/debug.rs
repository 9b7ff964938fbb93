//! DEBUG (gated by `enable-debug-command`, in `exec::call`): what Redis's own test suite and
//! tools use — OBJECT, DIGEST and DIGEST-VALUE with Redis's algorithm (equal data gives equal
//! digests on both servers), PROTOCOL for every RESP3 type, POPULATE, HTSTATS, LISTPACK /
//! QUICKLIST, SLEEP, LOG, ERROR … — plus HOTKEYS, Atoll's own. Subcommands are matched by name
//! and argument count as Redis does; anything else gets Redis's generic error.

use crate::engine::{key_shard, Value, SHARDS};
use crate::exec::*;
use crate::protocol::Proto;
use sha1::{Digest, Sha1};
use std::sync::atomic::Ordering;

type Sha = [u8; 20];

/// `d = d XOR SHA1(data)`: order-independent accumulation (Redis's `xorDigest`).
fn xor_digest(d: &mut Sha, data: &[u8]) {
    let h: Sha = Sha1::digest(data).into();
    for (a, b) in d.iter_mut().zip(h) {
        *a ^= b;
    }
}

/// `d = SHA1(d XOR SHA1(data))`: order-dependent (Redis's `mixDigest`).
fn mix_digest(d: &mut Sha, data: &[u8]) {
    xor_digest(d, data);
    *d = Sha1::digest(*d).into();
}

/// A score as Redis's digest writes it (`fpconv_dtoa`: the shortest round-trip digits, then
/// plain or scientific notation by its rules), which is not how replies print it: 1e8 is
/// digested as `1e+8`.
fn digest_score(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rust prints the shortest round-trip digits: "1.2345e8" → digits 12345, exponent 8.
    let sci = format!("{:e}", v.abs());
    let (mant, exp) = sci.split_once('e').unwrap();
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let exp: i64 = exp.parse().unwrap();
    let nd = digits.len() as i64;
    let k = exp - nd + 1; // value = digits × 10^k
    let sign = if v < 0.0 { "-" } else { "" };
    let out = if k >= 0 && exp < nd + 7 {
        format!("{digits}{}", "0".repeat(k as usize))
    } else if k < 0 && (k > -7 || exp.abs() < 4) {
        let point = nd + k;
        if point > 0 {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        } else {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        }
    } else {
        let rest = if nd > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        format!("{}{rest}e{}{}", &digits[..1], if exp < 0 { '-' } else { '+' }, exp.abs())
    };
    format!("{sign}{out}")
}

/// DEBUG DIGEST-VALUE's digest of one value, without a key or TTL: equal for equal content
/// whatever the encoding or the order a hash table iterates in (the fuzz targets compare
/// values with it).
pub fn content_digest(v: &Value) -> [u8; 20] {
    let mut d = [0u8; 20];
    value_digest(&mut d, v, false);
    d
}

/// Redis's per-value digest (`xorObjectDigest`), continuing from `d`.
fn value_digest(d: &mut Sha, v: &Value, has_expire: bool) {
    let mut buf = itoa::Buffer::new();
    let code: u32 = match v {
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
        _ => 0,
    };
    mix_digest(d, &code.to_be_bytes());
    match v {
        Value::List(l) => l.iter().for_each(|e| mix_digest(d, &e)),
        Value::Set(s) => s.for_each(|m| xor_digest(d, m)),
        Value::Hash(h) => h.for_each(|f, val| {
            let mut e = [0u8; 20];
            mix_digest(&mut e, f);
            mix_digest(&mut e, val);
            xor_digest(d, &e);
        }),
        Value::ZSet(z) => z.for_each(|m, score| {
            let mut e = [0u8; 20];
            mix_digest(&mut e, m);
            mix_digest(&mut e, digest_score(score).as_bytes());
            xor_digest(d, &e);
        }),
        Value::Stream(s) => {
            for e in
                s.range(crate::engine::stream::StreamId::MIN, crate::engine::stream::StreamId::MAX, false, usize::MAX)
            {
                mix_digest(d, format!("{}.{}", e.id.ms, e.id.seq).as_bytes());
                for f in &e.fields {
                    mix_digest(d, f);
                }
            }
        }
        _ => mix_digest(d, v.as_bytes(&mut buf).unwrap_or_default()),
    }
    if has_expire {
        xor_digest(d, b"!!expire!!");
    }
}

fn hex(d: &Sha) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// DEBUG DIGEST: the whole dataset, database by database (expired keys not yet reclaimed
/// included, as Redis reads its dictionaries directly).
fn dataset_digest(ctx: &mut Ctx) -> String {
    let mut fin = [0u8; 20];
    for db in 0..ctx.srv.ks.num_dbs() {
        if ctx.srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        let mut acc = [0u8; 20];
        let mut any = false;
        for s in 0..SHARDS {
            ctx.ks.locks.with_shard(db, s, |sh| {
                sh.keys.for_each(|k, v| {
                    any = true;
                    let mut kd = [0u8; 20];
                    mix_digest(&mut kd, k);
                    value_digest(&mut kd, v, sh.expires.contains_key(k));
                    xor_digest(&mut acc, &kd);
                });
            });
        }
        if any {
            mix_digest(&mut fin, &(db as u32).to_be_bytes());
            for (a, b) in fin.iter_mut().zip(acc) {
                *a ^= b;
            }
        }
    }
    hex(&fin)
}

/// RDB length-prefix bytes for `n`.
fn rdb_len(n: usize) -> usize {
    match n {
        0..=63 => 1,
        64..=16383 => 2,
        _ if n <= u32::MAX as usize => 5,
        _ => 9,
    }
}

/// Bytes an RDB string takes: small canonical integers as integers, else length + bytes.
/// (Without LZF compression: Atoll writes no RDB yet, and DEBUG OBJECT's figure is an
/// estimate for strings over 20 bytes that would compress.)
fn rdb_str(b: &[u8]) -> usize {
    if b.len() <= 11 {
        if let Some(i) = crate::protocol::parse_i64(b) {
            return rdb_int(i).unwrap_or(rdb_len(b.len()) + b.len());
        }
    }
    rdb_len(b.len()) + b.len()
}

fn rdb_int(i: i64) -> Option<usize> {
    if i8::try_from(i).is_ok() {
        Some(2)
    } else if i16::try_from(i).is_ok() {
        Some(3)
    } else if i32::try_from(i).is_ok() {
        Some(5)
    } else {
        None
    }
}

/// DEBUG OBJECT's `serializedlength`: what the value would take in an RDB file.
fn serialized_length(v: &Value, fill: i64) -> usize {
    use crate::engine::list::lp_entry_size;
    let lp = |sizes: usize| 7 + sizes;
    let mut buf = itoa::Buffer::new();
    match v {
        Value::Int(i) => rdb_int(*i).unwrap_or_else(|| rdb_str(buf.format(*i).as_bytes())),
        Value::List(l) if l.encoding() == "listpack" => 2 + rdb_str(&vec![0; l.quicklist_nodes(fill).1]),
        Value::List(l) => {
            let (nodes, bytes) = l.quicklist_nodes(fill);
            rdb_len(nodes) + nodes + nodes * rdb_len(bytes / nodes.max(1)) + bytes
        }
        Value::Set(s) => match s.encoding() {
            "intset" => {
                let n = s.intset_bytes().unwrap_or(8);
                rdb_len(n) + n
            }
            "listpack" => {
                let mut n = 0;
                s.for_each(|m| n += lp_entry_size(m));
                rdb_len(lp(n)) + lp(n)
            }
            _ => {
                let mut n = rdb_len(s.len());
                s.for_each(|m| n += rdb_str(m));
                n
            }
        },
        Value::Hash(h) if h.encoding() == "listpack" => {
            let mut n = 0;
            h.for_each(|f, val| n += lp_entry_size(f) + lp_entry_size(val));
            rdb_len(lp(n)) + lp(n)
        }
        Value::Hash(h) => {
            let mut n = rdb_len(h.len());
            h.for_each(|f, val| n += rdb_str(f) + rdb_str(val));
            n
        }
        Value::ZSet(z) if z.encoding() == "listpack" => {
            let mut n = 0;
            z.for_each(|m, s| {
                let mut b = Vec::new();
                crate::protocol::reply::fmt_double(s, &mut b);
                n += lp_entry_size(m) + lp_entry_size(&b);
            });
            rdb_len(lp(n)) + lp(n)
        }
        Value::ZSet(z) => {
            let mut n = rdb_len(z.len());
            z.for_each(|m, _| n += rdb_str(m) + 8);
            n
        }
        Value::Stream(s) => {
            let entries =
                s.range(crate::engine::stream::StreamId::MIN, crate::engine::stream::StreamId::MAX, false, usize::MAX);
            let body: usize =
                entries.iter().map(|e| 2 + e.fields.iter().map(|f| lp_entry_size(f)).sum::<usize>()).sum();
            rdb_len(s.node_count()) + s.node_count() * 17 + lp(body) + 16
        }
        _ => rdb_str(v.as_bytes(&mut buf).unwrap_or_default()),
    }
}

/// DEBUG OBJECT's line for a value whose access clock is `key_lru` (seconds since start).
fn object_line(srv: &Server, now_ms: i64, v: &Value, key_lru: u32) -> String {
    // Redis's 24-bit LRU clock (unix seconds); Atoll keeps seconds since start per key.
    let start_s = srv.start_ms / 1000;
    let lru = ((start_s + key_lru as i64 - crate::engine::value::LRU_BASE as i64) & 0xFF_FFFF) as u64;
    let now = ((now_ms / 1000) & 0xFF_FFFF) as u64;
    let idle = if now >= lru { now - lru } else { now + (0xFF_FFFF - lru) };
    let fill = srv.config.hot.list_max_listpack_size.load(Ordering::Relaxed);
    let mut line = format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
        v as *const Value,
        super::keys::refcount(srv, v),
        v.encoding(),
        serialized_length(v, fill),
        lru,
        idle
    );
    if let Value::List(l) = v {
        if l.encoding() == "quicklist" {
            let (nodes, bytes) = l.quicklist_nodes(fill);
            line.push_str(&format!(
                " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
                nodes,
                l.len() as f64 / nodes.max(1) as f64,
                fill,
                (l.compress_depth() != 0) as u8,
                bytes
            ));
        }
    }
    line
}

/// Redis's DEBUG HTSTATS text for one table set (`dictGetStats`).
fn dict_stats_text(tables: &[(usize, usize, Vec<usize>)], full: bool) -> String {
    let mut o = String::new();
    for (i, (size, used, chains)) in tables.iter().enumerate() {
        let which = if i == 0 { "main hash table" } else { "rehashing target" };
        o.push_str(&format!("Hash table {i} stats ({which}):\n"));
        if *used == 0 {
            o.push_str("No stats available for empty dictionaries\n");
            continue;
        }
        o.push_str(&format!(" table size: {size}\n number of elements: {used}\n"));
        if full {
            let slots = size - chains[0];
            let maxchain = chains.iter().rposition(|&c| c > 0).unwrap_or(0);
            let total: usize = chains.iter().enumerate().map(|(l, c)| l * c).sum();
            o.push_str(&format!(
                " different slots: {slots}\n max chain length: {maxchain}\n avg chain length (counted): {:.2}\n avg chain length (computed): {:.2}\n Chain length distribution:\n",
                total as f64 / slots.max(1) as f64,
                *used as f64 / slots.max(1) as f64
            ));
            for (len, &n) in chains.iter().enumerate().take(49) {
                if n > 0 {
                    o.push_str(&format!("   {len}: {n} ({:.2}%)\n", n as f64 * 100.0 / *size as f64));
                }
            }
        }
    }
    o
}

/// Sums per-shard table statistics into one, as if the database were one table.
fn merge_stats(all: impl Iterator<Item = Vec<(usize, usize, Vec<usize>)>>) -> Vec<(usize, usize, Vec<usize>)> {
    // The main tables summed, and the rehashing targets of the shards moving to one (shown
    // as Redis shows a dict's second table while it rehashes).
    let mut out = vec![(0usize, 0usize, vec![0usize; 50]), (0usize, 0usize, vec![0usize; 50])];
    for t in all {
        for (i, (size, used, chains)) in t.iter().enumerate().take(2) {
            out[i].0 += size;
            out[i].1 += used;
            for (a, b) in out[i].2.iter_mut().zip(chains) {
                *a += b;
            }
        }
    }
    if out[1].0 == 0 {
        out.truncate(1);
    }
    out
}

fn unknown(sub: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)])
    ))
}

const HELP: &[&str] = &[
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "HTSTATS <dbid> [full]",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key> [full]",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "HOTKEYS [<count>]",
    "    Return the hottest keys seen by sampling (Atoll's own; `hotkeys` config).",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "PANIC-IN-HANDLER",
    "    Atoll's own: this command's handler panics (answered with an error; the server stays up).",
    "PANIC-IN-THREAD",
    "    Atoll's own: a thread of the server panics (the server stops with a crash report).",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "REPLICATE <string>",
    "    Replicates the provided string to replicas, allowing data divergence.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "CLIENT-EVICTION",
    "    Show low level client eviction pools info (maxmemory-clients).",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
];

/// C's `atoi`: leading digits (after an optional sign), 0 for anything else.
fn atoi(b: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(b);
    let t = s.trim_start();
    let end = t.char_indices().take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && (*c == '-' || *c == '+'))).count();
    t[..end].parse().unwrap_or(0)
}

// DEBUG <subcommand> [arg ...]
pub fn debug(ctx: &mut Ctx) -> CmdResult {
    let sub = String::from_utf8_lossy(ctx.args[1]).to_ascii_lowercase();
    let argc = ctx.args.len();
    match (sub.as_str(), argc) {
        ("help", 2) => help_reply(ctx, "DEBUG", HELP),
        ("config-rewrite-force-all", 2) => {
            super::server::rewrite_config(ctx.srv, true)
                .map_err(|e| CmdError::msg(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}")))?;
            ctx.reply.ok();
        }
        ("aof-flush-sleep", 3) => {
            let us = ctx.arg_i64(2)?.max(0) as u64;
            crate::persist::aof::FLUSH_SLEEP_US.store(us, std::sync::atomic::Ordering::Relaxed);
            ctx.reply.ok();
        }
        ("sleep", 3) => {
            // Redis stops its whole server for the time, and so does this: the client's worker
            // sleeps (holding no shard, or a transaction's shards as EXEC does in Redis) and
            // every other worker waits where its next round begins. The time counts as the
            // command's own (slow log, latency monitor).
            let secs = crate::engine::zset::strtod(ctx.args[2]).0;
            let us = if secs.is_finite() && secs > 0.0 { (secs * 1e6) as u64 } else { 0 };
            ctx.srv.freeze.sleep(std::time::Duration::from_micros(us));
            ctx.reply.ok();
        }
        ("set-skip-checksum-validation", 3) => {
            ctx.srv.skip_checksum.store(atoi(ctx.args[2]) != 0, Ordering::Relaxed);
            ctx.reply.ok();
        }
        ("drop-cluster-packet-filter", 3) => {
            let kind = ctx.arg_i64(2)?;
            ctx.srv.cluster.drop_filter.store(kind, Ordering::Relaxed);
            ctx.reply.ok();
        }
        ("clusterlink", 5) if eq_ic(ctx.args[2], "kill") => super::cluster::kill_link(ctx)?,
        ("set-active-expire", 3) => {
            ctx.srv.active_expire.store(atoi(ctx.args[2]) != 0, Ordering::Relaxed);
            ctx.reply.ok();
        }
        ("pause-cron", 3) => {
            ctx.srv.cron_paused.store(atoi(ctx.args[2]) != 0, Ordering::Relaxed);
            ctx.reply.ok();
        }
        ("log", 3) => {
            crate::log_warning!("DEBUG LOG: {}", String::from_utf8_lossy(ctx.args[2]));
            ctx.reply.ok();
        }
        ("error", 3) => {
            // Written as a raw reply, as Redis does: not counted as an error reply.
            let text: Vec<u8> = ctx.args[2].iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect();
            ctx.reply.raw(b"-");
            ctx.reply.raw(&text);
            ctx.reply.raw(b"\r\n");
        }
        ("replicate", n) if n >= 3 => {
            // Into the replication stream only, with no SELECT before it (Redis's dictid -1).
            let argv: Vec<&[u8]> = ctx.args[2..].to_vec();
            ctx.srv.repl.feed_command(&ctx.srv.reach(), &argv);
            ctx.reply.ok();
        }
        ("change-repl-id", 2) => {
            *ctx.srv.replid.lock() = crate::daemons::replication::new_replid();
            crate::log_notice!("Changing replication IDs after receiving DEBUG change-repl-id");
            ctx.reply.ok();
        }
        ("object", 3) => {
            let key = ctx.args[2];
            let (srv, db, now) = (ctx.srv, ctx.ks.db, ctx.ks.now);
            // Redis reads the dictionary directly: no expiry, no access-time update.
            let line = ctx
                .ks
                .locks
                .with_shard(db, key_shard(key), |sh| sh.keys.get(key).map(|v| object_line(srv, now, &v, v.lru())));
            ctx.reply.simple(&line.ok_or(CmdError::NoSuchKey)?);
        }
        ("digest", 2) => {
            let d = dataset_digest(ctx);
            ctx.reply.simple(&d);
        }
        ("digest-value", _) => {
            let keys = &ctx.args[2..];
            ctx.reply.array(keys.len());
            for k in keys {
                let db = ctx.ks.db;
                let mut d = [0u8; 20];
                ctx.ks.locks.with_shard(db, key_shard(k), |sh| {
                    if let Some(v) = sh.keys.get(k) {
                        value_digest(&mut d, &v, sh.expires.contains_key(k));
                    }
                });
                ctx.reply.simple(&hex(&d));
            }
        }
        ("protocol", 3) => protocol(ctx)?,
        ("populate", 3..=5) => populate(ctx)?,
        ("htstats", 3 | 4) => {
            let db = parse_int(ctx.args[2])?;
            if db < 0 || db as usize >= ctx.srv.ks.num_dbs() {
                return Err(CmdError::msg("ERR Out of range database"));
            }
            let full = argc == 4 && eq_ic(ctx.args[3], "full");
            let (mut keys, mut expires) = (Vec::new(), Vec::new());
            if ctx.srv.ks.db_if_exists(db as usize).is_some() {
                for s in 0..SHARDS {
                    ctx.ks.locks.with_shard(db as usize, s, |sh| {
                        keys.push(sh.keys.stats());
                        expires.push(sh.expires.stats());
                    });
                }
            }
            let text = format!(
                "[Dictionary HT]\n{}[Expires HT]\n{}",
                dict_stats_text(&merge_stats(keys.into_iter()), full),
                dict_stats_text(&merge_stats(expires.into_iter()), full)
            );
            ctx.reply.verbatim("txt", text.as_bytes());
        }
        ("htstats-key", 3 | 4) => {
            let full = argc == 4 && eq_ic(ctx.args[3], "full");
            let stats = with_live(ctx, ctx.args[2], |v| match v {
                Value::Set(s) => s.dict_stats(),
                Value::Hash(h) => h.dict_stats(),
                Value::ZSet(z) => z.dict_stats(),
                _ => None,
            })
            .ok_or(CmdError::NoSuchKey)?;
            let stats = stats.ok_or_else(|| {
                CmdError::msg("ERR The value stored at the specified key is not represented using an hash table")
            })?;
            ctx.reply.verbatim("txt", dict_stats_text(&stats, full).as_bytes());
        }
        ("listpack", 3) | ("quicklist", 3 | 4) => {
            let want = if sub == "listpack" { "listpack" } else { "quicklist" };
            let info = with_live(ctx, ctx.args[2], |v| {
                (v.encoding() == want).then(|| format!("{{encoding {want}}} {{count {}}}", value_len(v)))
            })
            .ok_or(CmdError::NoSuchKey)?;
            let Some(info) = info else {
                return Err(CmdError::msg(if want == "listpack" {
                    "ERR Not a listpack encoded object."
                } else {
                    "ERR Not a quicklist encoded object."
                }));
            };
            println!("{info}");
            ctx.reply.simple(if want == "listpack" {
                "Listpack structure printed on stdout"
            } else {
                "Quicklist structure printed on stdout"
            });
        }
        ("quicklist-packed-threshold", 3) => {
            let bad = || CmdError::msg("ERR argument must be a memory value bigger than 1 and smaller than 4gb");
            let v = crate::config::parse_memory(&String::from_utf8_lossy(ctx.args[2])).ok_or_else(bad)?;
            if v > (4u64 << 30) - (1 << 20) {
                return Err(bad());
            }
            let t = if v == 0 { crate::engine::list::DEFAULT_PACKED_THRESHOLD } else { v as usize };
            crate::engine::list::PACKED_THRESHOLD.store(t, Ordering::Relaxed);
            ctx.reply.ok();
        }
        ("stringmatch-test", 2) => {
            stringmatch_test();
            ctx.reply.simple("Apparently Redis did not crash: test passed");
        }
        ("replybuffer", 4) if eq_ic(ctx.args[2], "peak-reset-time") => {
            // Atoll's reply buffers are the worker's, sized per round: there is no per-client
            // peak to reset. The setting is checked and accepted.
            if !eq_ic(ctx.args[3], "never") && !eq_ic(ctx.args[3], "reset") {
                parse_int(ctx.args[3])?;
            }
            ctx.reply.ok();
        }
        ("replybuffer", 4) if eq_ic(ctx.args[2], "resizing") => ctx.reply.ok(),
        ("set-disable-deny-scripts", 3) => {
            ctx.srv.deny_scripts_disabled.store(atoi(ctx.args[2]) != 0, Ordering::Relaxed);
            ctx.reply.ok();
        }
        ("client-eviction", 2) => client_eviction_buckets(ctx)?,
        // Crash on purpose (tests of crash reporting), as Redis's do: the crash report goes
        // to the log and the process dies by the signal.
        ("segfault", 2) => {
            // SAFETY: raising a signal on ourselves; the crash handler reports and dies.
            unsafe { libc::raise(libc::SIGSEGV) };
        }
        // Atoll's own, for tests of the panic policy (`log::install_panic_policy`): a handler
        // that writes nothing panics (answered with an error, the server stays up), and a
        // thread of the server panics (the process stops with a report).
        ("panic-in-handler", 2) => panic!("DEBUG PANIC-IN-HANDLER"),
        ("panic-in-thread", 2) => {
            let t = std::thread::Builder::new().name("atoll-debug".into());
            t.spawn(|| panic!("DEBUG PANIC-IN-THREAD")).map_err(|e| CmdError::msg(format!("ERR {e}")))?;
            ctx.reply.ok();
        }
        ("panic", 2) => {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            crate::log_warning!("Guru Meditation: DEBUG PANIC called at Unix time {t}");
            crate::log::crash("DEBUG PANIC");
        }
        ("hotkeys", 2 | 3) => {
            let n = if argc == 3 { parse_int(ctx.args[2])?.clamp(0, 64) as usize } else { 10 };
            let top = crate::services::hotkeys::top(ctx.srv.stats.workers.iter().map(|w| &w.hot), n);
            ctx.reply.array(top.len());
            for (db, key, hits) in top {
                ctx.reply.array(3);
                ctx.reply.bulk(&key);
                ctx.reply.int(db as i64);
                ctx.reply.int(hits as i64);
            }
        }
        ("reload", _) => {
            let (mut save, mut flush, mut merge) = (true, true, false);
            for &opt in &ctx.args[2..] {
                if eq_ic(opt, "MERGE") {
                    merge = true;
                } else if eq_ic(opt, "NOFLUSH") {
                    flush = false;
                } else if eq_ic(opt, "NOSAVE") {
                    save = false;
                } else {
                    return Err(CmdError::msg("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."));
                }
            }
            // Every shard is locked (`reload_locks_all`): the dataset is replaced atomically.
            if let Err(e) = crate::daemons::persistence::reload(ctx.srv, ctx.ks.locks, save, flush, merge) {
                crate::log_warning!("DEBUG RELOAD: {e}");
                return Err(CmdError::msg("ERR Error trying to load the RDB dump, check server logs."));
            }
            crate::log_notice!("DB reloaded by DEBUG RELOAD");
            ctx.reply.ok();
        }
        ("loadaof", 2) => {
            if ctx.client.in_exec {
                // It locks every shard; inside EXEC this client already holds some.
                return Err(CmdError::msg("ERR DEBUG LOADAOF is not allowed inside MULTI/EXEC in Atoll"));
            }
            if let Err(e) = crate::daemons::aof::debug_loadaof(ctx.srv) {
                crate::log_warning!("DEBUG LOADAOF: {e}");
                return Err(CmdError::msg("ERR Error trying to load the AOF files, check server logs."));
            }
            crate::log_notice!("Append Only File loaded by DEBUG LOADAOF");
            ctx.reply.ok();
        }
        _ => return Err(unknown(ctx.args[1])),
    }
    Ok(())
}

/// DEBUG's lock scope: RELOAD replaces the whole dataset, so it locks every database.
pub fn reload_locks_all(args: &[&[u8]]) -> bool {
    args.len() > 1 && eq_ic(args[1], "RELOAD")
}

/// Runs `f` on the live value at `key` in the client's database (a key past its time counts
/// as missing); None if there is none. DEBUG locks no shard up front, so it takes the key's
/// shard here.
fn with_live<R>(ctx: &mut Ctx, key: &[u8], f: impl FnOnce(&Value) -> R) -> Option<R> {
    let (db, now) = (ctx.ks.db, ctx.ks.now);
    ctx.ks.locks.with_shard(db, key_shard(key), |sh| {
        if sh.is_expired(key, now) {
            return None;
        }
        sh.keys.get(key).map(|v| f(&v))
    })
}

fn value_len(v: &Value) -> usize {
    match v {
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::Hash(h) => h.len(),
        Value::ZSet(z) => z.len(),
        _ => 1,
    }
}

/// DEBUG PROTOCOL <type>: one test value of each RESP3 type, degraded for RESP2 as Redis does.
fn protocol(ctx: &mut Ctx) -> CmdResult {
    let t = String::from_utf8_lossy(ctx.args[2]).to_ascii_lowercase();
    let r = &mut *ctx.reply;
    let resp3 = r.proto == Proto::Resp3;
    match t.as_str() {
        "string" => r.bulk(b"Hello World"),
        "integer" => r.int(12345),
        // Redis's test value, not π.
        #[allow(clippy::approx_constant)]
        "double" => r.double(3.141),
        "bignum" => {
            if resp3 {
                r.raw(b"(1234567999999999999999999999999999999\r\n");
            } else {
                r.bulk(b"1234567999999999999999999999999999999");
            }
        }
        "null" => r.null(),
        "array" => {
            r.array(3);
            (0..3).for_each(|i| r.int(i));
        }
        "set" => {
            r.set(3);
            (0..3).for_each(|i| r.int(i));
        }
        "map" => {
            r.map(3);
            for i in 0..3 {
                r.int(i);
                r.bool(i == 1);
            }
        }
        "attrib" => {
            if resp3 {
                r.raw(b"|1\r\n");
                r.bulk(b"key-popularity");
                r.array(2);
                r.bulk(b"key:123");
                r.int(90);
            }
            r.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !resp3 {
                return Err(CmdError::msg("ERR RESP2 is not supported by this command"));
            }
            // Redis 7.2 sends a push generated during a command after the command's reply.
            r.bulk(b"Some real reply following the push reply");
            r.push(2);
            r.bulk(b"server-cpu-usage");
            r.int(42);
        }
        "verbatim" => r.verbatim("txt", b"This is a verbatim\nstring"),
        "true" => r.bool(true),
        "false" => r.bool(false),
        _ => {
            return Err(CmdError::msg(
                "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

/// DEBUG POPULATE count [prefix] [size]: keys `prefix:N` holding `value:N` (cut or padded
/// with NUL bytes to `size`); existing keys are left alone; nothing is propagated.
fn populate(ctx: &mut Ctx) -> CmdResult {
    let bad = || CmdError::msg("ERR value is out of range, must be positive");
    let count = parse_int(ctx.args[2]).map_err(|_| bad())?;
    if count < 0 {
        return Err(bad());
    }
    let prefix = ctx.args.get(3).copied().unwrap_or(b"key");
    let size = match ctx.args.get(4) {
        Some(a) => {
            let s = parse_int(a).map_err(|_| bad())?;
            if s < 0 {
                return Err(bad());
            }
            s as usize
        }
        None => 0,
    };
    let (db, now, lru) = (ctx.ks.db, ctx.ks.now, ctx.ks.lru_clock);
    let mut added = 0u64;
    let mut key = Vec::new();
    let mut buf = itoa::Buffer::new();
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(buf.format(j).as_bytes());
        let mut val = format!("value:{j}").into_bytes();
        if size > 0 {
            val.resize(size, 0);
        }
        ctx.ks.locks.with_shard(db, key_shard(&key), |sh| {
            if sh.is_expired(&key, now) {
                sh.remove(&key);
            }
            if !sh.keys.contains_key(&key) {
                sh.keys.insert_new(&key, crate::engine::Obj { val: Value::from_text(&val), lru });
                sh.touch_watched(&key);
                added += 1;
            }
        });
    }
    ctx.ks.dirty += added;
    ctx.no_effect();
    ctx.reply.ok();
    Ok(())
}

/// DEBUG STRINGMATCH-TEST: Redis's fuzz test of its glob matcher, run against ours: random
/// patterns and strings must never panic or run away (the matcher is iterative).
fn stringmatch_test() {
    use rand::Rng;
    let mut r = rand::thread_rng();
    let alphabet = b"ab*?[]^-\\x";
    for _ in 0..20_000 {
        let p: Vec<u8> = (0..r.gen_range(0..16)).map(|_| alphabet[r.gen_range(0..alphabet.len())]).collect();
        let s: Vec<u8> = (0..r.gen_range(0..16)).map(|_| alphabet[r.gen_range(0..alphabet.len())]).collect();
        crate::engine::glob::glob_match(&p, &s, r.gen());
    }
}

/// DEBUG CLIENT-EVICTION: the clients `maxmemory-clients` may evict (normal and Pub/Sub ones
/// without `no-evict`), by memory in Redis's 19 power-of-two buckets (the first up to 32 KB,
/// the last 4 GB and over), with each bucket's total — measured now, as CLIENT LIST's
/// `tot-mem`.
fn client_eviction_buckets(ctx: &mut Ctx) -> Result<(), CmdError> {
    const MIN_LOG: u32 = 15;
    const MAX_LOG: u32 = 33;
    const BUCKETS: usize = (1 + MAX_LOG - MIN_LOG) as usize;
    if ctx.srv.config.hot.maxmemory_clients.load(Ordering::Relaxed) == 0 {
        return Err(CmdError::msg("ERR maxmemory-clients is disabled."));
    }
    let mut sums = [(0u64, 0u64); BUCKETS];
    ctx.srv.clients.for_each(|h| {
        let r = |a: &std::sync::atomic::AtomicBool| a.load(Ordering::Relaxed);
        if r(&h.no_evict) || r(&h.replica) || r(&h.master) || r(&h.killed) {
            return;
        }
        let mem = h.memory();
        let bits = (u64::BITS - mem.leading_zeros()).clamp(MIN_LOG, MAX_LOG);
        let b = &mut sums[(bits - MIN_LOG) as usize];
        b.0 += mem;
        b.1 += 1;
    });
    let mut out = String::new();
    for (j, (sum, n)) in sums.iter().enumerate() {
        if j == 0 {
            out.push_str("bucket          0");
        } else {
            out.push_str(&format!("bucket {:>10}", 1u64 << (j as u32 - 1 + MIN_LOG)));
        }
        if j == BUCKETS - 1 {
            out.push_str("+            : ");
        } else {
            out.push_str(&format!(" - {:>10}: ", (1u64 << (j as u32 + MIN_LOG)) - 1));
        }
        out.push_str(&format!("tot-mem: {sum:>10}, clients: {n}\n"));
    }
    ctx.reply.verbatim("txt", out.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors read off Redis 7.2.6 (DEBUG DIGEST-VALUE and its score formatting).
    #[test]
    fn digests_match_redis() {
        let mut d = [0u8; 20];
        value_digest(&mut d, &Value::from_bytes(b"hello world"), false);
        assert_eq!(hex(&d), "19bfad8f2007c7c5d8559839d8798339f62ccc52");
        let mut d = [0u8; 20];
        value_digest(&mut d, &Value::from_bytes(b"12345"), false);
        assert_eq!(hex(&d), "e1cf90774e995ae03de66e8109dc5cb9d9c2dc83");
        let mut kd = [0u8; 20];
        mix_digest(&mut kd, b"str");
        value_digest(&mut kd, &Value::from_bytes(b"hello world"), false);
        let mut fin = [0u8; 20];
        mix_digest(&mut fin, &0u32.to_be_bytes());
        xor_digest(&mut fin, &kd);
        assert_eq!(hex(&fin), "34611bafb667761b64e0d7c8e719fdbb7edb2b2c");
    }

    #[test]
    fn scores_are_formatted_as_the_digest_does() {
        for (v, s) in [
            (1.0, "1"),
            (2.5, "2.5"),
            (0.1, "0.1"),
            (1e8, "1e+8"),
            (1e9, "1e+9"),
            (1e21, "1e+21"),
            (1e-7, "1e-7"),
            (1e-6, "0.000001"),
            (12345678.0, "12345678"),
            (10000000.0, "10000000"),
            (-1.5e-300, "-1.5e-300"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(digest_score(v), s, "{v}");
        }
    }
}
