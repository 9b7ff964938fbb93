//! The command table (DESIGN habit 1): the single source of truth for dispatch, arity checks,
//! the generic gates, COMMAND INFO/DOCS/GETKEYS and each command's lock scope.
//!
//! Each row below names a command, its function and its lock scope. Its facts — arity, flags,
//! ACL categories, key specs, arguments — come from `specs.json`, extracted from Redis's
//! command specs by `tools/gen_specs.py` (which reads this file for the list of names).

use super::keyspec::KeySpec;
use super::*;
use crate::engine::LockPlan;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

pub type Handler = for<'c, 'a, 'k> fn(&mut Ctx<'c, 'a, 'k>) -> CmdResult;
/// Builds a lock plan for commands whose key specs do not say everything (MOVE, COPY … DB,
/// SWAPDB): arguments, the client's db.
pub type PlanFn = fn(&[&[u8]], usize, &mut LockPlan) -> CmdResult;

/// What a command locks (DESIGN §1).
#[derive(Clone, Copy)]
pub enum Scope {
    /// Touches no keys (PING, CLIENT …).
    None,
    /// Locks the shards of the keys its key specs name.
    Keys,
    /// Walks the database one shard at a time (KEYS, SCAN, DBSIZE, RANDOMKEY); inside a
    /// transaction it locks the whole database instead.
    Walk,
    /// Reads every database one shard at a time (INFO keyspace); inside a transaction it
    /// locks every database instead, so it never waits for a shard its own EXEC holds.
    WalkAll,
    /// Locks every shard of the client's database (FLUSHDB).
    Db,
    /// Locks every shard of every database (FLUSHALL).
    All,
    /// Key specs plus a plan function for what they cannot express.
    Custom(PlanFn),
}

struct Row {
    name: &'static str,
    handler: Handler,
    scope: Scope,
}

const fn c(name: &'static str, handler: Handler, scope: Scope) -> Row {
    Row { name, handler, scope }
}

use super::{bitmap as bm, connection as conn, keys, multi, server as srv, string as st};
use Scope::*;

#[rustfmt::skip]
static ROWS: &[Row] = &[
    // connection
    c("ping", conn::ping, None),
    c("echo", conn::echo, None),
    c("auth", conn::auth, None),
    c("hello", conn::hello, None),
    c("quit", conn::quit, None),
    c("reset", conn::reset, None),
    c("select", conn::select, None),
    c("client", conn::client_help, None),
    c("client|help", conn::client_help, None),
    c("client|id", conn::client_id, None),
    c("client|getname", conn::client_getname, None),
    c("client|setname", conn::client_setname, None),
    c("client|setinfo", conn::client_setinfo, None),
    c("client|list", conn::client_list, None),
    c("client|info", conn::client_info, None),
    c("client|kill", conn::client_kill, None),
    c("client|reply", conn::client_reply, None),
    c("client|no-evict", conn::client_no_evict, None),
    c("client|no-touch", conn::client_no_touch, None),
    c("client|unblock", conn::client_unblock, None),
    // transactions
    c("multi", multi::multi, None),
    c("exec", multi::exec, None),
    c("discard", multi::discard, None),
    c("watch", multi::watch, Keys),
    c("unwatch", multi::unwatch, None),
    // server
    c("info", srv::info, WalkAll),
    c("time", srv::time, None),
    c("dbsize", srv::dbsize, Walk),
    c("flushdb", srv::flushdb, Db),
    c("flushall", srv::flushall, All),
    c("swapdb", srv::swapdb, Custom(srv::plan_swapdb)),
    c("config", srv::config_help, None),
    c("config|help", srv::config_help, None),
    c("config|get", srv::config_get, None),
    c("config|set", srv::config_set, None),
    c("config|resetstat", srv::config_resetstat, None),
    c("config|rewrite", srv::config_rewrite, None),
    c("command", srv::command, None),
    c("command|count", srv::command_count, None),
    c("command|info", srv::command_info, None),
    c("command|docs", srv::command_docs, None),
    c("command|list", srv::command_list, None),
    c("command|getkeys", srv::command_getkeys, None),
    c("command|getkeysandflags", srv::command_getkeysandflags, None),
    c("command|help", srv::command_help, None),
    c("debug", srv::debug, None),
    c("shutdown", srv::shutdown, None),
    c("script", srv::script_help, None),
    c("script|flush", srv::script_flush, None),
    c("function", srv::function_help, None),
    c("function|flush", srv::function_flush, None),
    c("lastsave", srv::lastsave, None),
    // generic keyspace
    c("del", keys::del, Keys),
    c("unlink", keys::unlink, Keys),
    c("exists", keys::exists, Keys),
    c("type", keys::type_, Keys),
    c("rename", keys::rename, Keys),
    c("renamenx", keys::renamenx, Keys),
    c("copy", keys::copy, Custom(keys::plan_copy)),
    c("move", keys::move_, Custom(keys::plan_move)),
    c("keys", keys::keys, Walk),
    c("scan", keys::scan, Walk),
    c("randomkey", keys::randomkey, Walk),
    c("expire", keys::expire, Keys),
    c("pexpire", keys::pexpire, Keys),
    c("expireat", keys::expireat, Keys),
    c("pexpireat", keys::pexpireat, Keys),
    c("expiretime", keys::expiretime, Keys),
    c("pexpiretime", keys::pexpiretime, Keys),
    c("ttl", keys::ttl, Keys),
    c("pttl", keys::pttl, Keys),
    c("persist", keys::persist, Keys),
    c("touch", keys::touch, Keys),
    c("object", keys::object_help, None),
    c("object|help", keys::object_help, None),
    c("object|encoding", keys::object_encoding, Keys),
    c("object|freq", keys::object_freq, Keys),
    c("object|idletime", keys::object_idletime, Keys),
    c("object|refcount", keys::object_refcount, Keys),
    // strings
    c("get", st::get, Keys),
    c("set", st::set, Keys),
    c("setnx", st::setnx, Keys),
    c("setex", st::setex, Keys),
    c("psetex", st::psetex, Keys),
    c("getset", st::getset, Keys),
    c("getdel", st::getdel, Keys),
    c("getex", st::getex, Keys),
    c("mget", st::mget, Keys),
    c("mset", st::mset, Keys),
    c("msetnx", st::msetnx, Keys),
    c("incr", st::incr, Keys),
    c("decr", st::decr, Keys),
    c("incrby", st::incrby, Keys),
    c("decrby", st::decrby, Keys),
    c("incrbyfloat", st::incrbyfloat, Keys),
    c("append", st::append, Keys),
    c("strlen", st::strlen, Keys),
    c("getrange", st::getrange, Keys),
    c("substr", st::getrange, Keys),
    c("setrange", st::setrange, Keys),
    c("lcs", st::lcs, Keys),
    // bitmaps
    c("setbit", bm::setbit, Keys),
    c("getbit", bm::getbit, Keys),
    c("bitcount", bm::bitcount, Keys),
    c("bitpos", bm::bitpos, Keys),
    c("bitop", bm::bitop, Keys),
    c("bitfield", bm::bitfield, Keys),
    c("bitfield_ro", bm::bitfield_ro, Keys),
    // lists (types::list) — rows below this line belong to the list module
    c("lpush", crate::types::list::lpush, Keys),
    c("rpush", crate::types::list::rpush, Keys),
    c("lpushx", crate::types::list::lpushx, Keys),
    c("rpushx", crate::types::list::rpushx, Keys),
    c("linsert", crate::types::list::linsert, Keys),
    c("llen", crate::types::list::llen, Keys),
    c("lindex", crate::types::list::lindex, Keys),
    c("lrange", crate::types::list::lrange, Keys),
    c("lpos", crate::types::list::lpos, Keys),
    c("lset", crate::types::list::lset, Keys),
    c("lrem", crate::types::list::lrem, Keys),
    c("ltrim", crate::types::list::ltrim, Keys),
    c("lpop", crate::types::list::lpop, Keys),
    c("rpop", crate::types::list::rpop, Keys),
    c("lmove", crate::types::list::lmove, Keys),
    c("rpoplpush", crate::types::list::rpoplpush, Keys),
    c("lmpop", crate::types::list::lmpop, Keys),
    c("blpop", crate::types::list::blpop, Keys),
    c("brpop", crate::types::list::brpop, Keys),
    c("blmpop", crate::types::list::blmpop, Keys),
    c("blmove", crate::types::list::blmove, Keys),
    c("brpoplpush", crate::types::list::brpoplpush, Keys),
    // hashes (types::hash)
    c("hset", crate::types::hash::hset, Keys),
    c("hmset", crate::types::hash::hmset, Keys),
    c("hsetnx", crate::types::hash::hsetnx, Keys),
    c("hdel", crate::types::hash::hdel, Keys),
    c("hincrby", crate::types::hash::hincrby, Keys),
    c("hincrbyfloat", crate::types::hash::hincrbyfloat, Keys),
    c("hget", crate::types::hash::hget, Keys),
    c("hmget", crate::types::hash::hmget, Keys),
    c("hlen", crate::types::hash::hlen, Keys),
    c("hstrlen", crate::types::hash::hstrlen, Keys),
    c("hexists", crate::types::hash::hexists, Keys),
    c("hkeys", crate::types::hash::hkeys, Keys),
    c("hvals", crate::types::hash::hvals, Keys),
    c("hgetall", crate::types::hash::hgetall, Keys),
    c("hrandfield", crate::types::hash::hrandfield, Keys),
    c("hscan", crate::types::hash::hscan, Keys),
    // sets (types::set)
    c("sadd", crate::types::set::sadd, Keys),
    c("srem", crate::types::set::srem, Keys),
    c("smembers", crate::types::set::smembers, Keys),
    c("sismember", crate::types::set::sismember, Keys),
    c("smismember", crate::types::set::smismember, Keys),
    c("scard", crate::types::set::scard, Keys),
    c("spop", crate::types::set::spop, Keys),
    c("srandmember", crate::types::set::srandmember, Keys),
    c("smove", crate::types::set::smove, Keys),
    c("sinter", crate::types::set::sinter, Keys),
    c("sintercard", crate::types::set::sintercard, Keys),
    c("sinterstore", crate::types::set::sinterstore, Keys),
    c("sunion", crate::types::set::sunion, Keys),
    c("sunionstore", crate::types::set::sunionstore, Keys),
    c("sdiff", crate::types::set::sdiff, Keys),
    c("sdiffstore", crate::types::set::sdiffstore, Keys),
    c("sscan", crate::types::set::sscan, Keys),
    // sorted sets (types::zset)
    c("zadd", crate::types::zset::zadd, Keys),
    c("zincrby", crate::types::zset::zincrby, Keys),
    c("zrem", crate::types::zset::zrem, Keys),
    c("zcard", crate::types::zset::zcard, Keys),
    c("zcount", crate::types::zset::zcount, Keys),
    c("zlexcount", crate::types::zset::zlexcount, Keys),
    c("zscore", crate::types::zset::zscore, Keys),
    c("zmscore", crate::types::zset::zmscore, Keys),
    c("zrank", crate::types::zset::zrank, Keys),
    c("zrevrank", crate::types::zset::zrevrank, Keys),
    c("zrange", crate::types::zset::zrange, Keys),
    c("zrangestore", crate::types::zset::zrangestore, Keys),
    c("zrangebyscore", crate::types::zset::zrangebyscore, Keys),
    c("zrevrangebyscore", crate::types::zset::zrevrangebyscore, Keys),
    c("zrangebylex", crate::types::zset::zrangebylex, Keys),
    c("zrevrangebylex", crate::types::zset::zrevrangebylex, Keys),
    c("zrevrange", crate::types::zset::zrevrange, Keys),
    c("zremrangebyrank", crate::types::zset::zremrangebyrank, Keys),
    c("zremrangebyscore", crate::types::zset::zremrangebyscore, Keys),
    c("zremrangebylex", crate::types::zset::zremrangebylex, Keys),
    c("zpopmin", crate::types::zset::zpopmin, Keys),
    c("zpopmax", crate::types::zset::zpopmax, Keys),
    c("zmpop", crate::types::zset::zmpop, Keys),
    c("bzpopmin", crate::types::zset::bzpopmin, Keys),
    c("bzpopmax", crate::types::zset::bzpopmax, Keys),
    c("bzmpop", crate::types::zset::bzmpop, Keys),
    c("zrandmember", crate::types::zset::zrandmember, Keys),
    c("zunion", crate::types::zset::zunion, Keys),
    c("zinter", crate::types::zset::zinter, Keys),
    c("zdiff", crate::types::zset::zdiff, Keys),
    c("zunionstore", crate::types::zset::zunionstore, Keys),
    c("zinterstore", crate::types::zset::zinterstore, Keys),
    c("zdiffstore", crate::types::zset::zdiffstore, Keys),
    c("zintercard", crate::types::zset::zintercard, Keys),
    c("zscan", crate::types::zset::zscan, Keys),
    // geo (types::geo)
    c("geoadd", crate::types::geo::geoadd, Keys),
    c("geodist", crate::types::geo::geodist, Keys),
    c("geohash", crate::types::geo::geohash, Keys),
    c("geopos", crate::types::geo::geopos, Keys),
    c("georadius", crate::types::geo::georadius, Keys),
    c("georadius_ro", crate::types::geo::georadius_ro, Keys),
    c("georadiusbymember", crate::types::geo::georadiusbymember, Keys),
    c("georadiusbymember_ro", crate::types::geo::georadiusbymember_ro, Keys),
    c("geosearch", crate::types::geo::geosearch, Keys),
    c("geosearchstore", crate::types::geo::geosearchstore, Keys),
    // streams (types::stream)
    c("xadd", crate::types::stream::xadd, Keys),
    c("xlen", crate::types::stream::xlen, Keys),
    c("xrange", crate::types::stream::xrange, Keys),
    c("xrevrange", crate::types::stream::xrevrange, Keys),
    c("xdel", crate::types::stream::xdel, Keys),
    c("xtrim", crate::types::stream::xtrim, Keys),
    c("xsetid", crate::types::stream::xsetid, Keys),
    c("xread", crate::types::stream::xread, Keys),
    c("xreadgroup", crate::types::stream::xreadgroup, Keys),
    c("xack", crate::types::stream::xack, Keys),
    c("xpending", crate::types::stream::xpending, Keys),
    c("xclaim", crate::types::stream::xclaim, Keys),
    c("xautoclaim", crate::types::stream::xautoclaim, Keys),
    c("xgroup", crate::types::stream::xgroup_help, None),
    c("xgroup|help", crate::types::stream::xgroup_help, None),
    c("xgroup|create", crate::types::stream::xgroup_create, Keys),
    c("xgroup|setid", crate::types::stream::xgroup_setid, Keys),
    c("xgroup|destroy", crate::types::stream::xgroup_destroy, Keys),
    c("xgroup|createconsumer", crate::types::stream::xgroup_createconsumer, Keys),
    c("xgroup|delconsumer", crate::types::stream::xgroup_delconsumer, Keys),
    c("xinfo", crate::types::stream::xinfo_help, None),
    c("xinfo|help", crate::types::stream::xinfo_help, None),
    c("xinfo|stream", crate::types::stream::xinfo_stream, Keys),
    c("xinfo|groups", crate::types::stream::xinfo_groups, Keys),
    c("xinfo|consumers", crate::types::stream::xinfo_consumers, Keys),
    // hyperloglog (types::hll)
    c("pfadd", crate::types::hll::pfadd, Keys),
    c("pfcount", crate::types::hll::pfcount, Keys),
    c("pfmerge", crate::types::hll::pfmerge, Keys),
    // sort (types::sort)
    c("sort", crate::types::sort::sort, Db),
    c("sort_ro", crate::types::sort::sort_ro, Db),
];

/// Command flags (Redis's CMD_* bits) used by the gates.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    pub const PROTECTED: u32 = 1 << 16;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    pub const MOVABLE_KEYS: u32 = 1 << 18;

    pub fn from_name(n: &str) -> u32 {
        match n {
            "WRITE" => WRITE,
            "READONLY" => READONLY,
            "DENYOOM" => DENYOOM,
            "ADMIN" => ADMIN,
            "PUBSUB" => PUBSUB,
            "NOSCRIPT" => NOSCRIPT,
            "BLOCKING" => BLOCKING,
            "LOADING" => LOADING,
            "STALE" => STALE,
            "SKIP_MONITOR" => SKIP_MONITOR,
            "SKIP_SLOWLOG" => SKIP_SLOWLOG,
            "FAST" => FAST,
            "NO_AUTH" => NO_AUTH,
            "MAY_REPLICATE" => MAY_REPLICATE,
            "NO_MULTI" => NO_MULTI,
            "ALLOW_BUSY" => ALLOW_BUSY,
            "PROTECTED" => PROTECTED,
            "NO_MANDATORY_KEYS" => NO_MANDATORY_KEYS,
            _ => 0,
        }
    }
}

pub struct Command {
    /// Lower-case full name: `get`, `config|get`.
    pub name: String,
    /// Index into per-command statistics.
    pub id: usize,
    pub arity: i64,
    pub flags: u32,
    /// Flag names as COMMAND INFO prints them (lower case).
    pub flag_names: Vec<String>,
    pub acl_categories: Vec<String>,
    pub tips: Vec<String>,
    pub key_specs: Vec<KeySpec>,
    /// Legacy (first, last, step) key range for COMMAND INFO.
    pub legacy_range: (i64, i64, i64),
    /// `Some(i)` when the command's only key is always argument `i` (the lock plan's fast
    /// path: GET, SET, INCR …).
    pub single_key: Option<usize>,
    pub handler: Handler,
    pub scope: Scope,
    pub subcommands: Vec<Arc<Command>>,
    pub spec: Json,
    pub is_container: bool,
}

impl Command {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Arity check: positive = exact, negative = at least |arity|.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        (self.arity > 0 && argc == self.arity) || (self.arity < 0 && argc >= -self.arity)
    }

    pub fn subcommand(&self, name: &[u8]) -> Option<&Arc<Command>> {
        let prefix = self.name.len() + 1;
        self.subcommands.iter().find(|s| s.name.as_bytes()[prefix..].eq_ignore_ascii_case(name))
    }

    /// Name for error messages and stats: `get`, `config|get`.
    pub fn full_name(&self) -> &str {
        &self.name
    }
}

pub struct CommandTable {
    /// Keyed by the lowercase name's bytes: a lookup neither allocates nor validates UTF-8.
    /// foldhash, not ahash: names are a few bytes, where it takes about half the instructions
    /// (ahash without AES-NI at build time falls back to a slower mix), and a table that
    /// never grows after start-up cannot be flooded.
    map: HashMap<Box<[u8]>, Arc<Command>, foldhash::fast::RandomState>,
    /// Every command and subcommand, indexed by `Command::id`.
    pub all: Vec<Arc<Command>>,
}

static SPECS_JSON: &str = include_str!("specs.json");

fn single_key(specs: &[KeySpec]) -> Option<usize> {
    use super::keyspec::{Begin, Find};
    match specs {
        [KeySpec { begin: Begin::Index(p), find: Find::Range { lastkey: 0, .. }, .. }] if *p > 0 => Some(*p as usize),
        _ => Option::None,
    }
}

fn legacy_range(specs: &[KeySpec]) -> ((i64, i64, i64), bool) {
    use super::keyspec::{Begin, Find};
    let mut range: Option<(i64, i64, i64)> = Option::None;
    let mut movable = false;
    for s in specs {
        match (&s.begin, &s.find) {
            (Begin::Index(pos), Find::Range { lastkey, step, limit }) if *limit <= 1 => {
                let last = if *lastkey < 0 { *lastkey } else { pos + lastkey };
                match range {
                    Option::None => range = Some((*pos, last, *step)),
                    Some((f, l, st)) => {
                        if l >= 0 && *pos == l + 1 && *step == st {
                            range = Some((f, last, st));
                        } else if l >= 0 && last >= 0 && *step == st {
                            range = Some((f.min(*pos), l.max(last), st));
                        } else {
                            movable = true;
                        }
                    }
                }
            }
            _ => movable = true,
        }
    }
    (range.unwrap_or((0, 0, 0)), movable)
}

impl CommandTable {
    pub fn build() -> CommandTable {
        let specs: serde_json::Map<String, Json> = serde_json::from_str(SPECS_JSON).expect("specs.json is valid JSON");
        let mut all: Vec<Arc<Command>> = Vec::new();
        let make = |row: &Row, id: usize, subs: Vec<Arc<Command>>| -> Command {
            let key = row.name.to_uppercase().replace('|', " ");
            let spec = specs.get(&key).unwrap_or_else(|| panic!("no spec for {key}")).clone();
            let flag_list: Vec<String> = spec["command_flags"]
                .as_array()
                .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
                .unwrap_or_default();
            let mut fl = flag_list.iter().fold(0, |acc, f| acc | flags::from_name(f));
            let key_specs: Vec<KeySpec> =
                spec["key_specs"].as_array().map(|a| a.iter().map(KeySpec::from_json).collect()).unwrap_or_default();
            let (legacy, movable) = legacy_range(&key_specs);
            let single = single_key(&key_specs);
            let mut flag_names: Vec<String> = flag_list
                .iter()
                .filter(|f| {
                    !matches!(
                        f.as_str(),
                        "SENTINEL" | "ONLY_SENTINEL" | "NO_ASYNC_LOADING" | "PROTECTED" | "TOUCHES_ARBITRARY_KEYS"
                    )
                })
                .map(|f| f.to_lowercase())
                .collect();
            if movable {
                fl |= flags::MOVABLE_KEYS;
                flag_names.push("movablekeys".into());
            }
            Command {
                name: row.name.to_string(),
                id,
                arity: spec["arity"].as_i64().unwrap_or(-1),
                flags: fl,
                flag_names,
                acl_categories: spec["acl_categories"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|c| c.as_str().map(|s| format!("@{}", s.to_lowercase()))).collect())
                    .unwrap_or_default(),
                tips: spec["command_tips"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|c| c.as_str().map(|s| s.to_lowercase())).collect())
                    .unwrap_or_default(),
                key_specs,
                legacy_range: legacy,
                single_key: single,
                handler: row.handler,
                scope: row.scope,
                is_container: !subs.is_empty(),
                subcommands: subs,
                spec,
            }
        };
        let mut map = HashMap::with_hasher(foldhash::fast::RandomState::default());
        // Subcommands first, so their containers can own them.
        let mut subs_of: HashMap<&str, Vec<Arc<Command>>> = HashMap::new();
        for row in ROWS.iter().filter(|r| r.name.contains('|')) {
            let parent = row.name.split('|').next().unwrap();
            let cmd = Arc::new(make(row, all.len(), Vec::new()));
            all.push(cmd.clone());
            subs_of.entry(parent).or_default().push(cmd);
        }
        for row in ROWS.iter().filter(|r| !r.name.contains('|')) {
            let subs = subs_of.remove(row.name).unwrap_or_default();
            let cmd = Arc::new(make(row, all.len(), subs));
            all.push(cmd.clone());
            map.insert(row.name.as_bytes().into(), cmd);
        }
        assert!(subs_of.is_empty(), "subcommands without a container row");
        CommandTable { map, all }
    }

    /// Case-insensitive lookup of a top-level command without allocating for short names.
    pub fn lookup(&self, name: &[u8]) -> Option<&Arc<Command>> {
        let mut buf = [0u8; 32];
        let lower = buf.get_mut(..name.len())?;
        for (d, &b) in lower.iter_mut().zip(name) {
            *d = b.to_ascii_lowercase();
        }
        self.map.get(&*lower)
    }

    /// Top-level commands (containers included, subcommands not).
    pub fn top_level(&self) -> impl Iterator<Item = &Arc<Command>> {
        self.map.values()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_builds_and_matches_specs() {
        let t = CommandTable::build();
        let get = t.lookup(b"GET").unwrap();
        assert_eq!(get.arity, 2);
        assert_eq!(get.legacy_range, (1, 1, 1));
        assert!(get.has(flags::READONLY));
        let mset = t.lookup(b"mset").unwrap();
        assert_eq!(mset.legacy_range, (1, -1, 2));
        let cfg = t.lookup(b"config").unwrap();
        assert!(cfg.subcommand(b"GET").is_some());
        assert_eq!(cfg.subcommand(b"get").unwrap().full_name(), "config|get");
    }
}
